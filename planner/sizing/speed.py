"""Speed estimates (a roofline, labelled as such): decode step time, tokens/s, TPOT, prefill TTFT.

Decode is memory-bound: one step reads every weight on the rank once plus the KV cache of every
running sequence, at the GPU's peak bandwidth. Prefill is compute-bound: ``2 x active parameters``
FLOPs per token plus attention, at ``PREFILL_MFU`` of the peak dense BF16 rate split over tp ranks.
Real engines add kernel launch, scheduling and communication time: expect slower, not faster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import SizingInputError

if TYPE_CHECKING:
    from .plan import Plan

PREFILL_MFU = 0.4  # model FLOPs utilisation reached by large prefill chunks on recent GPUs
ESTIMATE_LABEL = "estimate (roofline: peak bandwidth for decode, 40% MFU for prefill); real engines are slower"


@dataclass(frozen=True)
class Estimates:
    decode_step_ms: float
    tokens_per_s_per_seq: float
    tokens_per_s_total: float
    tpot_ms: float
    prefill_ttft_ms: float
    prefill_mfu: float
    label: str


@dataclass(frozen=True)
class SpeedModel:
    """What the speed estimates need of a plan, per GPU rank of the largest pipeline stage."""

    bandwidth_bytes_per_s: float
    flops_per_s: float
    tensor_parallel_size: int
    pipeline_parallel_size: int
    dense_weight_bytes: float  # per rank: read every step
    expert_weight_bytes: float  # per rank: routed experts, read when some token routes to them
    num_experts: int
    experts_per_token: int
    active_params: int  # whole model
    kv_bytes_per_token_per_layer: int  # per rank
    kv_layers: tuple[tuple[int, int | None], ...]  # (layers on the stage, window or None)
    attention_layers: tuple[tuple[int, int | None], ...]  # the whole model's layers, for prefill FLOPs
    attention_width: int  # query heads x query/key head size
    # Recurrent state on the stage's state layers, per sequence per rank: read and written every step.
    state_bytes_per_seq: int = 0


def _expert_fraction_read(model: SpeedModel, batch: int) -> float:
    """Share of routed experts a batch touches: 1 - (1 - k/E)^batch with uniform routing."""
    if not model.num_experts or batch <= 0:
        return 0.0
    return 1.0 - (1.0 - model.experts_per_token / model.num_experts) ** batch


def decode_stage_seconds(model: SpeedModel, *, num_decode_seqs: int, context_tokens: int, prefill_tokens: int) -> float:
    """One stage's time for a step: ``context_tokens`` is the KV tokens read, summed over decode sequences."""
    average = context_tokens / num_decode_seqs if num_decode_seqs else 0.0
    kv_read = 0.0
    for layers, window in model.kv_layers:
        attended = min(average, window) if window is not None else average
        kv_read += layers * attended * num_decode_seqs
    kv_read *= model.kv_bytes_per_token_per_layer
    kv_read += 2 * model.state_bytes_per_seq * num_decode_seqs
    weights = model.dense_weight_bytes + model.expert_weight_bytes * _expert_fraction_read(
        model, num_decode_seqs + prefill_tokens
    )
    if num_decode_seqs + prefill_tokens == 0:
        return 0.0
    memory_s = (weights + kv_read) / model.bandwidth_bytes_per_s
    tokens = num_decode_seqs + prefill_tokens
    ranks = model.tensor_parallel_size * model.pipeline_parallel_size
    compute_s = 2 * model.active_params * tokens / ranks / (model.flops_per_s * PREFILL_MFU)
    return max(memory_s, compute_s)


def step_seconds(model: SpeedModel, *, num_decode_seqs: int, context_tokens: int, prefill_tokens: int) -> float:
    """A token passes every pipeline stage in turn, so a step takes ``pp`` stage times."""
    stage = decode_stage_seconds(
        model, num_decode_seqs=num_decode_seqs, context_tokens=context_tokens, prefill_tokens=prefill_tokens
    )
    return stage * model.pipeline_parallel_size


def prefill_seconds(model: SpeedModel, prompt_tokens: int) -> float:
    """Linear FLOPs ``2 x active x P`` plus causal attention (``2 x width x P^2`` per full layer)."""
    if prompt_tokens <= 0:
        return 0.0
    p = prompt_tokens
    attention = 0.0
    for layers, window in model.attention_layers:
        if window is None or window >= p:
            attention += layers * 2 * model.attention_width * p * p
        else:
            attention += layers * 4 * model.attention_width * p * min(window, p / 2)
    flops = 2 * model.active_params * p + attention
    return flops / (model.tensor_parallel_size * model.flops_per_s * PREFILL_MFU)


def estimate(
    model: SpeedModel, *, concurrency: int, context_tokens: int, prompt_tokens: int, data_parallel_size: int
) -> Estimates:
    batch = max(1, concurrency)
    step = step_seconds(model, num_decode_seqs=batch, context_tokens=batch * context_tokens, prefill_tokens=0)
    per_seq = 1.0 / step if step > 0 else 0.0
    return Estimates(
        decode_step_ms=step * 1e3,
        tokens_per_s_per_seq=per_seq,
        tokens_per_s_total=per_seq * batch * data_parallel_size,
        tpot_ms=step * 1e3,
        prefill_ttft_ms=prefill_seconds(model, prompt_tokens) * 1e3,
        prefill_mfu=PREFILL_MFU,
        label=ESTIMATE_LABEL,
    )


def step_time_seconds(plan: Plan, *, num_decode_seqs: int, context_tokens: int, prefill_tokens: int) -> float:
    """One engine step of a plan's replica: ``num_decode_seqs`` sequences decoding one token each, reading
    ``context_tokens`` KV tokens in total (summed over those sequences), plus ``prefill_tokens`` of prompt.
    """
    for name, value in (
        ("num_decode_seqs", num_decode_seqs),
        ("context_tokens", context_tokens),
        ("prefill_tokens", prefill_tokens),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SizingInputError({name: "must be a non-negative integer"})
    if plan.speed_model is None:
        raise SizingInputError({"plan": "has no speed model (built outside compute_plan)"})
    return step_seconds(
        plan.speed_model, num_decode_seqs=num_decode_seqs, context_tokens=context_tokens, prefill_tokens=prefill_tokens
    )
