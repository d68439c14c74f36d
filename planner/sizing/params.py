"""Parameter counts estimated from a config's shapes (when no official count is given).

Counts every weight matrix the HF modelling code creates: embeddings and an untied LM head, attention
projections (MLA's low-rank ``q_a/q_b/kv_a/kv_b`` included), gated MLPs (three matrices), routed and
shared experts with their router, and norms. Biases are counted where the architecture has them
(Qwen2 QKV bias, gpt-oss attention and expert biases). Lands within 0.5% of the counts computed from
the published checkpoints in the catalog (tests/planner/sizing/test_params.py).
"""

from __future__ import annotations

from dataclasses import dataclass


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
) -> ParamCount:
    h = hidden_size
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
        q_width = num_attention_heads * head_dim
        kv_width = num_kv_heads * head_dim
        attention = h * (q_width + 2 * kv_width) + q_width * h
        if qkv_bias:
            attention += q_width + 2 * kv_width
        if o_bias:
            attention += h
        if qk_norm:
            attention += 2 * head_dim
        if attention_sinks:
            attention += num_attention_heads
    per_layer_fixed = attention + norms_per_layer * h

    total = 0
    active = 0
    routed = 0
    for layer in range(num_layers):
        total += per_layer_fixed
        active += per_layer_fixed
        if moe is None or not moe.moe_layers[layer]:
            inter = moe.dense_intermediate_size if moe is not None else intermediate_size
            total += 3 * h * inter
            active += 3 * h * inter
            continue
        expert = 3 * h * moe.expert_intermediate_size
        if moe.expert_biases:
            expert += 2 * moe.expert_intermediate_size + h
        router = h * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
        shared = 3 * h * moe.shared_intermediate_size + (h if moe.shared_expert_gate else 0)
        routed += moe.num_experts * expert
        total += moe.num_experts * expert + router + shared
        active += moe.experts_per_token * expert + router + shared
    embeddings = vocab_size * h * (1 if tie_word_embeddings else 2) + h  # + final norm
    return ParamCount(total=total + embeddings, active=active + embeddings, routed_experts=routed)
