"""Parameter counts estimated from a config's shapes (when no official count is given).

Counts every weight matrix the HF modelling code creates: embeddings and an untied LM head, attention
projections (MLA's low-rank ``q_a/q_b/kv_a/kv_b`` included), gated MLPs (three matrices), routed and
shared experts with their router, and norms. Biases are counted where the architecture has them
(Qwen2 QKV bias, gpt-oss attention and expert biases). Lands within 0.5% of the counts computed from
the published checkpoints in the catalog (tests/planner/sizing/test_params.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .model_spec import StateSpec


@dataclass(frozen=True)
class MoeShape:
    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    shared_intermediate_size: int  # all shared experts of one layer together; 0 when none
    moe_layers: tuple[bool, ...]  # per layer: routed experts (True) or a dense MLP (False)
    dense_intermediate_size: int
    expert_biases: bool = False
    router_bias: bool = False
    shared_expert_gate: bool = False
    gated: bool = True  # gate/up/down (SwiGLU) or up/down only (Nemotron-H's relu2 experts)
    expert_hidden_size: int = 0  # the experts' input width when routed in a latent space; 0 = hidden size
    extra_params_per_layer: int = 0  # latent projections in and out of the experts


@dataclass(frozen=True)
class MlaShape:
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None


@dataclass(frozen=True)
class ParamCount:
    total: int
    active: int
    routed_experts: int
    # Shares a checkpoint may leave unquantised (its exclude_modules / ignore lists name them).
    attention: int = 0
    state: int = 0
    shared_experts: int = 0
    dense_mlp: int = 0
    embeddings: int = 0


def estimate_params(
    *,
    num_layers: int,
    hidden_size: int,
    num_attention_heads: int,
    num_kv_heads: int,
    head_dim: int,
    intermediate_size: int,
    vocab_size: int,
    tie_word_embeddings: bool,
    qkv_bias: bool = False,
    o_bias: bool = False,
    qk_norm: bool = False,
    attention_sinks: bool = False,
    norms_per_layer: int = 2,
    mla: MlaShape | None = None,
    moe: MoeShape | None = None,
    mixers: tuple[str, ...] = (),
    mlps: tuple[str, ...] = (),
    state_params: int = 0,
    gated_mlp: bool = True,
    attention_output_gate: bool = False,
    layer_kv_heads: tuple[int, ...] = (),
    layer_intermediate_sizes: tuple[int, ...] = (),
) -> ParamCount:
    """``mixers`` gives each layer's mixer (``attention``, ``state`` with ``state_params`` weights, or
    ``none``) and ``mlps`` its MLP (``dense``, ``moe`` or ``none``); empty means attention and the MoE
    pattern (or a dense MLP) on every layer. ``attention_output_gate`` doubles q_proj (Qwen3-Next/3.5).
    ``layer_kv_heads`` / ``layer_intermediate_sizes``: each layer's own KV heads and dense MLP width where
    they vary by layer (Nemotron-NAS block_configs); empty means ``num_kv_heads`` and ``intermediate_size``."""
    h = hidden_size

    def gqa_attention(kv_heads: int) -> int:
        q_width = num_attention_heads * head_dim
        kv_width = kv_heads * head_dim
        params = h * (q_width * (2 if attention_output_gate else 1) + 2 * kv_width) + q_width * h
        if qkv_bias:
            params += q_width + 2 * kv_width
        if o_bias:
            params += h
        if qk_norm:
            params += 2 * head_dim
        if attention_sinks:
            params += num_attention_heads
        return params

    if mla is not None:
        qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        if mla.q_lora_rank:
            attention = h * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * num_attention_heads * qk_head
        else:
            attention = h * num_attention_heads * qk_head
        attention += h * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
        attention += mla.kv_lora_rank * num_attention_heads * (mla.qk_nope_head_dim + mla.v_head_dim)
        attention += num_attention_heads * mla.v_head_dim * h
    else:
        attention = gqa_attention(num_kv_heads)
    total = 0
    active = 0
    routed = 0
    parts = {"attention": 0, "state": 0, "shared": 0, "dense": 0}
    for layer in range(num_layers):
        mixer = mixers[layer] if mixers else "attention"
        layer_attention = gqa_attention(layer_kv_heads[layer]) if layer_kv_heads else attention
        fixed = norms_per_layer * h + (
            layer_attention if mixer == "attention" else state_params if mixer == "state" else 0
        )
        if mixer == "attention":
            parts["attention"] += layer_attention
        elif mixer == "state":
            parts["state"] += state_params
        total += fixed
        active += fixed
        mlp = mlps[layer] if mlps else "moe" if moe is not None and moe.moe_layers[layer] else "dense"
        if mlp == "none":
            continue
        if mlp == "dense" or moe is None:
            inter = moe.dense_intermediate_size if moe is not None else intermediate_size
            if layer_intermediate_sizes:
                inter = layer_intermediate_sizes[layer]
            total += (3 if gated_mlp else 2) * h * inter
            active += (3 if gated_mlp else 2) * h * inter
            parts["dense"] += (3 if gated_mlp else 2) * h * inter
            continue
        matrices = 3 if moe.gated else 2
        expert = matrices * (moe.expert_hidden_size or h) * moe.expert_intermediate_size
        if moe.expert_biases:
            expert += 2 * moe.expert_intermediate_size + h
        router = h * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
        shared = matrices * h * moe.shared_intermediate_size + (h if moe.shared_expert_gate else 0)
        routed += moe.num_experts * expert
        parts["shared"] += shared
        total += moe.num_experts * expert + router + shared + moe.extra_params_per_layer
        active += moe.experts_per_token * expert + router + shared + moe.extra_params_per_layer
    embeddings = vocab_size * h * (1 if tie_word_embeddings else 2) + h  # + final norm
    return ParamCount(
        total=total + embeddings,
        active=active + embeddings,
        routed_experts=routed,
        attention=parts["attention"],
        state=parts["state"],
        shared_experts=parts["shared"],
        dense_mlp=parts["dense"],
        embeddings=embeddings,
    )


def state_mixer_params(state: StateSpec, hidden_size: int, *, conv_bias: bool = True) -> int:
    """Weights of one recurrent-state mixer (the layer's attention replacement).

    Mamba2 (``MambaMixer2``): in_proj to z, x, B, C and dt, the depthwise conv, dt_bias / A_log / D per
    head, the gated norm and out_proj. Mamba1 (``MambaMixer``): in_proj to x and z, conv, x_proj to
    dt/B/C with dt rank ceil(hidden / 16), dt_proj, A_log, D, out_proj. Gated delta net
    (Qwen3-Next/3.5): q/k/v/z and b/a projections, conv over q, k and v, dt_bias and A_log per value
    head, the per-head-dim norm and out_proj.
    """
    h = hidden_size
    if state.kind == "mamba2":
        inner, groups, heads = state.intermediate_size, state.n_groups, state.num_heads
        conv_dim = inner + 2 * groups * state.state_size
        conv = conv_dim * state.conv_kernel + (conv_dim if conv_bias else 0)
        return h * (2 * inner + 2 * groups * state.state_size + heads) + conv + 3 * heads + inner + inner * h
    if state.kind == "mamba1":
        inner, rank = state.intermediate_size, -(-h // 16)
        conv = inner * state.conv_kernel + (inner if conv_bias else 0)
        return (
            h * 2 * inner
            + conv
            + inner * (rank + 2 * state.state_size)
            + rank * inner
            + inner
            + inner * state.state_size
            + inner
            + inner * h
        )
    if state.kind == "gdn":
        key = state.num_k_heads * state.head_k_dim
        value = state.num_heads * state.head_dim
        conv = (2 * key + value) * state.conv_kernel
        return (
            h * (2 * key + 2 * value)
            + h * 2 * state.num_heads
            + conv
            + 2 * state.num_heads
            + state.head_dim
            + value * h
        )
    width = state.num_heads * state.head_dim  # linear attention: q, k, v, o projections
    return 4 * h * width


def tower_params(tower: Mapping[str, Any]) -> int:
    """Weights of a vision or audio encoder from its config: a transformer of ``depth`` blocks (attention
    with q/k/v/o, an MLP of two matrices, two norms with biases) plus the patch embedding and a projector
    to ``out_hidden_size``. An estimate for towers whose exact layout varies by family; 0 when the config
    does not give the shapes."""
    width = _first_int(tower, ("hidden_size", "embed_dim", "d_model", "width"))
    depth = _first_int(tower, ("depth", "num_hidden_layers", "num_layers", "encoder_layers"))
    inner = _first_int(tower, ("intermediate_size", "encoder_ffn_dim", "mlp_dim")) or 4 * width
    if not width or not depth:
        return 0
    block = 4 * width * width + 4 * width + 2 * width * inner + inner + width + 4 * width
    patch = _first_int(tower, ("patch_size",)) or 0
    channels = _first_int(tower, ("in_channels", "num_channels")) or 3
    temporal = _first_int(tower, ("temporal_patch_size",)) or 1
    embedding = channels * patch * patch * temporal * width + width if patch else 0
    out = _first_int(tower, ("out_hidden_size", "projection_dim", "output_dim")) or 0
    merge = _first_int(tower, ("spatial_merge_size",)) or 1
    merged = width * merge * merge
    projector = merged * merged + merged * out if out else 0
    return depth * block + embedding + projector


def _first_int(mapping: Mapping[str, Any], keys: tuple[str, ...]) -> int:
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**7:
            return value
    return 0


def compressed_attention_params(
    *,
    compress_ratios: tuple[int, ...],
    hidden_size: int,
    num_attention_heads: int,
    head_dim: int,
    q_lora_rank: int,
    o_lora_rank: int,
    o_groups: int,
    index_head_dim: int,
    index_n_heads: int,
    vocab_size: int,
    num_experts: int,
    experts_per_token: int,
    expert_intermediate_size: int,
    num_shared_experts: int,
    hc_mult: int,
    tie_word_embeddings: bool,
) -> ParamCount:
    """DeepSeek-V4's weights as vLLM 0.33 builds them (``vllm/models/deepseek_v4/attention.py``,
    ``compressor.py``, ``nvidia/model.py``), MTP layers left out (loaded only with speculative decoding):

    attention ``fused_wqa_wkv`` h x (q_lora + head_dim), ``wq_b`` q_lora x heads x head_dim, ``wo_a``
    (heads x head_dim / o_groups) x (o_groups x o_lora), ``wo_b`` o_groups x o_lora x h, norms and sinks; a
    compressor per compressed layer (``fused_wkv_wgate`` h x 2 x coff x head_dim, ``ape`` ratio x coff x
    head_dim, coff 2 at ratio 4); a ratio-4 layer's indexer (``wq_b`` q_lora x index heads x index_head_dim,
    ``weights_proj`` h x index heads, its own compressor at index_head_dim); experts gate/up/down with a
    router, shared experts; hyper-connection mixers (hc_mult copies of the residual: per layer two
    (hc x (2 + hc)) x (hc x h) maps). Embeddings and an untied LM head."""
    h = hidden_size
    attention = (
        h * (q_lora_rank + head_dim)
        + q_lora_rank * num_attention_heads * head_dim
        + (num_attention_heads * head_dim // o_groups) * (o_groups * o_lora_rank)
        + o_groups * o_lora_rank * h
        + q_lora_rank
        + head_dim
        + num_attention_heads
    )
    hyper = 2 * (hc_mult * (2 + hc_mult)) * (hc_mult * h)

    def compressor(ratio: int, width: int) -> int:
        coff = 2 if ratio == 4 else 1
        return h * 2 * coff * width + ratio * coff * width + width

    expert = 3 * h * expert_intermediate_size
    shared = num_shared_experts * expert
    router = h * num_experts
    total = active = routed = 0
    attention_total = 0
    for ratio in compress_ratios:
        layer = attention + hyper + 2 * h
        if ratio > 1:
            layer += compressor(ratio, head_dim)
        if ratio == 4:
            layer += q_lora_rank * index_n_heads * index_head_dim + h * index_n_heads + compressor(4, index_head_dim)
        attention_total += layer
        total += layer + num_experts * expert + router + shared
        active += layer + experts_per_token * expert + router + shared
        routed += num_experts * expert
    embeddings = vocab_size * h * (1 if tie_word_embeddings else 2) + h
    return ParamCount(
        total=total + embeddings,
        active=active + embeddings,
        routed_experts=routed,
        attention=attention_total,
        shared_experts=shared * len(compress_ratios),
        embeddings=embeddings,
    )


def given_or_estimated(count: ParamCount, num_params: int | None, num_active_params: int | None) -> tuple[int, int]:
    """Total and active parameters: the given counts, else the estimate; a given total without an active count
    scales the estimate's active share to it."""
    total = int(num_params) if num_params is not None else count.total
    if num_active_params is not None:
        return total, int(num_active_params)
    if num_params is not None and count.total:
        return total, min(total, math.ceil(total * count.active / count.total))
    return total, count.active
