"""MiMo-V2-Flash's config as a ModelSpec, read as vLLM 0.33 builds the model.

Sources (vLLM 0.33.0): ``vllm/model_executor/models/mimo_v2.py`` (``MiMoV2FlashDecoderLayer``,
``MiMoV2Attention``, ``MiMoV2MoE``, ``MiMoV2FlashForCausalLM``), ``vllm/model_executor/layers/attention/
attention.py`` (``Attention.get_kv_cache_spec``: ``head_size_v``), ``vllm/v1/kv_cache_interface.py``
(``AttentionSpec.state_content_size_bytes``: ``(head_size + head_size_v) * dtype`` per KV head),
``vllm/transformers_utils/model_arch_config_convertor.py`` (``_strip_mimo_v2_attention_chunk_size``).

* ``hybrid_layer_pattern[i] == 1`` makes layer ``i`` a sliding-window layer (``is_compressed_softmax_layer``)
  with ``swa_num_attention_heads``, ``swa_num_key_value_heads``, ``swa_head_dim`` (K), ``swa_v_head_dim`` (V,
  default K's) and the window ``sliding_window_size``; every other layer is full attention with
  ``num_attention_heads``, ``num_key_value_heads``, ``head_dim`` and ``v_head_dim``. vLLM compares with 1 only;
  values other than 0 and 1 are refused here rather than read as full attention.
* The config's ``sliding_window`` is not the layers' window: the decoder layer sets
  ``cache_config.sliding_window = None`` and passes ``sliding_window_size`` per layer. ``attention_chunk_size``
  is deleted from the config by vLLM (MiMo does not use chunked local attention).
* KV heads per rank are ``max(1, heads // tp)`` for both kinds (``MiMoV2Attention``): past 4 ranks the full
  layers replicate their heads. Attention sinks (``add_swa_attention_sink_bias``) are parameters of the
  attention, not cache: ``get_kv_cache_spec`` ignores them.
* ``moe_layer_freq`` as a list marks each MoE layer (``is_moe_layer``); an int, or none, leaves every layer
  dense, as vLLM's check does. ``MiMoV2MoE`` builds no shared expert. The LM head is never tied.
* Multi-token prediction (``mimo_v2_mtp.py``): with ``--speculative-config method mtp`` vLLM loads one draft
  layer whatever the checkpoint holds (``config/speculative.py``: ``_MIMO_V2_FLASH_NUM_MTP_LAYERS = 1``), a
  sliding-window layer of the SWA shapes (``MiMoV2Attention`` with ``swa_*`` heads and ``sliding_window_size``):
  ``num_mtp_layers`` 1 of ``mtp_layer_kind`` ``sliding_window``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import SizingInputError
from .model_spec import LayerGroup, ModelSpec
from .params import ParamCount, given_or_estimated
from .validation import MAX_LAYERS, as_int, check_param_counts

PATTERN_FIELD = "hybrid_layer_pattern"
ARCHITECTURE = "MiMoV2FlashForCausalLM"
FULL, SLIDING = 0, 1
_MAXIMA = {
    "num_hidden_layers": MAX_LAYERS,
    "num_attention_heads": 1024,
    "swa_num_attention_heads": 1024,
    "num_key_value_heads": 1024,
    "swa_num_key_value_heads": 1024,
    "head_dim": 4096,
    "v_head_dim": 4096,
    "swa_head_dim": 4096,
    "swa_v_head_dim": 4096,
    "hidden_size": 131_072,
    "intermediate_size": 1_048_576,
    "moe_intermediate_size": 1_048_576,
    "vocab_size": 4_194_304,
    "max_position_embeddings": 2**27,
    "sliding_window_size": 2**27,
    "n_routed_experts": 4096,
    "num_experts_per_tok": 4096,
}


def is_mimo_v2(cfg: Mapping[str, Any]) -> bool:
    """Whether the config carries MiMo-V2's per-layer attention layout."""
    return cfg.get(PATTERN_FIELD) is not None or cfg.get("swa_num_key_value_heads") is not None


