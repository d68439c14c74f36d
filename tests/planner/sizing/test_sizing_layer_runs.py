"""Layer patterns in JSON as runs of a repeated unit (issue 13, item 10: compact encoding)."""

from __future__ import annotations

import json

from planner.sizing import PlanInputs, catalog_gpus, catalog_models, compute_plan, plan_to_dict
from planner.sizing.layer_runs import layer_runs, layer_runs_json


def _expand(runs: list[dict]) -> list[int]:
    return [group for run in runs for _ in range(run["repeat"]) for group in run["unit"]]


def test_alternating_layers_are_one_run():
    assert layer_runs_json((0, 1) * 128) == [{"unit": [0, 1], "repeat": 128}]


def test_a_period_with_a_tail():
    # Gemma 3 27B: 62 layers, five sliding then one full, ten times, then two sliding.
    pattern = (0, 0, 0, 0, 0, 1) * 10 + (0, 0)
    assert layer_runs(pattern) == (((0, 0, 0, 0, 0, 1), 10), ((0,), 2))


def test_uniform_and_empty_patterns():
    assert layer_runs_json((0,) * 80) == [{"unit": [0], "repeat": 80}]
    assert layer_runs_json(()) == []


def test_irregular_layers_become_literal_runs_between_repeats():
    # Nemotron-H style: irregular stretches are kept as they are, repeats still fold.
    pattern = (1, 2, 0, 1, 2, 0, 0, 2, 1, 1, 1, 1, 1)
    assert layer_runs_json(pattern) == [
        {"unit": [1, 2, 0], "repeat": 2},
        {"unit": [0, 2], "repeat": 1},
        {"unit": [1], "repeat": 5},
    ]
    assert _expand(layer_runs_json(pattern)) == list(pattern)


def test_every_catalog_model_round_trips_and_shrinks():
    for slug, model in catalog_models().items():
        runs = layer_runs_json(model.layer_pattern)
        assert _expand(runs) == list(model.layer_pattern), slug
        assert len(runs) <= len(model.layer_pattern), slug


def test_the_plan_answer_carries_runs():
    model = catalog_models()["gemma-3-27b"]
    plan = compute_plan(PlanInputs(model=model, gpu=catalog_gpus()["h100-sxm"], max_model_len=8192))
    answer = plan_to_dict(plan)
    assert answer["inputs"]["model"]["layer_pattern"] == [
        {"unit": [0, 0, 0, 0, 0, 1], "repeat": 10},
        {"unit": [0], "repeat": 2},
    ]
    json.dumps(answer)  # still plain JSON
