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
from .compressed_attention import FP8_DS_MLA_STATE_BYTES, group_descriptions, packed_cache, with_draft_layers
from .compressed_attention import bytes_per_token as compressed_bytes_per_token
from .engine import EngineRules
from .errors import SizingInputError
from .hardware import GIB
from .inputs import PlanInputs, resolve_inputs
from .kv_cache import (
    StageGroups,
    Terms,
    group_bytes_per_token,
    is_uniform_type,
    kv_bytes_per_token_per_layer,
    kv_element_bytes,
    max_length_for_blocks,
    pipeline_stages,
    request_blocks,
    stage_groups,
    stage_kinds,
    stage_terms,
    unified_block_sizes,
)
from .layer_runs import layer_runs_json
from .memory import activation_bytes, non_torch_bytes, serving_dtype, weight_bytes
from .model_spec import ATTENTION_LAYER_KINDS, LayerGroup, ModelSpec
from .speed import Estimates, SpeedModel, estimate
from .state_cache import (
    GDN_FLASHINFER_CHECKPOINT_ALIGNMENT,
    KDA_FLASHKDA_CHECKPOINT_ALIGNMENT,
    MLA_HYBRID_KERNEL_BLOCK,
    STATE_DTYPE_BYTES,
    gdn_flashinfer_prefill,
    has_prefill_checkpoint,
    hybrid_block_size,
    kda_flashkda_prefill,
    state_blocks_per_request,
    state_page_bytes,
)


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
    # Additions: the group's block size, and what its layer slots hold where that is not one attention kind
    # (DeepSeek-V4: "21 C4 latent (37,440 B), ..." cache pages per block).
    block_size: int = 0
    caches: str = ""


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
    # What vLLM prints as "GPU KV cache size: N tokens" and "Maximum concurrency" for this release; from
    # 0.24 the tokens are concurrency x max_model_len, not blocks x block size, for multi-group models.
    reported_kv_cache_tokens: int = 0
    reported_max_concurrency: float = 0.0
    reported_tokens_rule: str = ""
    # Hybrid models: one state layer's page per rank (unpadded) and the state blocks each request holds.
    state_page_bytes: int = 0
    state_blocks_per_request: int = 0
    # The longest max_model_len vLLM would start with on this memory (one request of that length fits,
    # capped by the model's positions): vLLM's estimate_max_model_len. Not capped by the scenario's setting.
    longest_max_model_len: int = 0
    # Whether vLLM would start with these settings (weights, activations and one max_model_len request fit);
    # when not, ``shortfall_bytes_per_gpu`` is how much more memory per GPU it would need, and the
    # ``vllm_command`` is one vLLM refuses.
    starts: bool = True
    shortfall_bytes_per_gpu: int = 0
    speed_model: SpeedModel | None = field(default=None, repr=False, compare=False)
    # The pipeline stage whose requests need the most blocks, and each layer group's block size when page
    # sizes were unified (what every context figure is computed on; see context_curve).
    binding_stage: StageGroups | None = field(default=None, repr=False, compare=False)
    group_block_sizes: tuple[int, ...] = field(default=(), repr=False, compare=False)


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
    block_bytes: int  # what one block takes on each GPU of the stage, over all its layers