def _int(cfg: Mapping[str, Any], errors: dict[str, str], key: str, *, required: bool, default: int = 0) -> int:
    value = cfg.get(key)
    if value is None:
        if required:
            errors[key] = "missing from the config (vLLM's mimo_v2.py reads it)"
        return default
    return as_int(errors, key, value, maximum=_MAXIMA[key]) or default


def _flags(
    cfg: Mapping[str, Any], errors: dict[str, str], key: str, num_layers: int, meaning: str
) -> tuple[int, ...] | None:
    """A per-layer list of 0/1 flags of exactly ``num_layers`` entries; None (and an error) otherwise."""
    raw = cfg.get(key)
    if not isinstance(raw, list) or len(raw) != num_layers:
        got = f"a list of {len(raw)}" if isinstance(raw, list) else type(raw).__name__
        errors[key] = f"must list {num_layers} layers (num_hidden_layers), one 0 or 1 each ({meaning}); got {got}"
        return None
    for index, value in enumerate(raw):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value not in (0, 1):
            errors[key] = f"unsupported value {value!r} at layer {index}: each layer is 0 or 1 ({meaning})"
            return None
    return tuple(int(value) for value in raw)


def mimo_v2_params(
    *,
    pattern: tuple[int, ...],
    moe_layers: tuple[bool, ...],
    hidden: int,
    vocab: int,
    full: tuple[int, int, int, int],
    sliding: tuple[int, int, int, int],
    sinks: bool,
    qkv_bias: bool,
    intermediate: int,
    experts: int,
    top_k: int,
    expert_intermediate: int,
) -> ParamCount:
    """The weights vLLM builds (``mimo_v2.py``): per layer two RMSNorms; attention q (heads x K), k (KV heads x
    K), v (KV heads x V), o (heads x V -> hidden), QKV bias when ``attention_bias``, a sink per head on sliding
    layers; a dense gated MLP (3 x hidden x intermediate) or routed experts (3 x hidden x moe_intermediate each)
    with their router (``GateLinear`` hidden x experts) and ``e_score_correction_bias``; the final norm, the
    embeddings and an untied LM head. ``full`` / ``sliding``: (heads, KV heads, K head, V head)."""

    def attention(shape: tuple[int, int, int, int], with_sinks: bool) -> int:
        heads, kv_heads, k_head, v_head = shape
        width = heads * k_head + kv_heads * (k_head + v_head)
        return hidden * width + heads * v_head * hidden + (width if qkv_bias else 0) + (heads if with_sinks else 0)

    expert = 3 * hidden * expert_intermediate
    router = hidden * experts + experts
    total = active = routed = attention_total = dense_total = 0
    for kind, moe in zip(pattern, moe_layers, strict=True):
        layer = 2 * hidden + (attention(sliding, sinks) if kind == SLIDING else attention(full, False))
        attention_total += layer - 2 * hidden
        if moe:
            total += layer + experts * expert + router
            active += layer + top_k * expert + router
            routed += experts * expert
        else:
            dense = 3 * hidden * intermediate
            dense_total += dense
            total += layer + dense
            active += layer + dense
    embeddings = 2 * vocab * hidden + hidden  # embeddings, the untied LM head, the final norm
    return ParamCount(
        total=total + embeddings,
        active=active + embeddings,
        routed_experts=routed,
        attention=attention_total,
        dense_mlp=dense_total,
        embeddings=embeddings,
    )


