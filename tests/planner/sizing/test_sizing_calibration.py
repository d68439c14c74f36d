"""The activation / non-torch estimate against real vLLM start-ups (data/vllm_startups.json).

Each point is one vLLM start-up log: the model, the CUDA-visible GPU total, utilisation, tp, pp, batched
tokens and engine release, and what vLLM printed for the weights, activation peak, non-torch memory and
KV cache. With the logged weights given (``weights_gib``) the KV budget isolates kvdash's activation and
non-torch estimate; every point must land within 3% of the KV cache vLLM allocated unless the point
documents why it cannot (``kv_tolerance_reason``). Run with ``-s`` to see the error table.
"""

from __future__ import annotations

import json
import statistics
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from planner.sizing import GIB, ModelSpec, PlanInputs, catalog_models, compute_plan, custom_gpu
from planner.sizing import model_spec_from_hf_config as spec_from_config
from planner.sizing.engine import engine_rules
from planner.sizing.memory import activation_bytes, non_torch_bytes

DATA_PATH = Path(__file__).parent / "data" / "vllm_startups.json"
KV_TOLERANCE = 0.03
WEIGHTS_TOLERANCE = 0.03
ACTIVATION_TOLERANCE_GIB = 0.3
NON_TORCH_TOLERANCE_GIB = 0.12  # releases before 0.18 logged 0.02-0.14 GiB at tp 1 (kvdash: 0.13)


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA_PATH.read_text(encoding="utf-8"))
    return data


def _points() -> list[dict[str, Any]]:
    return list(_data()["points"])


def _ids(points: list[dict[str, Any]]) -> list[str]:
    return [point["id"] for point in points]


@cache
def _model(point_id: str) -> ModelSpec:
    point = next(p for p in _points() if p["id"] == point_id)
    if point.get("catalog_slug"):
        return catalog_models()[point["catalog_slug"]]
    return spec_from_config(point["config"], name=point["model"])


def _plan(point: dict[str, Any], *, given_weights: bool):
    model = _model(point["id"])
    tp, pp = point["tp"], point["pp"]
    extra: dict[str, Any] = {}
    if given_weights:
        # Logged per GPU (the binding stage's for pp); kvdash takes the whole model and splits it evenly.
        extra["weights_gib"] = point["logged"]["weights_gib"] * tp * pp
    else:
        extra["weight_dtype"] = point["weight_dtype"]
    return compute_plan(
        PlanInputs(
            model=model,
            gpu=custom_gpu(memory_gib=point["total_gib"]),
            gpu_memory_utilization=point["gpu_memory_utilization"],
            tensor_parallel_size=tp,
            pipeline_parallel_size=pp,
            max_num_batched_tokens=point["max_num_batched_tokens"],
            max_num_seqs=point["max_num_seqs"],
            max_model_len=min(point["max_model_len"], model.max_position_embeddings),
            engine_version=point["engine_version"],
            **extra,
        )
    )


def _allocated_kv_gib(point: dict[str, Any]) -> float:
    """The KV memory vLLM sized its blocks from (for pp: the smallest stage's budget, see the point's note)."""
    return float(point.get("kv_allocated_gib", point["logged"]["kv_gib"]))


def _kv_error(point: dict[str, Any]) -> float:
    estimate = _plan(point, given_weights=True).kv_budget_bytes_per_gpu / GIB
    return (estimate - _allocated_kv_gib(point)) / _allocated_kv_gib(point)


POINTS = _points()


def test_the_data_set_is_broad_and_sourced():
    assert len(POINTS) >= 30
    assert len({p["model"] for p in POINTS}) >= 25
    assert len({p["engine_version"] for p in POINTS}) >= 8
    assert {p["tp"] for p in POINTS} >= {1, 2, 4}
    assert len({p["max_num_batched_tokens"] for p in POINTS}) >= 3
    assert len({p["total_gib"] for p in POINTS}) >= 4
    for point in POINTS:
        assert point["source"], point["id"]
        assert point.get("catalog_slug") or point.get("config"), point["id"]
        logged = point["logged"]
        assert logged["weights_gib"] > 0 and logged["kv_gib"] > 0, point["id"]
        for key in ("kv_tolerance", "weights_tolerance"):
            if key in point:
                assert point[f"{key}_reason"], point["id"]


