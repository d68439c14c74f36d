from __future__ import annotations

import dataclasses

from planner.sizing import PlanInputs, catalog_gpus, catalog_models, compute_plan
from planner.sizing.compute import _advice_cached


def _missing_plan_inputs(**changes: object) -> PlanInputs:
    base = PlanInputs(
        model=catalog_models()["qwen3-8b"], gpu=catalog_gpus()["rtx-4090"], max_model_len=32768, concurrency=4
    )
    return dataclasses.replace(base, **changes)


def test_the_same_question_reuses_its_advice_and_a_different_one_does_not():
    _advice_cached.cache_clear()
    first = compute_plan(_missing_plan_inputs())
    again = compute_plan(_missing_plan_inputs())
    assert first.advice and again.advice == first.advice
    assert _advice_cached.cache_info().hits == 1

    shorter = compute_plan(_missing_plan_inputs(concurrency=8))
    assert _advice_cached.cache_info().misses == 2
    shorter_context = next(row for row in shorter.advice if row.kind == "max_model_len")
    first_context = next(row for row in first.advice if row.kind == "max_model_len")
    assert shorter_context.changes["max_model_len"] < first_context.changes["max_model_len"]


def test_advice_off_never_touches_the_cache():
    _advice_cached.cache_clear()
    plan = compute_plan(_missing_plan_inputs(), advice=False)
    assert plan.advice == ()
    assert _advice_cached.cache_info().currsize == 0
