"""Figures derived from a plan that pages, charts and the API show beside it. Computed here, in the engine,
so no caller repeats the KV arithmetic (and so each follows vLLM's layout the way the plan does)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import compressed_attention
from .kv_cache import (
    group_bytes_per_token,
    is_uniform_type,
    kv_bytes_per_token_per_layer,
    kv_element_bytes,
    pipeline_stages,
    request_blocks,
    stage_groups,
    unified_block_sizes,
)
from .model_spec import ATTENTION_LAYER_KINDS

if TYPE_CHECKING:
    from .model_spec import ModelSpec
    from .plan import Plan


def replica_concurrency(plan: Plan) -> int:
    """The requests each data-parallel replica serves: ``ceil(concurrency / replicas)``."""
    return -(-plan.inputs.concurrency // max(plan.data_parallel_size, 1))


def spare_kv_bytes_per_gpu(plan: Plan) -> float:
    """KV budget left per GPU once each replica's share of ``concurrency`` holds its worst-case blocks."""
    if plan.max_concurrency <= 0:
        return 0.0
    used = min(1.0, replica_concurrency(plan) / plan.max_concurrency)
    return plan.kv_budget_bytes_per_gpu * (1.0 - used)


def reported_block_size(plan: Plan) -> int:
    """The block size vLLM's ``cache_config_info`` reports once it has planned: the smallest KV cache group's
    (``v1/engine/core.py`` sets ``cache_config.block_size`` to the minimum over groups; vLLM issue #51163).
    DeepSeek-V4: 4 (its compressor states), where the plan counts 256-token blocks."""
    sizes = [group.block_size for group in plan.kv_groups if group.block_size]
    return min(sizes) if sizes else plan.block_size


def reported_capacity_tokens(plan: Plan) -> int:
    """``num_gpu_blocks x block_size`` as the live metrics give it (``cache_config_info``), for comparing a server
    with its plan like with like; equal to ``kv_capacity_tokens`` unless the smallest group's block is not the
    plan's (DeepSeek-V4)."""
    return plan.num_gpu_blocks * reported_block_size(plan)


def kv_bytes_per_token(model: ModelSpec, kv_cache_dtype: str = "bfloat16", tensor_parallel_size: int = 1) -> int:
    """Every attention layer's KV for one token on one rank (vLLM allocates a page per layer; windows free them
    later). Recurrent-state layers of hybrid models hold a fixed state per request instead, not per token.
    DeepSeek-V4: the compressed latents and indexer keys per token (fp8_ds_mla whatever the dtype asked)."""
    if model.compressed_attention is not None:
        return compressed_attention.bytes_per_token(compressed_attention.packed_cache(model.compressed_attention))
    element = kv_element_bytes(kv_cache_dtype, model.dtype)
    # Per layer group: groups with their own shape (Gemma 4's full layers, MiMo-V2's V heads, Nemotron-NAS's KV
    # heads) cost their own.
    return sum(
        group.num_layers * kv_bytes_per_token_per_layer(model, tensor_parallel_size, element, group=group)
        for group in model.layer_groups
        if group.kind in ATTENTION_LAYER_KINDS
    )


def kv_bytes_per_sequence_per_gpu(*, model: ModelSpec, plan: Plan, kv_cache_dtype: str, context_tokens: int) -> int:
    """What one sequence of ``context_tokens`` holds on the fullest GPU, in whole blocks, as vLLM allocates.

    ``model`` may differ from the plan's (an attention variant drawn beside it); the plan gives the
    parallelism, the block size and the tokens in flight.
    """
    inputs = plan.inputs
    if model.compressed_attention is not None:
        drafted = model.num_mtp_layers if inputs.num_speculative_tokens else 0
        packed = compressed_attention.packed_cache(
            compressed_attention.with_draft_layers(model.compressed_attention, drafted)
        )
        blocks = compressed_attention.request_blocks(packed, context_tokens, plan.in_flight_tokens)
        return packed.bytes_per_block * blocks
    element = kv_element_bytes(kv_cache_dtype, model.dtype)
    tp = inputs.tensor_parallel_size
    group_bytes = group_bytes_per_token(model, tp, element, kv_cache_dtype)
    block_sizes: tuple[int, ...] = ()
    slot_page = plan.block_size * kv_bytes_per_token_per_layer(model, tp, element)
    if not model.has_state and not is_uniform_type(model) and len({size for size in group_bytes if size}) > 1:
        # Groups with their own shapes (Gemma 4's full layers, MiMo-V2's sliding ones): one page size for every
        # layer slot once vLLM unifies them (unify_kv_cache_spec_page_size), smaller pages growing their block.
        block_sizes = unified_block_sizes(group_bytes, plan.block_size)
        slot_page = max(size * bytes_ for size, bytes_ in zip(block_sizes, group_bytes, strict=True))
    worst = 0
    for layers in pipeline_stages(model.num_layers, inputs.pipeline_parallel_size):
        stage = stage_groups(model, layers)
        blocks = request_blocks(
            model,
            stage,
            context_tokens,
            plan.block_size,
            plan.in_flight_tokens,
            plan.state_blocks_per_request or 1,
            block_sizes,
        )
        if stage.layer_counts:
            # One KV cache group of layers with their own pages (Nemotron-NAS): a block holds each layer's page.
            worst = max(worst, blocks * plan.block_size * stage.bytes_per_token(group_bytes))
        else:
            worst = max(worst, blocks * stage.group_size * slot_page)
    return worst