@pytest.mark.parametrize("point", POINTS, ids=_ids(POINTS))
def test_kv_budget_with_logged_weights_matches_vllm(point):
    tolerance = point.get("kv_tolerance", KV_TOLERANCE)
    error = _kv_error(point)
    assert abs(error) <= tolerance, (
        f"{point['id']}: estimated KV off by {error:+.2%} of {_allocated_kv_gib(point):.2f} GiB"
        + (f" ({point['kv_tolerance_reason']})" if "kv_tolerance_reason" in point else "")
    )


def test_kv_error_distribution(capsys):
    errors = {point["id"]: _kv_error(point) for point in POINTS}
    absolute = sorted(abs(error) for error in errors.values())
    within = sum(error <= KV_TOLERANCE for error in absolute)
    with capsys.disabled():
        print(f"\nKV budget vs vLLM, {len(errors)} start-ups (logged weights given):")
        for point_id, error in sorted(errors.items(), key=lambda item: -abs(item[1])):
            print(f"  {error:+7.2%}  {point_id}")
        print(
            f"  median |error| {statistics.median(absolute):.2%}, 90th percentile "
            f"{absolute[int(0.9 * (len(absolute) - 1))]:.2%}, max {absolute[-1]:.2%}, "
            f"{within}/{len(absolute)} within {KV_TOLERANCE:.0%}"
        )
    assert statistics.median(absolute) < 0.005
    assert within >= 0.95 * len(absolute)


ACTIVATION_POINTS = [p for p in POINTS if p["logged"]["activation_gib"] is not None and p["pp"] == 1]


@pytest.mark.parametrize("point", ACTIVATION_POINTS, ids=_ids(ACTIVATION_POINTS))
def test_activation_and_non_torch_estimates_match_the_logged_split(point):
    rules = engine_rules(point["engine_version"])
    model = _model(point["id"])
    activation = (
        activation_bytes(
            model,
            tensor_parallel_size=point["tp"],
            max_num_batched_tokens=point["max_num_batched_tokens"],
            max_num_seqs=point["max_num_seqs"],
            rules=rules,
        )
        / GIB
    )
    non_torch = non_torch_bytes(tensor_parallel_size=point["tp"], rules=rules) / GIB
    logged = point["logged"]
    assert activation == pytest.approx(
        logged["activation_gib"], abs=point.get("activation_tolerance_gib", ACTIVATION_TOLERANCE_GIB)
    )
    assert non_torch == pytest.approx(
        logged["non_torch_gib"], abs=point.get("non_torch_tolerance_gib", NON_TORCH_TOLERANCE_GIB)
    )


WEIGHT_POINTS = [p for p in POINTS if p.get("catalog_slug")]


@pytest.mark.parametrize("point", WEIGHT_POINTS, ids=_ids(WEIGHT_POINTS))
def test_catalog_weight_estimate_matches_the_logged_weights(point):
    plan = _plan(point, given_weights=False)
    logged = point["logged"]["weights_gib"]
    estimate = plan.weights_bytes_per_gpu / GIB
    tolerance = point.get("weights_tolerance", WEIGHTS_TOLERANCE)
    assert estimate == pytest.approx(logged, rel=tolerance), point.get("weights_tolerance_reason", point["id"])


def test_catalog_points_without_any_override_stay_close():
    """Weights, activation and non-torch all estimated: the KV budget of catalog text models on their own.

    Left out: points with a documented tolerance, and multimodal models (their vision tower's weights and
    encoder profile are not in the catalog count). Where little KV memory is left the weights' error
    dominates it (gpt-oss-120b: 1.1 GiB of 3.33), so a point passes within 3% of its KV cache or within
    2% of the memory vLLM requested.
    """
    checked = 0
    for point in WEIGHT_POINTS:
        if point["vision"] or "kv_tolerance" in point or "weights_tolerance" in point:
            continue
        plan = _plan(point, given_weights=False)
        gap = abs(plan.kv_budget_bytes_per_gpu / GIB - _allocated_kv_gib(point))
        requested = plan.memory_per_gpu.requested_bytes / GIB
        assert gap <= KV_TOLERANCE * _allocated_kv_gib(point) or gap <= 0.02 * requested, point["id"]
        checked += 1
    assert checked >= 20
