"""Cheapest catalog configurations that meet a plan's SLA.

Tries every GPU type x GPU count (1, 2, 4, 8) x tensor-parallel size dividing the count (the rest as
data-parallel replicas, pp 1) x KV cache dtype, plans each, and keeps those that fit and meet the
TPOT/TTFT targets. Cost is ``price_per_hour x count`` where the catalog has a price; unpriced GPUs
rank after priced ones, by total GPU memory. ``kv_cache_memory_gib`` is GPU-specific and dropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from .advice import valid_tensor_parallel
from .catalog import catalog_gpus
from .errors import SizingInputError
from .hardware import GpuSpec
from .inputs import WEIGHT_DTYPES, PlanInputs, resolve_inputs
from .memory import weight_bytes
from .plan import Plan, _build_plan

GPU_COUNTS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Candidate:
    """One configuration meeting the SLA; ``plan`` is its plan (concurrency table for the target only)."""

    gpu: GpuSpec
    gpu_count: int
    tensor_parallel_size: int
    kv_cache_dtype: str
    cost_per_hour: float | None
    plan: Plan
    data_parallel_size: int = 1

    @property
    def price_note(self) -> str:
        """Empty for a priced configuration; else why it sits after every priced one."""
        if self.cost_per_hour is not None:
            return ""
        return f"{self.gpu.name} has no price: ranked after every priced configuration, by GPU memory"


def _rank(candidate: Candidate) -> tuple[int, float, int, int, float]:
    priced = candidate.cost_per_hour is not None
    cost = candidate.cost_per_hour if priced else candidate.gpu_count * candidate.gpu.memory_bytes
    return (
        0 if priced else 1,
        float(cost or 0.0),
        candidate.gpu_count,
        0 if candidate.kv_cache_dtype == "auto" else 1,  # same price: keep the model's own KV precision
        -candidate.plan.max_concurrency,
    )


def search_configurations(
    inputs: PlanInputs,
    *,
    gpus: Sequence[GpuSpec] | None = None,
    max_gpus: int = 8,
    kv_dtypes: Sequence[str] = ("auto", "fp8"),
) -> list[Candidate]:
    """Configurations meeting the SLA in ``inputs`` (fit at ``concurrency``, TPOT and TTFT targets), cheapest first."""
    if isinstance(max_gpus, bool) or not isinstance(max_gpus, int) or max_gpus < 1:
        raise SizingInputError({"max_gpus": "must be a positive integer"})
    base = dataclasses.replace(inputs, kv_cache_memory_gib=None, gpu_count=None, pipeline_parallel_size=1)
    resolve_inputs(dataclasses.replace(base, tensor_parallel_size=1))  # reject bad inputs once, up front
    model = inputs.model
    pool = list(gpus) if gpus is not None else list(catalog_gpus().values())
    weights = weight_bytes(model, inputs.weight_dtype).total if inputs.weight_dtype in WEIGHT_DTYPES else 0
    if inputs.weights_gib is not None:
        weights = round(inputs.weights_gib * 2**30)
    utilization = inputs.gpu_memory_utilization or 0.92
    candidates: list[Candidate] = []
    for gpu in pool:
        for count in GPU_COUNTS:
            if count > max_gpus:
                break
            tp = 1
            while tp <= count:
                if not valid_tensor_parallel(model, tp) or weights / tp > gpu.memory_bytes * utilization:
                    tp *= 2
                    continue
                for kv_dtype in kv_dtypes:
                    trial = dataclasses.replace(
                        base, gpu=gpu, gpu_count=count, tensor_parallel_size=tp, kv_cache_dtype=kv_dtype
                    )
                    try:
                        plan = _build_plan(trial, table=False)
                    except SizingInputError:
                        continue
                    if plan.meets_sla:
                        price = gpu.price_per_hour
                        candidates.append(
                            Candidate(
                                gpu=gpu,
                                gpu_count=count,
                                tensor_parallel_size=tp,
                                kv_cache_dtype=kv_dtype,
                                cost_per_hour=None if price is None else price * count,
                                plan=plan,
                                data_parallel_size=count // tp,
                            )
                        )
                tp *= 2
    candidates.sort(key=_rank)
    return candidates


__all__ = ["Candidate", "search_configurations"]