def _kv_limited_length(
    inputs: PlanInputs,
    stage: StageGroups,
    blocks: int,
    concurrency: int,
    in_flight: int,
    upper: int,
    state_blocks: int = 1,
    block_sizes: tuple[int, ...] = (),
    terms: Terms | None = None,
) -> int:
    """``terms``: the stage's ``stage_terms``, when the caller asks several concurrencies of one stage."""
    model = inputs.model
    block_size = inputs.block_size
    assert block_size is not None
    if terms is None:
        terms = stage_terms(model, stage, block_size, in_flight, state_blocks, block_sizes)
    # Solved directly where it can be: c * (F * ceil(T / bs_full) + K) <= blocks, with F the full-attention
    # groups and K the blocks every other group holds once T is past the point where it stops growing (a
    # state group's fixed blocks; a window or chunk plus the in-flight tokens). Valid when the answer lies
    # past that point; otherwise (or without full attention) the binary search below decides.
    full = sum(groups for groups, _ in terms.full)
    full_block = terms.full[-1][1] if terms.full else block_size
    saturation, fixed = terms.saturation, terms.saturated
    per_request = blocks // concurrency - fixed
    if full:
        if per_request < full and not saturation:
            return 0
        length = (per_request // full) * full_block if per_request >= full else 0
        if length >= saturation and length > 0:
            return min(upper, length)
    elif per_request >= 0:
        return upper
    # Here a request of `saturation` tokens already needs more than its share (the blocks past that point are
    # F * ceil(T / bs_full) + K, over it), so the answer lies below: search only up to there.
    if saturation:
        upper = min(upper, saturation)
    return max_length_for_blocks(
        model, stage, blocks, concurrency, block_size, in_flight, upper, state_blocks, block_sizes, terms=terms
    )


def _typical_request(inputs: PlanInputs) -> tuple[int, int, int]:
    """(prompt, output, decode context) tokens of a typical request; unset lengths mean a full-length request."""
    assert inputs.max_model_len is not None
    output = inputs.output_tokens or 0
    prompt = inputs.prompt_tokens if inputs.prompt_tokens is not None else max(1, inputs.max_model_len - output)
    context = min(inputs.max_model_len, prompt + output // 2)
    return prompt, output, context


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
    """Weights, activation peak, non-torch memory and the KV budget per GPU; notes the sources it used."""
    model, gpu = inputs.model, inputs.gpu
    tp, pp = inputs.tensor_parallel_size, inputs.pipeline_parallel_size
    batched, utilization, max_num_seqs = (
        inputs.max_num_batched_tokens,
        inputs.gpu_memory_utilization,
        inputs.max_num_seqs,
    )
    assert batched is not None and utilization is not None and max_num_seqs is not None
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
    if inputs.num_speculative_tokens and model.num_mtp_layers and inputs.weights_gib is None:
        # vLLM loads the MTP drafter before it profiles, sharing the target's embeddings and LM head where they are
        # the same (v1/spec_decode/llm_base_proposer.py, _maybe_share_embeddings / _maybe_share_lm_head): its
        # decoder layers are what it adds, split over tp like the target's.
        decoder_layers = model.num_layers // 2 if model.parallel_hybrid else model.num_layers
        per_layer = max(0.0, weights_total - 2.0 * model.embedding_params) / max(decoder_layers, 1)
        draft = math.ceil(model.num_mtp_layers * per_layer / tp)
        weights_per_gpu += draft
        assumptions.append(
            Assumption(
                "draft_weights",
                f"{draft / GIB:.2f} GiB per GPU: {model.num_mtp_layers} MTP layer(s) at the mean decoder layer's "
                "weights, embeddings and LM head shared with the target",
                "vllm/v1/spec_decode/llm_base_proposer.py (the drafter loads beside the target)",
            )
        )
    if inputs.activation_gib is not None:
        activation = round(inputs.activation_gib * GIB)
    else:
        activation = activation_bytes(
            model,
            tensor_parallel_size=tp,
            max_num_batched_tokens=batched,
            max_num_seqs=max_num_seqs,
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


def _fit(
    inputs: PlanInputs,
    memory: _Memory,
    *,
    binding: _Stage,
    num_blocks: int,
    in_flight: int,
    state_blocks: int,
    block_sizes: tuple[int, ...],
    replica_concurrency: int,
    target_row: ConcurrencyRow,
) -> tuple[list[str], bool, int]:
    """(problems, whether vLLM starts, memory per GPU it misses): first whether vLLM starts at all (weights,
    activations and one max_model_len request), then whether the asked concurrency fits."""
    max_len = inputs.max_model_len
    assert max_len is not None
    total = inputs.gpu.memory_bytes
    requested, fixed, kv_alloc = memory.requested, memory.fixed, memory.kv_alloc
    weights_per_gpu, activation, non_torch = memory.weights_per_gpu, memory.activation, memory.non_torch
    worst_case = binding.worst_case
    max_concurrency = num_blocks / worst_case if worst_case else 0.0
    problems: list[str] = []
    available = min(requested, total)
    one_request = worst_case * binding.block_bytes
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
        estimated = (
            _kv_limited_length(inputs, binding.groups, num_blocks, 1, in_flight, max_len, state_blocks, block_sizes)
            if num_blocks
            else 0
        )
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
    return problems, starts, shortfall


@dataclass(frozen=True)
class _KvShape:
    """Bytes per token of the KV cache (``build_plan``'s first step): per layer group on one rank, per GPU of
    the fullest pipeline stage, and for the whole replica; each stage's KV cache groups."""

    dtype: str
    group_bytes: tuple[int, ...]
    per_layer: int  # the largest attention layer's bytes per token: the page every group's block is made to fill
    stages_layers: list[range]
    mtp_layers: int
    stage_group_list: list[StageGroups]
    kv_per_gpu: int
    kv_whole: int
    # Compressed attention (DeepSeek-V4): the bytes one block spans over all its packed groups, each group's
    # block size, and what the groups hold; 0, () and "" otherwise.
    block_bytes: int = 0
    group_block_sizes: tuple[int, ...] = ()
    group_caches: tuple[str, ...] = ()


def _compressed_kv_shape(inputs: PlanInputs, assumptions: list[Assumption]) -> _KvShape:
    """DeepSeek-V4: its caches packed into vLLM 0.33's KV cache groups (compressed_attention.py); the KV is
    replicated on every tensor-parallel rank (one latent head, max_tp_shards=1)."""
    model = inputs.model
    assert model.compressed_attention is not None
    drafted = model.num_mtp_layers if inputs.num_speculative_tokens else 0
    try:
        packed = packed_cache(with_draft_layers(model.compressed_attention, drafted))
    except ValueError as error:
        raise SizingInputError({"compress_ratios": str(error)}) from error
    kinds = tuple(LayerGroup(group.kind, group.num_layers, group.window) for group in packed.groups)
    counts = tuple((i, group.num_layers, group.num_groups) for i, group in enumerate(packed.groups))
    stage = StageGroups(model.num_layers, 1, counts, kinds)
    per_token = compressed_bytes_per_token(packed)
    caches, summary = group_descriptions(packed)
    assumptions.append(
        Assumption(
            "kv_cache_groups",
            summary,
            "vllm/v1/core/kv_cache_planning.py (_get_packed_kv_cache_groups, _get_kv_cache_bytes_per_block); "
            "vllm/models/deepseek_v4/attention.py, compressor.py; v1/attention/backends/mla/sparse_swa.py",
        )
    )
    assumptions.append(
        Assumption(
            "reported_block_size",
            f"{min(group.block_size for group in packed.groups)}: vllm:cache_config_info's block_size after planning "
            "(the smallest group's), not the 256-token block the plan counts",
            "vllm/v1/engine/core.py (cache_config.block_size = min over KV cache groups)",
        )
    )
    assumptions.append(
        Assumption(
            "kv_cache_format",
            f"fp8_ds_mla: {FP8_DS_MLA_STATE_BYTES} bytes per latent state, pages padded to 576-byte multiples; "
            "fp32 compressor states",
            "vllm/models/deepseek_v4/attention.py (_resolve_dsv4_kv_cache_dtype, get_kv_cache_spec)",
        )
    )
    return _KvShape(
        dtype=serving_dtype(model, inputs.weight_dtype),
        group_bytes=tuple(0 for _ in model.layer_groups),
        per_layer=per_token,
        stages_layers=[range(model.num_layers)],
        mtp_layers=0,
        stage_group_list=[stage],
        kv_per_gpu=per_token,
        kv_whole=per_token * inputs.tensor_parallel_size,
        block_bytes=packed.bytes_per_block,
        group_block_sizes=tuple(group.block_size for group in packed.groups),
        group_caches=caches,
    )


def _kv_shape(inputs: PlanInputs, assumptions: list[Assumption], warnings: list[str]) -> _KvShape:
    model = inputs.model
    if model.compressed_attention is not None:
        return _compressed_kv_shape(inputs, assumptions)
    tp, pp = inputs.tensor_parallel_size, inputs.pipeline_parallel_size
    dtype = serving_dtype(model, inputs.weight_dtype)
    element = kv_element_bytes(inputs.kv_cache_dtype, dtype)
    group_bytes = group_bytes_per_token(model, tp, element, inputs.kv_cache_dtype)
    per_layer = max(group_bytes)
    stages_layers = pipeline_stages(model.num_layers, pp)
    mtp_layers = model.num_mtp_layers if inputs.num_speculative_tokens else 0
    last = len(stages_layers) - 1
    stage_group_list = [
        stage_groups(model, layers, extra_full_layers=mtp_layers if i == last else 0)
        for i, layers in enumerate(stages_layers)
    ]
    kv_per_gpu = max(groups.bytes_per_token(group_bytes) for groups in stage_group_list)
    full_bytes = next(
        (b for g, b in zip(model.layer_groups, group_bytes, strict=True) if g.kind == model.mtp_layer_kind), per_layer
    )
    layer_bytes = sum(g.num_layers * b for g, b in zip(model.layer_groups, group_bytes, strict=True))
    kv_whole = (layer_bytes + mtp_layers * full_bytes) * tp
    if dtype != model.dtype and inputs.weight_dtype == "auto" and model.dtype == "float32":
        assumptions.append(
            Assumption(
                "dtype",
                "bfloat16 (float32 checkpoint)",
                "vllm/config/model.py _resolve_auto_dtype: --dtype auto downcasts float32 models",
            )
        )
    assumptions.append(
        Assumption(
            "kv_bytes_per_element",
            f"{element:g} ({inputs.kv_cache_dtype}, model runs in {dtype})",
            "vllm/config/cache.py (auto = model dtype)",
        )
    )
    if model.indexer_bytes_per_token:
        layout = "fp8_ds_mla 656 bytes" if inputs.kv_cache_dtype.startswith("fp8") else "latent"
        assumptions.append(
            Assumption(
                "indexer_cache",
                f"{model.indexer_bytes_per_token} bytes per token per layer next to the {layout}",
                "vllm/model_executor/models/deepseek_v2.py (DeepseekV32IndexerCache); one group, block 64",
            )
        )
    if is_uniform_type(model):
        _uniform_type_notes(model, tp, element, inputs.kv_cache_dtype, kv_whole, assumptions, warnings)
    elif model.attention_kind != "MLA" and tp > model.num_kv_heads:
        # Without replication the replica would hold each KV head once: the layers' bytes at tp 1.
        unreplicated = sum(
            g.num_layers * kv_bytes_per_token_per_layer(model, 1, element, inputs.kv_cache_dtype, g)
            for g in model.layer_groups
            if g.kind in ATTENTION_LAYER_KINDS
        ) + mtp_layers * kv_bytes_per_token_per_layer(
            model,
            1,
            element,
            inputs.kv_cache_dtype,
            next((g for g in model.layer_groups if g.kind == model.mtp_layer_kind), None),
        )
        warnings.append(
            f"tp {tp} > {model.num_kv_heads} KV heads: each rank keeps a replicated head, so the replica stores "
            f"{kv_whole:,} bytes per token instead of {unreplicated:,}"
        )
    return _KvShape(
        dtype=dtype,
        group_bytes=group_bytes,
        per_layer=per_layer,
        stages_layers=stages_layers,
        mtp_layers=mtp_layers,
        stage_group_list=stage_group_list,
        kv_per_gpu=kv_per_gpu,
        kv_whole=kv_whole,
    )


def _uniform_type_notes(
    model: ModelSpec,
    tp: int,
    element: float,
    kv_cache_dtype: str,
    kv_whole: int,
    assumptions: list[Assumption],
    warnings: list[str],
) -> None:
    """Layers of one attention type but several shapes (Nemotron-NAS): how vLLM groups them, and which KV heads
    tensor parallelism replicates."""
    attention = [group for group in model.layer_groups if group.kind != "none"]
    assumptions.append(
        Assumption(
            "kv_cache_groups",
            "one group of every attention layer, a page per layer each of its own size ("
            + ", ".join(f"{g.num_layers} x {g.num_kv_heads or model.num_kv_heads} KV heads" for g in attention)
            + ")",
            "vllm/v1/core/kv_cache_planning.py (get_kv_cache_groups: UniformTypeKVCacheSpecs.from_specs); "
            "vllm/v1/kv_cache_interface.py (UniformTypeKVCacheSpecs.page_size_bytes: the layers' pages summed)",
        )
    )
    replicated = sorted({heads for g in attention if (heads := g.num_kv_heads or model.num_kv_heads) < tp})
    if replicated:
        unreplicated = sum(
            g.num_layers * kv_bytes_per_token_per_layer(model, 1, element, kv_cache_dtype, g) for g in attention
        )
        warnings.append(
            f"tp {tp} > {', '.join(map(str, replicated))} KV heads of some layers: each rank keeps a replicated "
            f"head there, so the replica stores {kv_whole:,} bytes per token instead of {unreplicated:,}"
        )


@dataclass(frozen=True)
class _StateLayout:
    """A hybrid model's state cache: the state page per rank, state blocks per request and the attention
    block size grown to hold a state page (``build_plan``'s second step)."""

    page: int = 0
    blocks_per_request: int = 1
    block_size: int | None = None  # None: the block size asked for stands


def _state_layout(
    inputs: PlanInputs, rules: EngineRules, shape: _KvShape, assumptions: list[Assumption]
) -> _StateLayout:
    model = inputs.model
    if model.state is None or not model.has_state:
        return _StateLayout()
    assert inputs.block_size is not None
    tp, speculative = inputs.tensor_parallel_size, inputs.num_speculative_tokens
    align = bool(inputs.enable_prefix_caching)
    flashinfer = gdn_flashinfer_prefill(inputs.gpu.name + " " + inputs.gpu.slug, model.state)
    flashkda = kda_flashkda_prefill(inputs.gpu.name + " " + inputs.gpu.slug, model.state, shape.dtype)
    checkpoint = align and has_prefill_checkpoint(
        model.state,
        gdn_flashinfer=flashinfer,
        mamba2_rule=rules.mamba2_prefill_checkpoint,
        gdn_rule=rules.gdn_prefill_checkpoint,
        kda_flashkda=flashkda,
    )
    alignment = GDN_FLASHINFER_CHECKPOINT_ALIGNMENT if checkpoint and model.state.kind == "gdn" else 1
    if checkpoint and model.state.kind == "kda":
        alignment = KDA_FLASHKDA_CHECKPOINT_ALIGNMENT
    page = state_page_bytes(model.state, tp, speculative, int(STATE_DTYPE_BYTES[shape.dtype]))
    blocks = state_blocks_per_request(align=align, num_speculative_tokens=speculative, checkpoint=checkpoint)
    block_size = hybrid_block_size(
        state_page=page,
        attention_bytes_per_token=shape.per_layer,
        requested_block_size=inputs.block_size,
        mla=model.attention_kind == "MLA",
        checkpoint_alignment=alignment,
    )
    kernel = MLA_HYBRID_KERNEL_BLOCK if model.attention_kind == "MLA" else 16
    assumptions.append(
        Assumption(
            "block_size",
            f"{block_size} (asked {inputs.block_size}): one attention page ({shape.per_layer:,} B x {block_size}) "
            f"holds a state page ({page:,} B per rank); kernel block {kernel}"
            + (f", lcm with the {alignment}-token {model.state.kind.upper()} checkpoint grid" if alignment > 1 else ""),
            "vllm/platforms/interface.py (_align_hybrid_block_size)",
        )
    )
    mode = "align (prefix caching on)" if align else "none (prefix caching off)"
    parts = ["1 running"] if not align else ["2 (running + cached)"]
    if speculative:
        parts.append(f"{speculative} speculative")
    if checkpoint:
        parts.append("1 prefill checkpoint")
    assumptions.append(
        Assumption(
            "state_blocks_per_request",
            f"{blocks} = {' + '.join(parts)}; mamba_cache_mode {mode}",
            "vllm/v1/kv_cache_interface.py (MambaSpec.max_memory_usage_bytes)",
        )
    )
    return _StateLayout(page=page, blocks_per_request=blocks, block_size=block_size)


def _unified_block_sizes(
    model: ModelSpec, group_bytes: tuple[int, ...], block_size: int, assumptions: list[Assumption]
) -> tuple[int, ...]:
    """Per layer group, its block size once page sizes are unified; () when every group has one shape, or when
    vLLM keeps the groups in one KV cache group whose page sums theirs (``is_uniform_type``)."""
    if len({b for b in group_bytes if b}) <= 1 or is_uniform_type(model):
        return ()
    block_sizes = unified_block_sizes(group_bytes, block_size)
    grown = [
        f"{g.kind} {b:,} B/token, block {size}"
        for g, b, size in zip(model.layer_groups, group_bytes, block_sizes, strict=True)
        if b
    ]
    assumptions.append(
        Assumption(
            "page_size_unification",
            "; ".join(grown),
            "vllm/v1/core/kv_cache_planning.py (unify_kv_cache_spec_page_size): smaller pages grow their block",
        )
    )
    return block_sizes


def _in_flight_tokens(inputs: PlanInputs, rules: EngineRules, assumptions: list[Assumption]) -> int:
    """Tokens a sliding-window or chunked request may hold beyond its window while steps are in flight."""
    batched, pp = inputs.max_num_batched_tokens, inputs.pipeline_parallel_size
    assert batched is not None
    if rules.async_in_flight:
        batches = 2 if pp == 1 else pp + 1 if rules.pp_plus_one_in_flight else pp
        in_flight = batched * batches
        source = (
            "max_concurrent_batches x max_num_batched_tokens (2 with async scheduling at pp 1; pp + 1 at pp > 1 "
            "under 0.33's V2 model runner): vllm/config/vllm.py, max_in_flight_tokens"
        )
    else:
        in_flight = batched
        source = f"max_num_batched_tokens (engine {rules.label}: one batch, before max_in_flight_tokens in 0.26)"
    if inputs.model.is_hybrid or inputs.model.layer_groups[0].kind != "full":
        assumptions.append(Assumption("in_flight_tokens", str(in_flight), source))
    return in_flight


@dataclass(frozen=True)
class _Blocks:
    """The KV cache in blocks (``build_plan``'s blocks step): the engine takes the minimum over pipeline
    stages; the stage whose worst-case request needs the most blocks binds."""

    num_blocks: int
    binding: _Stage
    max_concurrency: float
    capacity: int
    usable: int
    kv_groups: tuple[KvCacheGroup, ...]


def _blocks(
    inputs: PlanInputs,
    shape: _KvShape,
    *,
    kv_alloc: int,
    page_size: int,
    in_flight: int,
    state_blocks: int,
    block_sizes: tuple[int, ...],
) -> _Blocks:
    model, block_size, max_len = inputs.model, inputs.block_size, inputs.max_model_len
    assert block_size is not None and max_len is not None
    stages = []
    for groups in shape.stage_group_list:
        if not groups.groups:
            continue
        # One KV cache group whose layers' pages differ (Nemotron-NAS): the block holds each layer's own page.
        block_bytes = (
            block_size * groups.bytes_per_token(shape.group_bytes)
            if groups.layer_counts
            else page_size * groups.group_size
        )
        stages.append(
            _Stage(
                groups,
                kv_alloc // block_bytes if block_bytes else 0,
                request_blocks(model, groups, max_len, block_size, in_flight, state_blocks, block_sizes),
                block_bytes,
            )
        )
    num_blocks = min(stage.num_blocks for stage in stages)
    # Stages of one KV cache group ask the same blocks per request; the one whose block is widest holds the fewest.
    binding = max(stages, key=lambda stage: (stage.worst_case, stage.block_bytes if stage.groups.layer_counts else 0))
    kinds = stage_kinds(model, binding.groups)
    kv_groups = tuple(
        KvCacheGroup(
            kind=kinds[index].kind,
            window=kinds[index].window,
            num_layers=count,
            num_groups=num_groups,
            worst_case_blocks=num_groups
            * request_blocks(
                model,
                StageGroups(count, binding.groups.group_size, ((index, count, 1),), binding.groups.kinds),
                max_len,
                block_size,
                in_flight,
                state_blocks,
                block_sizes,
            ),
            block_size=block_sizes[index] if block_sizes else block_size,
            caches=shape.group_caches[index] if shape.group_caches else "",
        )
        for index, count, num_groups in binding.groups.groups
    )
    return _Blocks(
        num_blocks=num_blocks,
        binding=binding,
        max_concurrency=num_blocks / binding.worst_case if binding.worst_case else 0.0,
        capacity=num_blocks * block_size,
        usable=max(0, num_blocks - 1),
        kv_groups=kv_groups,
    )


def _context_table(
    inputs: PlanInputs,
    blocks: _Blocks,
    *,
    concurrencies: Sequence[int],
    in_flight: int,
    state_blocks: int,
    block_sizes: tuple[int, ...],
) -> tuple[list[ConcurrencyRow], int]:
    """The longest context per concurrency under max_model_len (and which limit binds), and the longest
    max_model_len the model's positions and the KV cache would allow one request."""
    max_len = inputs.max_model_len
    assert max_len is not None
    cap = inputs.model.max_position_embeddings
    upper = max(cap, blocks.capacity)
    stage, num_blocks = blocks.binding.groups, blocks.num_blocks
    setting_limit = LIMIT_MAX_MODEL_LEN if max_len < cap else LIMIT_MODEL_POSITIONS
    assert inputs.block_size is not None
    terms = stage_terms(inputs.model, stage, inputs.block_size, in_flight, state_blocks, block_sizes)
    rows = []
    for concurrency in concurrencies:
        kv_limited = _kv_limited_length(
            inputs, stage, num_blocks, concurrency, in_flight, upper, state_blocks, block_sizes, terms
        )
        length = min(kv_limited, max_len)
        if inputs.context_rounding == "pow2":
            length = _pow2_floor(length)
        rows.append(
            ConcurrencyRow(concurrency, length, kv_limited, setting_limit if kv_limited >= max_len else LIMIT_KV_CACHE)
        )
    longest = _kv_limited_length(inputs, stage, num_blocks, 1, in_flight, cap, state_blocks, block_sizes, terms)
    return rows, longest


def _allocation(
    inputs: PlanInputs, blocks: _Blocks, *, in_flight: int, state_blocks: int, block_sizes: tuple[int, ...]
) -> Allocation:
    """Contiguous max_model_len reservations against paged blocks for a typical request."""
    model, block_size, max_len = inputs.model, inputs.block_size, inputs.max_model_len
    assert block_size is not None and max_len is not None
    prompt, output, _ = _typical_request(inputs)
    sequence = min(max_len, max(1, prompt + output))
    stage = blocks.binding.groups
    per_sequence = request_blocks(model, stage, sequence, block_size, in_flight, state_blocks, block_sizes)
    shared_blocks = 0
    if inputs.shared_prefix_tokens:
        kinds = stage_kinds(model, stage)
        full_groups = sum(g for index, _, g in stage.groups if kinds[index].kind == "full")
        shared_blocks = min(per_sequence - 1, (inputs.shared_prefix_tokens // block_size) * full_groups)
    usable = blocks.usable
    paged = (usable - shared_blocks) // (per_sequence - shared_blocks) if usable > shared_blocks else 0
    return Allocation(naive_sequences=blocks.capacity // max_len, paged_sequences=paged, sequence_tokens=sequence)


def _speed_model(
    inputs: PlanInputs, shape: _KvShape, memory: _Memory, *, block_sizes: tuple[int, ...], state_page: int
) -> SpeedModel:
    """The speed model of the largest pipeline stage: its layers by kind (the draft MTP layers aside)."""
    model, gpu = inputs.model, inputs.gpu
    tp, pp = inputs.tensor_parallel_size, inputs.pipeline_parallel_size
    ranks = tp * pp
    last = len(shape.stages_layers) - 1
    largest = max(range(len(shape.stages_layers)), key=lambda i: len(shape.stages_layers[i]))
    layer_kinds: dict[int, int] = {}
    stage_states = 0
    stage = shape.stage_group_list[largest]
    # A stage of cache groups (DeepSeek-V4) times its decoder layers by kind instead.
    counts = stage.groups if not stage.kinds else [(i, g.num_layers, 1) for i, g in enumerate(model.layer_groups)]
    # The draft layers joined the first group of their kind (kv_cache.stage_groups).
    mtp_index = next((i for i, g in enumerate(model.layer_groups) if g.kind == model.mtp_layer_kind), -1)
    for index, count, _ in counts:
        kind = model.layer_groups[index].kind
        if kind in ATTENTION_LAYER_KINDS:
            layer_kinds[index] = count - (shape.mtp_layers if largest == last and index == mtp_index else 0)
        elif kind == "state":
            stage_states += count
    qk_width = model.num_attention_heads * (
        (model.kv_lora_rank or 0) // 4 + (model.qk_rope_head_dim or 0)
        if model.attention_kind == "MLA"
        else model.head_size
    )
    return SpeedModel(
        bandwidth_bytes_per_s=gpu.bandwidth_bytes_per_s,
        flops_per_s=gpu.bf16_tflops * 1e12,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        dense_weight_bytes=(memory.weights_total - memory.weights_expert) / ranks,
        expert_weight_bytes=memory.weights_expert / ranks,
        num_experts=model.num_experts,
        experts_per_token=model.num_experts_per_tok,
        active_params=model.num_active_params,
        # Layers of different shapes (Gemma 4): their average, so layers x bytes is the stage's KV per token.
        kv_bytes_per_token_per_layer=(
            round(shape.kv_per_gpu / max(1, sum(layer_kinds.values())))
            if block_sizes or stage.layer_counts
            else shape.per_layer
        ),
        kv_layers=tuple((count, model.layer_groups[index].window) for index, count in layer_kinds.items()),
        attention_layers=tuple(
            (group.num_layers, group.window) for group in model.layer_groups if group.kind in ATTENTION_LAYER_KINDS
        ),
        attention_width=qk_width,
        state_bytes_per_seq=state_page * stage_states,
    )


def _speed(
    inputs: PlanInputs,
    speed_model: SpeedModel,
    *,
    starts: bool,
    replica_concurrency: int,
    data_parallel_size: int,
    assumptions: list[Assumption],
) -> tuple[Estimates | None, list[str]]:
    """Speed estimates (None when vLLM would not start: there is nothing to time) and the SLA targets missed."""
    prompt, output, context = _typical_request(inputs)
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
    if estimates is None:
        return None, []
    assumptions.append(Assumption("speed", estimates.label, "planner/sizing/speed.py"))
    sla_problems = []
    if inputs.target_tpot_ms is not None and estimates.tpot_ms > inputs.target_tpot_ms:
        sla_problems.append(
            f"Estimated TPOT {estimates.tpot_ms:.1f} ms at concurrency {replica_concurrency} misses the "
            f"{inputs.target_tpot_ms:g} ms target."
        )
    if inputs.target_ttft_ms is not None and estimates.prefill_ttft_ms > inputs.target_ttft_ms:
        sla_problems.append(
            f"Estimated prefill TTFT {estimates.prefill_ttft_ms:.1f} ms for {ttft_prompt} tokens misses the "
            f"{inputs.target_ttft_ms:g} ms target."
        )
    return estimates, sla_problems


def _reported_tokens(rules: EngineRules, blocks: _Blocks, *, max_len: int, block_size: int) -> tuple[int, str]:
    """The "GPU KV cache size" figure vLLM logs, and the rule its release uses."""
    if rules.concurrency_reported_tokens:
        return (
            int(blocks.max_concurrency * max_len),
            "max concurrency x max_model_len (vllm/v1/core/kv_cache_utils.py, get_kv_cache_capacity)",
        )
    num_kv_groups = sum(count for _, _, count in blocks.binding.groups.groups)
    return (
        blocks.num_blocks // max(1, num_kv_groups) * block_size,
        f"num_blocks // {num_kv_groups} KV cache groups x block size (releases before 0.24)",
    )


def build_plan(inputs: PlanInputs, *, table: bool = True) -> Plan:
    """The plan without advice (``compute.compute_plan`` adds advice; ``search`` uses this directly).

    Steps: inputs resolved with the release's rules; bytes per token; the state cache and block size;
    page unification; memory per GPU; blocks; the context table; whether it starts and fits; allocation;
    speed; what vLLM will report."""
    resolved = resolve_inputs(inputs)
    inputs, rules = resolved.inputs, resolved.rules
    model = inputs.model
    assert inputs.block_size is not None and inputs.max_model_len is not None
    max_len = inputs.max_model_len
    assumptions = [Assumption(name, value, source) for name, value, source in resolved.assumptions]
    assumptions += [Assumption("model", note, "config.json") for note in model.notes]
    warnings = list(resolved.warnings)
    replica_concurrency = -(-inputs.concurrency // resolved.data_parallel_size)

    shape = _kv_shape(inputs, assumptions, warnings)
    command_inputs = inputs  # the block size asked for: vLLM grows it for hybrid models itself
    state = _state_layout(inputs, rules, shape, assumptions)
    if state.block_size is not None:
        inputs = dataclasses.replace(inputs, block_size=state.block_size)
    block_size = inputs.block_size
    assert block_size is not None
    page_size = shape.block_bytes or shape.per_layer * block_size
    block_sizes = shape.group_block_sizes or _unified_block_sizes(model, shape.group_bytes, block_size, assumptions)

    memory_step = _memory(inputs, rules, assumptions)
    in_flight = _in_flight_tokens(inputs, rules, assumptions)
    state_blocks = state.blocks_per_request
    blocks = _blocks(
        inputs,
        shape,
        kv_alloc=memory_step.kv_alloc,
        page_size=page_size,
        in_flight=in_flight,
        state_blocks=state_blocks,
        block_sizes=block_sizes,
    )
    concurrencies = sorted(set(TABLE_CONCURRENCIES) | {replica_concurrency}) if table else [replica_concurrency]
    rows, longest_max_model_len = _context_table(
        inputs,
        blocks,
        concurrencies=concurrencies,
        in_flight=in_flight,
        state_blocks=state_blocks,
        block_sizes=block_sizes,
    )
    target_row = next(row for row in rows if row.concurrency == replica_concurrency)
    if inputs.context_rounding == "pow2":
        assumptions.append(Assumption("context_rounding", "pow2", "context lengths rounded down to a power of two"))

    problems, starts, shortfall = _fit(
        inputs,
        memory_step,
        binding=blocks.binding,
        num_blocks=blocks.num_blocks,
        in_flight=in_flight,
        state_blocks=state_blocks,
        block_sizes=block_sizes,
        replica_concurrency=replica_concurrency,
        target_row=target_row,
    )
    fits = not problems
    if not model.hf_id:
        warnings.append(
            "The model has no Hugging Face repo id: replace <hf-repo-id> in the vllm serve command with the repo "
            "(or local path) the config.json came from."
        )
    allocation = _allocation(inputs, blocks, in_flight=in_flight, state_blocks=state_blocks, block_sizes=block_sizes)
    speed_model = _speed_model(inputs, shape, memory_step, block_sizes=block_sizes, state_page=state.page)
    estimates, sla_problems = _speed(
        inputs,
        speed_model,
        starts=starts,
        replica_concurrency=replica_concurrency,
        data_parallel_size=resolved.data_parallel_size,
        assumptions=assumptions,
    )
    reported_tokens, reported_rule = _reported_tokens(rules, blocks, max_len=max_len, block_size=block_size)
    return Plan(
        inputs=inputs,
        kv_bytes_per_token=shape.kv_whole,
        kv_bytes_per_token_per_gpu=shape.kv_per_gpu,
        page_size_bytes=page_size,
        weights_bytes=memory_step.weights_total,
        weights_bytes_per_gpu=memory_step.weights_per_gpu,
        memory_per_gpu=memory_step.breakdown,
        kv_budget_bytes_per_gpu=memory_step.kv_budget,
        num_gpu_blocks=blocks.num_blocks,
        block_size=block_size,
        kv_capacity_tokens=blocks.capacity,
        worst_case_blocks_per_request=blocks.binding.worst_case,
        max_concurrency=blocks.max_concurrency,
        max_context_len=target_row.max_context_len,
        fits=fits,
        problems=tuple(problems + sla_problems),
        concurrency_table=tuple(rows),
        allocation=allocation,
        estimates=estimates,
        advice=(),
        vllm_command=vllm_command(command_inputs, data_parallel_size=resolved.data_parallel_size),
        assumptions=tuple(assumptions),
        meets_sla=fits and not sla_problems,
        warnings=tuple(warnings),
        usable_blocks=blocks.usable,
        layers_per_gpu=blocks.binding.groups.num_layers,
        group_size=blocks.binding.groups.group_size,
        kv_groups=blocks.kv_groups,
        in_flight_tokens=in_flight,
        data_parallel_size=resolved.data_parallel_size,
        reported_kv_cache_tokens=reported_tokens,
        reported_max_concurrency=blocks.max_concurrency,
        reported_tokens_rule=reported_rule,
        state_page_bytes=state.page,
        state_blocks_per_request=state_blocks if model.has_state else 0,
        longest_max_model_len=longest_max_model_len,
        starts=starts,
        shortfall_bytes_per_gpu=shortfall,
        binding_stage=blocks.binding.groups,
        group_block_sizes=block_sizes,
        speed_model=speed_model,
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
    state_blocks = plan.state_blocks_per_request or 1
    points = []
    for concurrency in concurrencies:
        kv_limited = _kv_limited_length(
            inputs,
            stage,
            plan.num_gpu_blocks,
            max(1, concurrency),
            plan.in_flight_tokens,
            upper,
            state_blocks,
            plan.group_block_sizes,
        )
        length = min(kv_limited, inputs.max_model_len)
        points.append((_pow2_floor(length) if inputs.context_rounding == "pow2" else length, kv_limited))
    return tuple(points)


def _jsonable(value: Any) -> Any:
    # One walk instead of dataclasses.asdict (which deep-copies every element of a per-layer tuple) and then a
    # second pass: the answer is the same, at a fraction of the cost for deep models.
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: layer_runs_json(value.layer_pattern)
            if f.name == "layer_pattern" and isinstance(value, ModelSpec)
            else _jsonable(getattr(value, f.name))
            for f in dataclasses.fields(value)
        }
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def model_to_dict(model: ModelSpec) -> dict[str, Any]:
    """The model as JSON-ready dicts and lists, as it appears inside ``plan_to_dict`` (layer pattern as runs)."""
    answer: dict[str, Any] = _jsonable(model)
    return answer


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-ready nested dicts and lists (the REST API's response body)."""
    skipped = ("speed_model", "binding_stage", "group_block_sizes")
    return {f.name: _jsonable(getattr(plan, f.name)) for f in dataclasses.fields(plan) if f.name not in skipped}
