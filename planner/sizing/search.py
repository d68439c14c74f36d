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
from .inputs import KV_CACHE_DTYPES, WEIGHT_DTYPES, PlanInputs, resolve_inputs
from .kv_cache import group_bytes_per_token, kv_element_bytes
from .memory import serving_dtype, weight_bytes
from .model_spec import ModelSpec
from .plan import Plan, build_plan

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


def _known_rank(gpu: GpuSpec, count: int, kv_dtype: str) -> tuple[int, float, int, int]:
    """The part of a candidate's rank known before planning it: priced first, cost, GPUs, own KV precision."""
    priced = gpu.price_per_hour is not None
    cost = gpu.price_per_hour * count if gpu.price_per_hour is not None else count * gpu.memory_bytes
    return (
        0 if priced else 1,
        float(cost),
        count,
        0 if kv_dtype == "auto" else 1,  # same price: keep the model's own KV precision
    )


def _known_rank_of(candidate: Candidate) -> tuple[int, float, int, int]:
    return _known_rank(candidate.gpu, candidate.gpu_count, candidate.kv_cache_dtype)


def _rank(candidate: Candidate) -> tuple[int, float, int, int, float]:
    return (*_known_rank_of(candidate), -candidate.plan.max_concurrency)


def _tokens_per_request_by_group(model: ModelSpec, max_len: int) -> tuple[int, ...]:
    """Per layer group: the token-layers one request of ``max_len`` surely holds in that group's cache.

    A full-attention layer holds every token; a sliding-window layer at least ``window - 1`` (vLLM keeps the
    window plus what is in flight), a chunked-local layer at least one chunk; never more than ``max_len``.
    State and other layers claim nothing here (their bytes are not per token).
    """
    counts: dict[int, int] = {}
    for index in model.layer_pattern:
        counts[index] = counts.get(index, 0) + 1
    tokens = []
    for index, group in enumerate(model.layer_groups):
        if group.kind == "full":
            per_layer = max_len
        elif group.kind == "sliding_window" and group.window is not None:
            per_layer = min(group.window - 1, max_len)
        elif group.kind == "chunked_local" and group.window is not None:
            per_layer = min(group.window, max_len)
        else:
            per_layer = 0  # a kind this bound does not know: claim nothing for it
        tokens.append(counts.get(index, 0) * per_layer)
    return tuple(tokens)


