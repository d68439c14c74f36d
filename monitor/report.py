"""Planned against actual: what the scenario's plan allocates per engine against what the server's
``cache_config_info`` says it allocated, and which input most likely explains the difference.

The cause is found by re-planning with the server's own settings, one at a time (gpu_memory_utilization,
block_size, kv cache dtype): the setting whose re-plan lands nearest to the server's figure, if it closes
most of the gap, is the cause. When none does, what is left is the plan's estimate of activation and
non-torch memory (or an engine release that budgets differently).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from monitor.models import Endpoint
from planner.services import scenario_plan_inputs
from planner.sizing import PlanInputs, SizingInputError, compute_plan
from planner.sizing.figures import reported_block_size, reported_capacity_tokens

DEVIATION_FLAG_PCT = 5.0

# vLLM's cache_dtype label -> the planner's kv_cache_dtype choice.
_KV_DTYPES = {
    "auto": "auto",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "fp8": "fp8",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}

CAUSE_TEXT = {
    "gpu_memory_utilization": "the server runs with --gpu-memory-utilization {actual} where the plan assumed {planned}",
    "block_size": "the server uses --block-size {actual} where the plan assumed {planned}",
    "kv_cache_dtype": "the server's KV cache dtype is {actual} where the plan assumed {planned}",
    "estimate": "the plan's activation / non-torch memory estimate (or the engine release) differs from this "
    "server's: set activation or non-torch memory on the scenario, or its engine_version",
}


@dataclass(frozen=True)
class Actual:
    num_gpu_blocks: int
    block_size: int
    gpu_memory_utilization: float | None
    cache_dtype: str | None


def endpoint_actual(endpoint: Endpoint) -> Actual | None:
    """The server's own allocation from its latest scrape (engine 0: data-parallel engines are alike)."""
    latest = endpoint.latest if isinstance(endpoint.latest, dict) else {}
    engines = [latest[key] for key in sorted(latest, key=lambda k: (len(k), k))]
    for engine in engines:
        blocks, block_size = engine.get("num_gpu_blocks"), engine.get("block_size")
        if isinstance(blocks, int) and isinstance(block_size, int) and blocks > 0 and block_size > 0:
            utilization = engine.get("gpu_memory_utilization")
            return Actual(
                num_gpu_blocks=blocks,
                block_size=block_size,
                gpu_memory_utilization=utilization if isinstance(utilization, float | int) else None,
                cache_dtype=engine.get("cache_dtype") if isinstance(engine.get("cache_dtype"), str) else None,
            )
    return None


def _tokens(inputs: PlanInputs) -> int | None:
    try:
        return reported_capacity_tokens(compute_plan(inputs))
    except SizingInputError:
        return None


def _candidates(inputs: PlanInputs, planned_util: float, planned_block: int, actual: Actual):
    if actual.gpu_memory_utilization is not None and abs(actual.gpu_memory_utilization - planned_util) > 1e-6:
        yield (
            "gpu_memory_utilization",
            dataclasses.replace(inputs, gpu_memory_utilization=float(actual.gpu_memory_utilization)),
            planned_util,
            actual.gpu_memory_utilization,
        )
    if actual.block_size != planned_block:
        yield "block_size", dataclasses.replace(inputs, block_size=actual.block_size), planned_block, actual.block_size
    dtype = _KV_DTYPES.get((actual.cache_dtype or "").lower())
    if dtype is not None and dtype != inputs.kv_cache_dtype:
        yield "kv_cache_dtype", dataclasses.replace(inputs, kv_cache_dtype=dtype), inputs.kv_cache_dtype, dtype


def endpoint_report(*, endpoint: Endpoint) -> dict[str, Any] | None:
    """The planned-vs-actual figures, or None when the endpoint has no scenario. Keys: planned_num_gpu_blocks,
    actual_num_gpu_blocks, planned_kv_tokens, actual_kv_tokens, deviation_pct, flagged, likely_cause,
    cause_detail, planned_max_concurrency, actual_max_concurrency (None where unknown)."""
    scenario = endpoint.scenario
    if scenario is None:
        return None
    report: dict[str, Any] = dict.fromkeys(
        (
            "actual_num_gpu_blocks",
            "actual_kv_tokens",
            "deviation_pct",
            "likely_cause",
            "cause_detail",
            "actual_max_concurrency",
            "plan_error",
        )
    )
    report.update(scenario=scenario.pk, scenario_name=scenario.name, flagged=False)
    try:
        inputs = scenario_plan_inputs(scenario=scenario)
        plan = compute_plan(inputs)
    except SizingInputError as error:
        report.update(planned_num_gpu_blocks=None, planned_kv_tokens=None, planned_max_concurrency=None)
        report["plan_error"] = str(error)
        return report
    # Tokens as cache_config_info counts them (num_gpu_blocks x the smallest group's block): like with like for
    # multi-group models whose plan counts larger blocks (DeepSeek-V4: 256-token blocks, reported as 4).
    planned_block = reported_block_size(plan)
    planned_tokens = reported_capacity_tokens(plan)
    report.update(
        planned_num_gpu_blocks=plan.num_gpu_blocks,
        planned_kv_tokens=planned_tokens,
        planned_block_size=planned_block,
        planned_max_concurrency=plan.max_concurrency,
    )
    actual = endpoint_actual(endpoint)
    if actual is None or planned_tokens <= 0:
        return report
    actual_tokens = actual.num_gpu_blocks * actual.block_size
    deviation = (actual_tokens - planned_tokens) / planned_tokens * 100
    report.update(
        actual_num_gpu_blocks=actual.num_gpu_blocks,
        actual_kv_tokens=actual_tokens,
        actual_block_size=actual.block_size,
        deviation_pct=round(deviation, 2),
        # Concurrency scales with capacity: the plan's figure times the ratio of tokens.
        actual_max_concurrency=plan.max_concurrency * actual_tokens / planned_tokens,
        flagged=abs(deviation) > DEVIATION_FLAG_PCT,
    )
    if not report["flagged"]:
        return report
    planned_util = plan.inputs.gpu_memory_utilization or 0.9
    best: tuple[float, str, Any, Any] | None = None
    for field, replanned, planned_value, actual_value in _candidates(inputs, planned_util, planned_block, actual):
        tokens = _tokens(replanned)
        if tokens is None:
            continue
        remaining = abs(actual_tokens - tokens) / planned_tokens * 100
        if best is None or remaining < best[0]:
            best = (remaining, field, planned_value, actual_value)
    # A setting explains the deviation if re-planning with it closes more than half of the gap.
    if best is not None and best[0] < abs(deviation) / 2:
        _, field, planned_value, actual_value = best
        report["likely_cause"] = field
        report["cause_detail"] = CAUSE_TEXT[field].format(planned=planned_value, actual=actual_value)
    else:
        report["likely_cause"] = "estimate"
        report["cause_detail"] = CAUSE_TEXT["estimate"]
    return report


def fleet_report() -> list[dict[str, Any]]:
    """Every enabled endpoint with a scenario, the furthest from its plan first."""
    endpoints = Endpoint.objects.filter(enabled=True, scenario__isnull=False).select_related(
        "node", "scenario", "scenario__model", "scenario__gpu"
    )
    rows = []
    for endpoint in endpoints:
        report = endpoint_report(endpoint=endpoint)
        if report is not None:
            rows.append({"endpoint": endpoint, **report})
    rows.sort(key=lambda row: -abs(row["deviation_pct"] or 0.0))
    return rows
