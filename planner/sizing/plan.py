"""A plan: the answer to ``PlanInputs``. Result types, ``build_plan`` (without advice) and ``plan_to_dict``.

The advice, which re-plans alternatives and searches the catalog, is added by ``compute.compute_plan``:
this module imports neither the advice nor the search, so neither imports back into a cycle."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .advice import AdviceRow
from .command import vllm_command
from .engine import EngineRules
from .hardware import GIB
from .inputs import PlanInputs, resolve_inputs
from .kv_cache import (
    StageGroups,
    kv_bytes_per_token_per_layer,
    kv_element_bytes,
    max_length_for_blocks,
    pipeline_stages,
    request_blocks,
    stage_groups,
)
from .memory import activation_bytes, non_torch_bytes, weight_bytes
from .model_spec import ModelSpec
from .speed import Estimates, SpeedModel, estimate


@dataclass(frozen=True)
class MemoryBreakdown:
    """One GPU's memory, in bytes. ``requested + unrequested == total``."""

    total_bytes: int
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    kv_cache_bytes: int
    unrequested_bytes: int


# What binds a concurrency row's longest context: the scenario's max_model_len, the model's positions
# (max_position_embeddings, when max_model_len is left at it), or the KV cache.
LIMIT_MAX_MODEL_LEN = "max_model_len"
LIMIT_MODEL_POSITIONS = "max_position_embeddings"
LIMIT_KV_CACHE = "kv_cache"


@dataclass(frozen=True)
class ConcurrencyRow:
    """``max_context_len``: the longest context one request can have under the scenario's settings, so never
    above max_model_len; ``kv_limited_context_len``: what the KV cache alone would hold per request."""

    concurrency: int
    max_context_len: int
    kv_limited_context_len: int
    limited_by: str  # LIMIT_MAX_MODEL_LEN, LIMIT_MODEL_POSITIONS or LIMIT_KV_CACHE


@dataclass(frozen=True)
class Allocation:
    """Sequences of ``sequence_tokens`` that fit: contiguous max_model_len reservations vs paged blocks."""

    naive_sequences: int
    paged_sequences: int
    sequence_tokens: int


@dataclass(frozen=True)
class Assumption:
    name: str
    value: str
    source: str


@dataclass(frozen=True)
class KvCacheGroup:
    """vLLM's KV cache groups: ``num_groups`` groups of ``group_size`` layer slots each."""

    kind: str
    window: int | None
    num_layers: int
    num_groups: int
    worst_case_blocks: int


@dataclass(frozen=True)
class Plan:
    inputs: PlanInputs
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    page_size_bytes: int
    weights_bytes: int
    weights_bytes_per_gpu: int
    memory_per_gpu: MemoryBreakdown
    kv_budget_bytes_per_gpu: int
    num_gpu_blocks: int
    block_size: int
    kv_capacity_tokens: int
    worst_case_blocks_per_request: int
    max_concurrency: float
    max_context_len: int
    fits: bool
    problems: tuple[str, ...]
    concurrency_table: tuple[ConcurrencyRow, ...]
    allocation: Allocation
    estimates: Estimates | None  # None when vLLM would not start: there is nothing to time
    advice: tuple[AdviceRow, ...]
    vllm_command: str
    assumptions: tuple[Assumption, ...]
    # Additions beyond docs/sizing-engine.md.
    meets_sla: bool = True
    warnings: tuple[str, ...] = ()
    usable_blocks: int = 0
    layers_per_gpu: int = 0
    group_size: int = 0
    kv_groups: tuple[KvCacheGroup, ...] = ()
    in_flight_tokens: int = 0
    data_parallel_size: int = 1
    # The longest max_model_len vLLM would start with on this memory (one request of that length fits,
    # capped by the model's positions): vLLM's estimate_max_model_len. Not capped by the scenario's setting.
    longest_max_model_len: int = 0
    # Whether vLLM would start with these settings (weights, activations and one max_model_len request fit);
    # when not, ``shortfall_bytes_per_gpu`` is how much more memory per GPU it would need, and the
    # ``vllm_command`` is one vLLM refuses.
    starts: bool = True
    shortfall_bytes_per_gpu: int = 0
    speed_model: SpeedModel | None = field(default=None, repr=False, compare=False)
    # The pipeline stage whose requests need the most blocks (what every context figure is computed on).
    binding_stage: StageGroups | None = field(default=None, repr=False, compare=False)


