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
)

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


def kv_bytes_per_token(model: ModelSpec, kv_cache_dtype: str = "bfloat16", tensor_parallel_size: int = 1) -> int:
    """Every attention layer's KV for one token on one rank (vLLM allocates a page per layer; windows free them
    later). Recurrent-state layers of hybrid models hold a fixed state per request instead, not per token.
    DeepSeek-V4: the compressed latents and indexer keys per token (fp8_ds_mla whatever the dtype asked)."""
    if model.compressed_attention is not None:
        return compressed_attention.bytes_per_token(compressed_attention.packed_cache(model.compressed_attention))
    element = kv_element_bytes(kv_cache_dtype, model.dtype)
    if is_uniform_type(model):  # layers of their own KV heads (Nemotron-NAS): each layer's page
        per_group = group_bytes_per_token(model, tensor_parallel_size, element, kv_cache_dtype)
        return sum(bytes_ * group.num_layers for bytes_, group in zip(per_group, model.layer_groups, strict=True))
    return model.num_attention_layers * kv_bytes_per_token_per_layer(model, tensor_parallel_size, element)


def kv_bytes_per_sequence_per_gpu(*, model: ModelSpec, plan: Plan, kv_cache_dtype: str, context_tokens: int) -> int:
    """What one sequence of ``context_tokens`` holds on the fullest GPU, in whole blocks, as vLLM allocates.

    ``model`` may differ from the plan's (an attention variant drawn beside it); the plan gives the
    parallelism, the block size and the tokens in flight.
    """
    inputs = plan.inputs
    if model.compressed_attention is not None:
        packed = compressed_attention.packed_cache(model.compressed_attention)
        blocks = compressed_attention.request_blocks(packed, context_tokens, plan.in_flight_tokens)
        return packed.bytes_per_block * blocks
    element = kv_element_bytes(kv_cache_dtype, model.dtype)
    per_layer = kv_bytes_per_token_per_layer(model, inputs.tensor_parallel_size, element)
    group_bytes = group_bytes_per_token(model, inputs.tensor_parallel_size, element, kv_cache_dtype)
    worst = 0
    for layers in pipeline_stages(model.num_layers, inputs.pipeline_parallel_size):
        stage = stage_groups(model, layers)
        blocks = request_blocks(
            model, stage, context_tokens, plan.block_size, plan.in_flight_tokens, plan.state_blocks_per_request or 1
        )
        # One KV cache group of layers with their own pages (Nemotron-NAS): a block holds each layer's page.
        per_block = stage.bytes_per_token(group_bytes) if stage.layer_counts else stage.group_size * per_layer
        worst = max(worst, blocks * plan.block_size * per_block)
    return worst