def mimo_v2_spec(
    cfg: Mapping[str, Any],
    *,
    dtype: str,
    quantization: str | None,
    notes: list[str],
    name: str,
    num_params: int | None,
    num_active_params: int | None,
    hf_id: str | None,
    slug: str | None,
) -> ModelSpec:
    """MiMo-V2-Flash's ModelSpec: a full and a sliding-window layer group, each with its own KV heads, K and V
    head sizes, in ``hybrid_layer_pattern``'s order. Fields vLLM reads without a default are required."""
    errors: dict[str, str] = {}
    architectures = cfg.get("architectures")
    if architectures not in (None, [ARCHITECTURE]):
        errors["architectures"] = (
            f"{architectures!r}: hybrid_layer_pattern is sized for {ARCHITECTURE} only (MiMo-V2-Flash, "
            "vllm/model_executor/models/mimo_v2.py)"
        )
    if cfg.get("vision_config") is not None:
        errors["vision_config"] = "MiMo-V2 with a vision tower (MiMoV2OmniForCausalLM) is not sized yet"
    layers = _int(cfg, errors, "num_hidden_layers", required=True)
    hidden = _int(cfg, errors, "hidden_size", required=True)
    vocab = _int(cfg, errors, "vocab_size", required=True)
    max_pos = _int(cfg, errors, "max_position_embeddings", required=True)
    heads = _int(cfg, errors, "num_attention_heads", required=True)
    kv_heads = _int(cfg, errors, "num_key_value_heads", required=True)
    head = _int(cfg, errors, "head_dim", required=True)
    v_head = _int(cfg, errors, "v_head_dim", required=False, default=head)
    if errors:
        raise SizingInputError(errors)
    pattern = _flags(cfg, errors, PATTERN_FIELD, layers, "0 full attention, 1 sliding window")
    if errors:
        raise SizingInputError(errors)
    assert pattern is not None
    has_sliding = SLIDING in pattern
    swa_heads = _int(cfg, errors, "swa_num_attention_heads", required=has_sliding)
    swa_kv_heads = _int(cfg, errors, "swa_num_key_value_heads", required=has_sliding)
    swa_head = _int(cfg, errors, "swa_head_dim", required=has_sliding)
    swa_v_head = _int(cfg, errors, "swa_v_head_dim", required=False, default=swa_head)
    window = _int(cfg, errors, "sliding_window_size", required=has_sliding)
    raw_freq = cfg.get("moe_layer_freq")
    if isinstance(raw_freq, list):
        flags = _flags(cfg, errors, "moe_layer_freq", layers, "0 dense MLP, 1 routed experts")
        moe_layers = tuple(bool(flag) for flag in flags) if flags is not None else (False,) * layers
    else:
        # is_moe_layer: an int (or no) moe_layer_freq leaves every layer dense.
        moe_layers = (False,) * layers
        notes.append(f"moe_layer_freq {raw_freq!r} is not a list: every layer dense, as vLLM's is_moe_layer reads it")
    any_moe, any_dense = any(moe_layers), not all(moe_layers)
    experts = _int(cfg, errors, "n_routed_experts", required=any_moe)
    top_k = _int(cfg, errors, "num_experts_per_tok", required=any_moe)
    expert_inter = _int(cfg, errors, "moe_intermediate_size", required=any_moe)
    intermediate = _int(cfg, errors, "intermediate_size", required=any_dense)
    attention_bias = cfg.get("attention_bias")
    if not isinstance(attention_bias, bool):
        errors["attention_bias"] = f"must be true or false (vLLM's mimo_v2.py reads it), got {attention_bias!r}"
    sinks = cfg.get("add_swa_attention_sink_bias", False)
    if not isinstance(sinks, bool):
        errors["add_swa_attention_sink_bias"] = f"must be true or false, got {sinks!r}"
    if errors:
        raise SizingInputError(errors)
    if heads % kv_heads:
        errors["num_key_value_heads"] = f"{kv_heads} KV heads do not divide {heads} attention heads"
    if has_sliding and swa_heads != heads:
        # The engine checks tensor parallelism against one head count (inputs.py, _check_model_parallel).
        errors["swa_num_attention_heads"] = (
            f"{swa_heads}: sliding layers with another head count than the full layers' {heads} are not sized yet"
        )
    elif has_sliding and swa_heads % swa_kv_heads:
        errors["swa_num_key_value_heads"] = f"{swa_kv_heads} KV heads do not divide {swa_heads} attention heads"
    if any_moe and top_k > experts:
        errors["num_experts_per_tok"] = f"{top_k} is more than the {experts} experts"
    if errors:
        raise SizingInputError(errors)

    full_group = LayerGroup(
        "full",
        pattern.count(FULL),
        None,
        head_size=head,
        num_kv_heads=kv_heads,
        head_size_v=v_head if v_head != head else None,
    )
    sliding_group = LayerGroup(
        "sliding_window",
        pattern.count(SLIDING),
        window,
        head_size=swa_head,
        num_kv_heads=swa_kv_heads,
        head_size_v=swa_v_head if swa_v_head != swa_head else None,
    )
    by_kind = {FULL: full_group, SLIDING: sliding_group}
    order = list(dict.fromkeys(pattern))  # groups in the order their first layer appears
    groups = tuple(by_kind[kind] for kind in order)
    layer_pattern = tuple(order.index(kind) for kind in pattern)

    count = mimo_v2_params(
        pattern=pattern,
        moe_layers=moe_layers,
        hidden=hidden,
        vocab=vocab,
        full=(heads, kv_heads, head, v_head),
        sliding=(swa_heads, swa_kv_heads, swa_head, swa_v_head),
        sinks=sinks,
        qkv_bias=attention_bias is True,
        intermediate=intermediate,
        experts=experts,
        top_k=top_k,
        expert_intermediate=expert_inter,
    )
    check_param_counts(num_params, num_active_params)
    total, active = given_or_estimated(count, num_params, num_active_params)
    scale = total / count.total
    # Built without a quant config (GateLinear, float32 params): the routers stay unquantised in an FP8 checkpoint.
    routers = sum(moe_layers) * (hidden * experts + experts)
    notes.append(
        f"MiMo-V2 layers: {full_group.num_layers} full attention ({kv_heads} KV heads, K {head} / V {v_head}), "
        f"{sliding_group.num_layers} sliding window {window} ({swa_kv_heads} KV heads, K {swa_head} / "
        f"V {swa_v_head}) from hybrid_layer_pattern (1 = sliding, vllm/model_executor/models/mimo_v2.py); "
        "attention_chunk_size and sliding_window unused (vLLM strips / overrides them)"
    )
    notes.append("MTP speculation adds one sliding-window draft layer of the SWA shapes (mimo_v2_mtp.py)")
    if num_params is None:
        notes.append(f"parameter count estimated from the config's shapes: {count.total / 1e9:.3f}B")
    if cfg.get("n_shared_experts"):
        notes.append(f"n_shared_experts {cfg.get('n_shared_experts')!r} ignored: vLLM's MiMoV2MoE builds none")
    return ModelSpec(
        name=name or (hf_id or "MiMo-V2-Flash"),
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_size=head,
        hidden_size=hidden,
        attention_kind="MHA" if kv_heads == heads else "MQA" if kv_heads == 1 else "GQA",
        layer_groups=groups,
        dtype=dtype,
        num_params=total,
        num_active_params=active,
        params_estimated=num_params is None,
        max_position_embeddings=max_pos,
        vocab_size=vocab,
        intermediate_size=intermediate,
        is_moe=any_moe,
        hf_id=hf_id,
        slug=slug,
        layer_pattern=layer_pattern,
        tie_word_embeddings=False,
        num_expert_params=round(count.routed_experts * scale),
        num_experts=experts,
        num_experts_per_tok=top_k,
        expert_intermediate_size=expert_inter,
        quantization=quantization,
        notes=tuple(notes),
        unquantized_params=round(routers * scale),
        num_mtp_layers=1,
        mtp_layer_kind="sliding_window",
    )