TABLE_CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SOURCE_KV = "vllm/v1/kv_cache_interface.py (page_size_bytes); vllm/config/model.py (get_num_kv_heads)"
SOURCE_BUDGET = "vllm/v1/worker/gpu_worker.py (determine_available_memory)"
SOURCE_BLOCKS = "vllm/v1/core/kv_cache_utils.py (hybrid grouping, estimate_max_model_len)"


def _pow2_floor(value: int) -> int:
    return 1 << (value.bit_length() - 1) if value > 0 else 0


@dataclass(frozen=True)
class _Stage:
    groups: StageGroups
    num_blocks: int
    worst_case: int


def _kv_limited_length(
    inputs: PlanInputs, stage: StageGroups, blocks: int, concurrency: int, in_flight: int, upper: int
) -> int:
    model = inputs.model
    block_size = inputs.block_size
    assert block_size is not None
    if all(model.layer_groups[index].kind == "full" for index, _, _ in stage.groups):
        # Full attention only: c * groups * ceil(T / bs) <= blocks, solved directly.
        num_groups = sum(groups for _, _, groups in stage.groups)
        return min(upper, (blocks // (concurrency * num_groups)) * block_size)
    direct = _windowed_limited_length(inputs, stage, blocks, concurrency, in_flight, upper)
    if direct is not None:
        return direct
    return max_length_for_blocks(model, stage, blocks, concurrency, block_size, in_flight, upper)


def _windowed_limited_length(
    inputs: PlanInputs, stage: StageGroups, blocks: int, concurrency: int, in_flight: int, upper: int
) -> int | None:
    """The same answer as the binary search when it lies where every window is already full, else None.

    Past ``window - 1 + in_flight`` tokens (``window + in_flight`` for chunks) a windowed group's worst case
    stops growing, so a request then needs ``full_groups x ceil(T / bs) + windowed`` blocks: solved directly.
    """
    model, block_size = inputs.model, inputs.block_size
    assert block_size is not None
    saturated_from = 0
    full_groups = 0
    for index, _count, num_groups in stage.groups:
        group = model.layer_groups[index]
        if group.kind == "full" or group.window is None:
            full_groups += num_groups
        elif group.kind in ("sliding_window", "chunked_local"):
            reach = group.window - 1 + in_flight if group.kind == "sliding_window" else group.window + in_flight
            saturated_from = max(saturated_from, reach)
        else:
            return None  # a kind whose worst case this shortcut does not know
    if upper < saturated_from:
        return None
    windowed = request_blocks(model, stage, saturated_from, block_size, in_flight) - full_groups * -(
        -saturated_from // block_size
    )
    per_request = blocks // concurrency
    if full_groups == 0:
        return upper if per_request >= windowed else None
    length = (per_request - windowed) // full_groups * block_size
    return min(upper, length) if length >= saturated_from else None


def _typical_request(inputs: PlanInputs) -> tuple[int, int, int]:
    """(prompt, output, decode context) tokens of a typical request; unset lengths mean a full-length request."""
    assert inputs.max_model_len is not None
    output = inputs.output_tokens or 0
    prompt = inputs.prompt_tokens if inputs.prompt_tokens is not None else max(1, inputs.max_model_len - output)
    context = min(inputs.max_model_len, prompt + output // 2)
    return prompt, output, context


# The layer grouping of a model at a pipeline size walks every layer; a search or the advice plans the
# same model dozens of times, so keep recent groupings. Keyed by the model object (ModelSpec is frozen;
# the entry holds it, so the id cannot be reused while the entry lives).
_GROUPING_CACHE: dict[tuple[int, int], tuple[ModelSpec, tuple[StageGroups, ...], dict[int, int]]] = {}
_GROUPING_CACHE_MAX = 256


def _grouping(model: ModelSpec, pp: int) -> tuple[tuple[StageGroups, ...], dict[int, int]]:
    key = (id(model), pp)
    hit = _GROUPING_CACHE.get(key)
    if hit is not None and hit[0] is model:
        return hit[1], hit[2]
    stages = pipeline_stages(model.num_layers, pp)
    groups = tuple(stage_groups(model, layers) for layers in stages)
    kinds: dict[int, int] = {}
    for layer in max(stages, key=len):
        index = model.layer_pattern[layer]
        kinds[index] = kinds.get(index, 0) + 1
    if len(_GROUPING_CACHE) >= _GROUPING_CACHE_MAX:
        _GROUPING_CACHE.clear()
    _GROUPING_CACHE[key] = (model, groups, kinds)
    return groups, kinds


def _stage_groups(model: ModelSpec, pp: int) -> tuple[StageGroups, ...]:
    return _grouping(model, pp)[0]


def _layer_kinds_of_largest_stage(model: ModelSpec, pp: int) -> dict[int, int]:
    """Layers per layer group in the largest pipeline stage (what each decode step reads)."""
    return _grouping(model, pp)[1]


@dataclass(frozen=True)
class _Memory:
    """One GPU's memory as vLLM budgets it (``build_plan``'s memory step)."""

    weights_total: int
    weights_expert: int
    weights_per_gpu: int
    activation: int
    non_torch: int
    fixed: int
    requested: int
    kv_budget: int
    kv_alloc: int
    breakdown: MemoryBreakdown


def _memory(inputs: PlanInputs, rules: EngineRules, assumptions: list[Assumption]) -> _Memory:
    """Weights, activation peak, non-torch memory and the KV budget per GPU; notes the sources used."""
    model, gpu = inputs.model, inputs.gpu
    tp, pp = inputs.tensor_parallel_size, inputs.pipeline_parallel_size
    batched, utilization = inputs.max_num_batched_tokens, inputs.gpu_memory_utilization
    assert batched is not None and utilization is not None and inputs.max_num_seqs is not None
    ranks = tp * pp
    if inputs.weights_gib is not None:
        weights_total = round(inputs.weights_gib * GIB)
        weights = weight_bytes(model, "auto")
        expert_share = weights.routed_experts / weights.total if weights.total else 0.0
        weights_expert = round(weights_total * expert_share)
        assumptions.append(Assumption("weights", f"{inputs.weights_gib:g} GiB", "given (weights_gib)"))
    else:
        weights = weight_bytes(model, inputs.weight_dtype)
        weights_total, weights_expert = weights.total, weights.routed_experts
        count_source = "estimated from config shapes" if model.params_estimated else "catalog / given"
        assumptions.append(
            Assumption(
                "weights",
                f"{weights_total / GIB:.2f} GiB: {model.num_params / 1e9:.3f}B parameters, {weights.description}",
                f"parameter count {count_source}",
            )
        )
    weights_per_gpu = math.ceil(weights_total / ranks)
    assumptions.append(
        Assumption("weights_per_gpu", "whole model / (tp x pp)", "even split; embeddings are vocab-parallel")
    )
    if inputs.activation_gib is not None:
        activation = round(inputs.activation_gib * GIB)
    else:
        activation = activation_bytes(
            model,
            tensor_parallel_size=tp,
            max_num_batched_tokens=batched,
            max_num_seqs=inputs.max_num_seqs,
            rules=rules,
        )
        assumptions.append(
            Assumption(
                "activation_peak",
                f"{activation / GIB:.2f} GiB (estimate for {batched} batched tokens, {inputs.max_num_seqs} seqs)",
                "planner/sizing/memory.py, calibrated to measured H100 runs (llm-d planner; vLLM 0.19 and older)",
            )
        )
    if inputs.non_torch_gib is not None:
        non_torch = round(inputs.non_torch_gib * GIB)
    else:
        non_torch = non_torch_bytes(tensor_parallel_size=tp, rules=rules)
        assumptions.append(
            Assumption(
                "non_torch_memory",
                f"{non_torch / GIB:.2f} GiB",
                "measured start-ups: 0.25 GiB at tp 1 and ~2.1 GiB at tp 2-4 from vLLM 0.18; 0.13 and ~0.55 before",
            )
        )
    total = gpu.memory_bytes
    assumptions.append(
        Assumption("gpu_memory_total", f"{total / GIB:.2f} GiB", gpu.memory_note or "CUDA-visible total (given)")
    )
    fixed = weights_per_gpu + activation + non_torch
    if inputs.kv_cache_memory_gib is not None:
        kv_budget = round(inputs.kv_cache_memory_gib * GIB)
        requested = fixed + kv_budget
        assumptions.append(
            Assumption("kv_cache_memory", f"{inputs.kv_cache_memory_gib:g} GiB per GPU", "--kv-cache-memory-bytes")
        )
    else:
        requested = math.ceil(total * utilization)
        kv_budget = requested - fixed
    kv_alloc = max(0, kv_budget)
    breakdown = MemoryBreakdown(
        total_bytes=total,
        requested_bytes=requested,
        weights_bytes=weights_per_gpu,
        activation_bytes=activation,
        non_torch_bytes=non_torch,
        kv_cache_bytes=kv_alloc,
        unrequested_bytes=total - requested,
    )

    return _Memory(
        weights_total=weights_total,
        weights_expert=weights_expert,
        weights_per_gpu=weights_per_gpu,
        activation=activation,
        non_torch=non_torch,
        fixed=fixed,
        requested=requested,
        kv_budget=kv_budget,
        kv_alloc=kv_alloc,
        breakdown=breakdown,
    )


@dataclass(frozen=True)
class _Blocks:
    """KV blocks per GPU and what one request may hold (``build_plan``'s blocks step)."""

    in_flight: int
    num_blocks: int
    binding: _Stage
    worst_case: int
    max_concurrency: float
    capacity: int
    usable: int
    kv_groups: tuple[KvCacheGroup, ...]


def _blocks(
    inputs: PlanInputs, rules: EngineRules, kv_alloc: int, page_size: int, assumptions: list[Assumption]
) -> _Blocks:
    """Blocks and worst cases per pipeline stage; the engine takes the minimum blocks across ranks."""
    model, pp = inputs.model, inputs.pipeline_parallel_size
    block_size, max_len, batched = inputs.block_size, inputs.max_model_len, inputs.max_num_batched_tokens
    assert block_size is not None and max_len is not None and batched is not None
    if rules.async_in_flight:
        in_flight = batched * (2 if pp == 1 else pp)
        in_flight_source = "max_concurrent_batches x max_num_batched_tokens (2 with async scheduling at pp 1)"
    else:
        in_flight = batched
        in_flight_source = f"max_num_batched_tokens (engine {rules.label}, before async scheduling)"
    if model.is_hybrid or model.layer_groups[0].kind != "full":
        assumptions.append(Assumption("in_flight_tokens", str(in_flight), in_flight_source))
    stages = []
    for groups in _stage_groups(model, pp):
        blocks = kv_alloc // (page_size * groups.group_size) if page_size else 0
        stages.append(_Stage(groups, blocks, request_blocks(model, groups, max_len, block_size, in_flight)))
    num_blocks = min(stage.num_blocks for stage in stages)
    binding = max(stages, key=lambda stage: stage.worst_case)
    worst_case = binding.worst_case
    max_concurrency = num_blocks / worst_case if worst_case else 0.0
    capacity = num_blocks * block_size
    usable = max(0, num_blocks - 1)
    kv_groups = tuple(
        KvCacheGroup(
            kind=model.layer_groups[index].kind,
            window=model.layer_groups[index].window,
            num_layers=count,
            num_groups=num_groups,
            worst_case_blocks=num_groups
            * request_blocks(
                model,
                StageGroups(count, binding.groups.group_size, ((index, count, 1),)),
                max_len,
                block_size,
                in_flight,
            ),
        )
        for index, count, num_groups in binding.groups.groups
    )

    return _Blocks(in_flight, num_blocks, binding, worst_case, max_concurrency, capacity, usable, kv_groups)


def _concurrency_rows(
    inputs: PlanInputs, blocks: _Blocks, replica_concurrency: int, *, table: bool, assumptions: list[Assumption]
) -> tuple[list[ConcurrencyRow], int]:
    """The longest context per concurrency (the table, or the asked row only), and vLLM's longest max_model_len."""
    model, max_len = inputs.model, inputs.max_model_len
    assert max_len is not None
    binding, num_blocks, in_flight, capacity = blocks.binding, blocks.num_blocks, blocks.in_flight, blocks.capacity
    cap = model.max_position_embeddings
    upper = max(cap, capacity)
    concurrencies = sorted(set(TABLE_CONCURRENCIES) | {replica_concurrency}) if table else [replica_concurrency]
    rows = []
    setting_limit = LIMIT_MAX_MODEL_LEN if max_len < cap else LIMIT_MODEL_POSITIONS
    for concurrency in concurrencies:
        kv_limited = _kv_limited_length(inputs, binding.groups, num_blocks, concurrency, in_flight, upper)
        length = min(kv_limited, max_len)
        if inputs.context_rounding == "pow2":
            length = _pow2_floor(length)
        rows.append(
            ConcurrencyRow(concurrency, length, kv_limited, setting_limit if kv_limited >= max_len else LIMIT_KV_CACHE)
        )
    longest_max_model_len = _kv_limited_length(inputs, binding.groups, num_blocks, 1, in_flight, cap)
    if inputs.context_rounding == "pow2":
        assumptions.append(Assumption("context_rounding", "pow2", "context lengths rounded down to a power of two"))

    return rows, longest_max_model_len


@dataclass(frozen=True)
class _Fit:
    problems: tuple[str, ...]
    starts: bool
    shortfall: int


def _fit(
    inputs: PlanInputs,
    memory: _Memory,
    blocks: _Blocks,
    page_size: int,
    replica_concurrency: int,
    target_row: ConcurrencyRow,
) -> _Fit:
    """Whether vLLM starts at all (and how much memory it misses if not), then whether the asked concurrency fits."""
    max_len = inputs.max_model_len
    assert max_len is not None
    total = inputs.gpu.memory_bytes
    requested, fixed, kv_alloc = memory.requested, memory.fixed, memory.kv_alloc
    weights_per_gpu, activation, non_torch = memory.weights_per_gpu, memory.activation, memory.non_torch
    binding, num_blocks, worst_case = blocks.binding, blocks.num_blocks, blocks.worst_case
    in_flight, max_concurrency = blocks.in_flight, blocks.max_concurrency
    problems: list[str] = []
    available = min(requested, total)
    one_request = worst_case * page_size * binding.groups.group_size
    shortfall = 0
    if fixed > available:
        shortfall = fixed + one_request - available
        problems.append(
            f"vLLM refuses to start: weights ({weights_per_gpu / GIB:.2f} GiB per GPU), activations "
            f"({activation / GIB:.2f} GiB) and non-torch memory ({non_torch / GIB:.2f} GiB) need "
            f"{fixed / GIB:.2f} GiB, more than the {available / GIB:.2f} GiB available per GPU; with one "
            f"{max_len:,}-token request's KV cache ({one_request / GIB:.2f} GiB) it is {shortfall / GIB:.2f} GiB "
            "short per GPU."
        )
    elif requested > total:
        shortfall = requested - total
        problems.append(
            f"vLLM refuses to start: the KV cache asked for does not fit, {requested / GIB:.2f} of "
            f"{total / GIB:.2f} GiB ({shortfall / GIB:.2f} GiB short per GPU)."
        )
    elif num_blocks < 1 or worst_case > num_blocks:
        estimated = _kv_limited_length(inputs, binding.groups, num_blocks, 1, in_flight, max_len) if num_blocks else 0
        shortfall = max(1, one_request - kv_alloc)
        problems.append(
            f"vLLM refuses to start: to serve at least one request with the model's max seq len ({max_len}), "
            f"{one_request / GIB:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({kv_alloc / GIB:.2f} GiB), {shortfall / GIB:.2f} GiB short per GPU. Based on the available memory, "
            f"the estimated maximum model length is {estimated}. Try increasing `gpu_memory_utilization` or "
            "decreasing `max_model_len`."
        )
    starts = not problems
    if starts and max_concurrency < replica_concurrency:
        problems.append(
            f"Only {max_concurrency:.2f} requests of {max_len:,} tokens fit at once, not {replica_concurrency}; "
            f"at concurrency {replica_concurrency} the longest context that fits is {target_row.max_context_len:,} "
            "tokens."
        )
    return _Fit(tuple(problems), starts, shortfall)


def _allocation(inputs: PlanInputs, blocks: _Blocks) -> Allocation:
    """Sequences of a typical request that fit: contiguous max_model_len reservations vs paged blocks."""
    model, block_size, max_len = inputs.model, inputs.block_size, inputs.max_model_len
    assert block_size is not None and max_len is not None
    binding, in_flight, usable, capacity = blocks.binding, blocks.in_flight, blocks.usable, blocks.capacity
    prompt, output, _context = _typical_request(inputs)
    sequence = min(max_len, max(1, prompt + output))
    per_sequence = request_blocks(model, binding.groups, sequence, block_size, in_flight)
    shared_blocks = 0
    if inputs.shared_prefix_tokens:
        full_groups = sum(g for index, _, g in binding.groups.groups if model.layer_groups[index].kind == "full")
        shared_blocks = min(per_sequence - 1, (inputs.shared_prefix_tokens // block_size) * full_groups)
    paged = (usable - shared_blocks) // (per_sequence - shared_blocks) if usable > shared_blocks else 0
    return Allocation(naive_sequences=capacity // max_len, paged_sequences=paged, sequence_tokens=sequence)


def _speed(
    inputs: PlanInputs,
    memory: _Memory,
    per_layer: int,
    replica_concurrency: int,
    data_parallel_size: int,
    *,
    starts: bool,
    assumptions: list[Assumption],
) -> tuple[SpeedModel, Estimates | None, list[str]]:
    """The roofline speed model, its estimates (none when vLLM would not start) and the SLA targets missed."""
    model, gpu = inputs.model, inputs.gpu
    tp, pp = inputs.tensor_parallel_size, inputs.pipeline_parallel_size
    ranks = tp * pp
    weights_total, weights_expert = memory.weights_total, memory.weights_expert
    prompt, output, context = _typical_request(inputs)
    stage_kinds = _layer_kinds_of_largest_stage(model, pp)
    qk_width = model.num_attention_heads * (
        (model.kv_lora_rank or 0) // 4 + (model.qk_rope_head_dim or 0)
        if model.attention_kind == "MLA"
        else model.head_size
    )
    speed_model = SpeedModel(
        bandwidth_bytes_per_s=gpu.bandwidth_bytes_per_s,
        flops_per_s=gpu.bf16_tflops * 1e12,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        dense_weight_bytes=(weights_total - weights_expert) / ranks,
        expert_weight_bytes=weights_expert / ranks,
        num_experts=model.num_experts,
        experts_per_token=model.num_experts_per_tok,
        active_params=model.num_active_params,
        kv_bytes_per_token_per_layer=per_layer,
        kv_layers=tuple((count, model.layer_groups[index].window) for index, count in stage_kinds.items()),
        attention_layers=tuple((group.num_layers, group.window) for group in model.layer_groups),
        attention_width=qk_width,
    )
    ttft_prompt = max(0, prompt - (inputs.shared_prefix_tokens or 0))
    estimates = (
        estimate(
            speed_model,
            concurrency=replica_concurrency,
            context_tokens=context,
            prompt_tokens=ttft_prompt,
            data_parallel_size=data_parallel_size,
        )
        if starts
        else None
    )
    if inputs.prompt_tokens is None or inputs.output_tokens is None:
        assumptions.append(
            Assumption(
                "typical_request",
                f"{prompt} prompt + {output} output tokens",
                "unset lengths: a request of max_model_len tokens (worst case)",
            )
        )
    if estimates is not None:
        assumptions.append(Assumption("speed", estimates.label, "planner/sizing/speed.py"))
    sla_problems = []
    if estimates is None:
        pass  # no speed to judge: the problems already say why it does not start
    elif inputs.target_tpot_ms is not None and estimates.tpot_ms > inputs.target_tpot_ms:
        sla_problems.append(
            f"Estimated TPOT {estimates.tpot_ms:.1f} ms at concurrency {replica_concurrency} misses the "
            f"{inputs.target_tpot_ms:g} ms target."
        )
    if (
        estimates is not None
        and inputs.target_ttft_ms is not None
        and estimates.prefill_ttft_ms > inputs.target_ttft_ms
    ):
        sla_problems.append(
            f"Estimated prefill TTFT {estimates.prefill_ttft_ms:.1f} ms for {ttft_prompt} tokens misses the "
            f"{inputs.target_ttft_ms:g} ms target."
        )
    return speed_model, estimates, sla_problems


def build_plan(inputs: PlanInputs, *, table: bool = True) -> Plan:
    """The plan without advice (``compute.compute_plan`` adds advice; ``search`` uses this directly)."""
    resolved = resolve_inputs(inputs)
    inputs = resolved.inputs
    rules = resolved.rules
    model = inputs.model
    tp, pp = inputs.tensor_parallel_size, inputs.pipeline_parallel_size
    block_size = inputs.block_size
    max_len = inputs.max_model_len
    assert block_size is not None and max_len is not None
    assumptions = [Assumption(name, value, source) for name, value, source in resolved.assumptions]
    assumptions += [Assumption("model", note, "config.json") for note in model.notes]
    warnings = list(resolved.warnings)
    replica_concurrency = -(-inputs.concurrency // resolved.data_parallel_size)

    # Per-token KV bytes.
    element = kv_element_bytes(inputs.kv_cache_dtype, model.dtype)
    per_layer = kv_bytes_per_token_per_layer(model, tp, element)
    stages_layers = pipeline_stages(model.num_layers, pp)
    kv_per_gpu = per_layer * max(len(layers) for layers in stages_layers)
    kv_whole = per_layer * model.num_layers * tp
    page_size = per_layer * block_size
    assumptions.append(
        Assumption(
            "kv_bytes_per_element",
            f"{element:g} ({inputs.kv_cache_dtype}, model {model.dtype})",
            "vllm/config/cache.py (auto = model dtype)",
        )
    )
    if model.attention_kind != "MLA" and tp > model.num_kv_heads:
        warnings.append(
            f"tp {tp} > {model.num_kv_heads} KV heads: each rank keeps a replicated head, so the replica stores "
            f"{kv_whole:,} bytes per token instead of {per_layer * model.num_layers:,}"
        )

    memory = _memory(inputs, rules, assumptions)
    page_blocks = _blocks(inputs, rules, memory.kv_alloc, page_size, assumptions)
    rows, longest_max_model_len = _concurrency_rows(
        inputs, page_blocks, replica_concurrency, table=table, assumptions=assumptions
    )
    target_row = next(row for row in rows if row.concurrency == replica_concurrency)
    fit = _fit(inputs, memory, page_blocks, page_size, replica_concurrency, target_row)
    if not model.hf_id:
        warnings.append(
            "The model has no Hugging Face repo id: replace <hf-repo-id> in the vllm serve command with the repo "
            "(or local path) the config.json came from."
        )
    allocation = _allocation(inputs, page_blocks)
    speed_model, estimates, sla_problems = _speed(
        inputs,
        memory,
        per_layer,
        replica_concurrency,
        resolved.data_parallel_size,
        starts=fit.starts,
        assumptions=assumptions,
    )
    fits = not fit.problems
    binding = page_blocks.binding

    return Plan(
        inputs=inputs,
        kv_bytes_per_token=kv_whole,
        kv_bytes_per_token_per_gpu=kv_per_gpu,
        page_size_bytes=page_size,
        weights_bytes=memory.weights_total,
        weights_bytes_per_gpu=memory.weights_per_gpu,
        memory_per_gpu=memory.breakdown,
        kv_budget_bytes_per_gpu=memory.kv_budget,
        num_gpu_blocks=page_blocks.num_blocks,
        block_size=block_size,
        kv_capacity_tokens=page_blocks.capacity,
        worst_case_blocks_per_request=page_blocks.worst_case,
        max_concurrency=page_blocks.max_concurrency,
        max_context_len=target_row.max_context_len,
        fits=fits,
        problems=fit.problems + tuple(sla_problems),
        concurrency_table=tuple(rows),
        allocation=allocation,
        estimates=estimates,
        advice=(),
        vllm_command=vllm_command(inputs, data_parallel_size=resolved.data_parallel_size),
        assumptions=tuple(assumptions),
        meets_sla=fits and not sla_problems,
        warnings=tuple(warnings),
        usable_blocks=page_blocks.usable,
        layers_per_gpu=binding.groups.num_layers,
        group_size=binding.groups.group_size,
        kv_groups=page_blocks.kv_groups,
        in_flight_tokens=page_blocks.in_flight,
        data_parallel_size=resolved.data_parallel_size,
        longest_max_model_len=longest_max_model_len,
        starts=fit.starts,
        shortfall_bytes_per_gpu=fit.shortfall,
        speed_model=speed_model,
        binding_stage=binding.groups,
    )


def context_curve(plan: Plan, concurrencies: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """(longest context under max_model_len, what the KV cache alone holds) per request at each concurrency.

    The same arithmetic as the concurrency table, at any concurrency: a chart drawn through these points
    follows the real limit (capacity shared by n requests) instead of holding a table row's value.
    """
    stage = plan.binding_stage
    inputs = plan.inputs
    assert inputs.max_model_len is not None
    if stage is None:
        return tuple((0, 0) for _ in concurrencies)
    upper = max(inputs.model.max_position_embeddings, plan.kv_capacity_tokens)
    points = []
    for concurrency in concurrencies:
        kv_limited = _kv_limited_length(
            inputs, stage, plan.num_gpu_blocks, max(1, concurrency), plan.in_flight_tokens, upper
        )
        length = min(kv_limited, inputs.max_model_len)
        points.append((_pow2_floor(length) if inputs.context_rounding == "pow2" else length, kv_limited))
    return tuple(points)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-ready nested dicts and lists (the REST API's response body)."""
    data: dict[str, Any] = {}
    for f in dataclasses.fields(plan):
        if f.name in ("speed_model", "binding_stage"):
            continue
        value = getattr(plan, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.asdict(value)
        data[f.name] = value
    for key in ("concurrency_table", "advice", "assumptions", "kv_groups"):
        data[key] = [dataclasses.asdict(row) for row in getattr(plan, key)]
    result: dict[str, Any] = _jsonable(data)
    return result