def _cannot_fit(*, concurrency: int, budget: float, replicas: int, request_bytes: int | None) -> bool:
    """True when even the whole budget left after the weights holds fewer than ``concurrency`` requests.

    A necessary condition of ``Plan.fits`` (so pruning never drops a candidate): each replica's share of the
    requests needs at least ``request_bytes`` of KV (``_tokens_per_request_by_layer`` token-layers; vLLM's
    worst case rounds up to whole blocks and adds what is in flight, so the real need is larger), and the
    KV cache is at most the utilisation budget less the weights (activation and non-torch only take more).
    """
    if request_bytes is None:
        return False  # a KV dtype the plan itself will name as bad
    replica_requests = -(-concurrency // replicas)
    return budget <= 0 or replica_requests * request_bytes > budget


def _request_bytes(
    memo: dict[tuple[int, str], int | None],
    model: ModelSpec,
    tp: int,
    kv_dtype: str,
    layer_tokens: tuple[int, ...],
    dtype: str,
) -> int | None:
    key = (tp, kv_dtype)
    if key not in memo:
        if model.compressed_attention is not None:
            memo[key] = None  # DeepSeek-V4's caches are not per-layer KV: no bound, the plan decides
        elif kv_dtype in KV_CACHE_DTYPES:
            group_bytes = group_bytes_per_token(model, tp, kv_element_bytes(kv_dtype, dtype), kv_dtype)
            memo[key] = sum(t * b for t, b in zip(layer_tokens, group_bytes, strict=True))
        else:
            memo[key] = None
    return memo[key]


def search_configurations(
    inputs: PlanInputs,
    *,
    gpus: Sequence[GpuSpec] | None = None,
    max_gpus: int = 8,
    kv_dtypes: Sequence[str] = ("auto", "fp8"),
    prune: bool = True,
    limit: int | None = None,
) -> list[Candidate]:
    """Configurations meeting the SLA in ``inputs`` (fit at ``concurrency``, TPOT and TTFT targets), cheapest first.

    ``prune`` skips, before planning them, configurations whose memory cannot hold the requests (see
    ``_cannot_fit``); the answer is the same without it, only slower. ``limit`` answers only the cheapest
    ``limit`` (the first ``limit`` of the full answer), planning configurations cheapest first until no
    other can enter.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise SizingInputError({"limit": "must be a positive integer"})
    if isinstance(max_gpus, bool) or not isinstance(max_gpus, int) or max_gpus < 1:
        raise SizingInputError({"max_gpus": "must be a positive integer"})
    base = dataclasses.replace(inputs, kv_cache_memory_gib=None, gpu_count=None, pipeline_parallel_size=1)
    resolved = resolve_inputs(dataclasses.replace(base, tensor_parallel_size=1))  # reject bad inputs up front
    max_len = resolved.inputs.max_model_len
    assert max_len is not None
    model = inputs.model
    if model.compressed_attention is not None:
        # DeepSeek-V4 caches fp8_ds_mla under auto and fp8 alike: one candidate, not two of the same.
        kv_dtypes = tuple(dict.fromkeys("auto" if kv_dtype == "fp8" else kv_dtype for kv_dtype in kv_dtypes))
    layer_tokens = _tokens_per_request_by_group(model, max_len)
    dtype = serving_dtype(model, inputs.weight_dtype) if inputs.weight_dtype in WEIGHT_DTYPES else model.dtype
    request_bytes: dict[tuple[int, str], int | None] = {}
    valid_tp = {tp: valid_tensor_parallel(model, tp) for tp in GPU_COUNTS}
    pool = list(gpus) if gpus is not None else list(catalog_gpus().values())
    weights = weight_bytes(model, inputs.weight_dtype).total if inputs.weight_dtype in WEIGHT_DTYPES else 0
    if inputs.weights_gib is not None:
        weights = round(inputs.weights_gib * 2**30)
    utilization = inputs.gpu_memory_utilization or resolved.rules.default_gpu_memory_utilization
    trials: list[tuple[tuple[int, float, int, int], GpuSpec, int, int, str]] = []
    for gpu in pool:
        for count in GPU_COUNTS:
            if count > max_gpus:
                break
            tp = 1
            while tp <= count:
                if not valid_tp[tp] or weights / tp > gpu.memory_bytes * utilization:
                    tp *= 2
                    continue
                budget = gpu.memory_bytes * utilization - weights / tp
                for kv_dtype in kv_dtypes:
                    if prune and _cannot_fit(
                        concurrency=inputs.concurrency,
                        budget=budget,
                        replicas=count // tp,
                        request_bytes=_request_bytes(request_bytes, model, tp, kv_dtype, layer_tokens, dtype),
                    ):
                        continue
                    trials.append((_known_rank(gpu, count, kv_dtype), gpu, count, tp, kv_dtype))
                tp *= 2
    # Plan the trials in rank order: everything of a candidate's rank but its max_concurrency (the last,
    # tie-breaking key) is known before planning, so once ``limit`` candidates are found only trials that
    # tie with the last of them can still enter the answer.
    trials.sort(key=lambda trial: trial[0])
    candidates: list[Candidate] = []
    for known, gpu, count, tp, kv_dtype in trials:
        if limit is not None and len(candidates) >= limit and known > _known_rank_of(candidates[limit - 1]):
            break
        trial = dataclasses.replace(base, gpu=gpu, gpu_count=count, tensor_parallel_size=tp, kv_cache_dtype=kv_dtype)
        try:
            plan = build_plan(trial, table=False)
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
            if limit is not None:
                candidates.sort(key=_rank)
    candidates.sort(key=_rank)
    return candidates if limit is None else candidates[:limit]


__all__ = ["Candidate", "search_configurations"]
