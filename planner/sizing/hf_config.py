"""ModelSpec from a Hugging Face ``config.json`` dict.

Follows what vLLM reads (``vllm/config/model.py``: ``get_num_kv_heads``, ``get_head_size``, the
per-layer attention types) and what transformers writes for each architecture's ``layer_types``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .errors import SizingInputError
from .model_spec import LayerGroup, ModelSpec
from .params import MlaShape, MoeShape, estimate_params
from .validation import MAX_LAYERS, as_int

_ALIASES: dict[str, tuple[str, ...]] = {
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_dim"),
}
_DTYPES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "torch.bfloat16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "torch.float16": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "torch.float32": "float32",
}
_HF_LAYER_TYPES = {
    "full_attention": "full",
    "sliding_attention": "sliding_window",
    "chunked_attention": "chunked_local",
}
# Qwen2-style configs carry ``sliding_window`` even when it is off (``use_sliding_window: false``).
_QWEN_FAMILY_PREFIX = "qwen"
# What real models use, with headroom: the largest in the catalog (Llama 3.1 405B: 126 layers, 128 heads, hidden
# 16384, intermediate 53248; Gemma 3: vocab 262208; Llama 4 Scout: 10M positions; DeepSeek-V3: 256 experts) times
# 4 to 16. Beyond them a request is an attack on the CPU (a 100,000-layer config made a search run for seconds),
# not a model.
_LIMITS = {
    "num_hidden_layers": MAX_LAYERS,
    "num_attention_heads": 1024,
    "num_key_value_heads": 1024,
    "hidden_size": 131_072,
    "head_dim": 4096,
    "intermediate_size": 1_048_576,
    "vocab_size": 4_194_304,
    "max_position_embeddings": 2**27,
    "experts": 4096,
}


def _lookup(cfg: Mapping[str, Any], field: str) -> tuple[str, Any]:
    for key in _ALIASES.get(field, (field,)):
        if cfg.get(key) is not None:
            return key, cfg[key]
    return field, None


def _required_int(cfg: Mapping[str, Any], errors: dict[str, str], field: str, *, minimum: int = 1) -> int | None:
    key, value = _lookup(cfg, field)
    if value is None:
        errors[field] = "missing from the config"
        return None
    return as_int(errors, key, value, minimum=minimum, maximum=_LIMITS.get(field, 2**40))


def _optional_int(
    cfg: Mapping[str, Any], errors: dict[str, str], field: str, *, minimum: int = 1, maximum: int = 2**40
) -> int | None:
    key, value = _lookup(cfg, field)
    if value is None:
        return None
    return as_int(errors, key, value, minimum=minimum, maximum=maximum)


def _optional_bool(cfg: Mapping[str, Any], errors: dict[str, str], field: str) -> bool | None:
    value = cfg.get(field)
    if value is None or isinstance(value, bool):
        return value
    errors[field] = f"must be true or false, got {value!r}"
    return None


def _merged_config(config: Any) -> dict[str, Any]:
    """Multimodal configs keep the decoder under ``text_config``; its fields win over the wrapper's."""
    if not isinstance(config, Mapping):
        raise SizingInputError({"config": f"must be a JSON object (dict), got {type(config).__name__}"})
    bad_keys = [key for key in config if not isinstance(key, str)]
    if bad_keys:
        raise SizingInputError({"config": "keys must be strings"})
    text = config.get("text_config")
    if text is None:
        return dict(config)
    if not isinstance(text, Mapping) or any(not isinstance(key, str) for key in text):
        raise SizingInputError({"text_config": "must be a JSON object (dict)"})
    merged = {key: value for key, value in config.items() if key != "text_config"}
    merged.update(text)
    return merged


def _model_dtype(cfg: Mapping[str, Any], errors: dict[str, str], notes: list[str]) -> str:
    for key in ("torch_dtype", "dtype"):
        value = cfg.get(key)
        if value is None:
            continue
        if isinstance(value, str) and value.lower() in _DTYPES:
            return _DTYPES[value.lower()]
        errors[key] = f"unknown dtype {value!r}; expected bfloat16, float16 or float32"
        return "bfloat16"
    notes.append("torch_dtype missing from the config: assumed bfloat16")
    return "bfloat16"


def _quantization(cfg: Mapping[str, Any], errors: dict[str, str], notes: list[str]) -> str | None:
    """The checkpoint's own weight format (``quantization_config``), used when weight_dtype is ``auto``."""
    qc = cfg.get("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, Mapping):
        errors["quantization_config"] = "must be a JSON object (dict)"
        return None
    method = qc.get("quant_method")
    if not isinstance(method, str):
        errors["quantization_config"] = "quant_method must be a string"
        return None
    method = method.lower()
    if method in ("fp8", "mxfp4"):
        return method
    bits = qc.get("bits", qc.get("w_bit"))
    if method in ("awq", "gptq", "autoround", "auto-round") and bits in (4, 8):
        return f"int{bits}"
    notes.append(f"quantization_config {method!r} not modelled: weights sized from torch_dtype")
    return None


def _layer_kinds(
    cfg: Mapping[str, Any], errors: dict[str, str], num_layers: int, model_type: str
) -> list[tuple[str, int | None]]:
    """Per layer ``(kind, window)``, following each architecture's rule in transformers/vLLM."""
    sliding = _optional_int(cfg, errors, "sliding_window")
    chunk = _optional_int(cfg, errors, "attention_chunk_size")
    full: tuple[str, int | None] = ("full", None)

    layer_types = cfg.get("layer_types")
    if layer_types is not None:
        if not isinstance(layer_types, list) or len(layer_types) != num_layers:
            errors["layer_types"] = f"must be a list of {num_layers} attention types"
            return [full] * num_layers
        kinds: list[tuple[str, int | None]] = []
        for value in layer_types:
            kind = _HF_LAYER_TYPES.get(value) if isinstance(value, str) else None
            if kind is None:
                errors["layer_types"] = f"unsupported layer type {value!r}; expected {', '.join(_HF_LAYER_TYPES)}"
                return [full] * num_layers
            if kind == "sliding_window":
                if sliding is None:
                    errors["sliding_window"] = "required by sliding_attention layers"
                    return [full] * num_layers
                kinds.append((kind, sliding))
            elif kind == "chunked_local":
                if chunk is None:
                    errors["attention_chunk_size"] = "required by chunked_attention layers"
                    return [full] * num_layers
                kinds.append((kind, chunk))
            else:
                kinds.append(full)
        return kinds

    if model_type.startswith("llama4"):
        if chunk is None:
            return [full] * num_layers
        # RoPE layers use chunked attention; every 4th layer is NoPE global (Llama4TextConfig.no_rope_layers).
        no_rope = cfg.get("no_rope_layers")
        if isinstance(no_rope, list) and len(no_rope) == num_layers:
            return [("chunked_local", chunk) if uses_rope else full for uses_rope in no_rope]
        return [full if (i + 1) % 4 == 0 else ("chunked_local", chunk) for i in range(num_layers)]

    if sliding is None:
        return [full] * num_layers
    use_sliding = _optional_bool(cfg, errors, "use_sliding_window")
    if model_type == "gemma2" or model_type == "gpt_oss":
        # Gemma2 and gpt-oss alternate, starting with a sliding layer at index 0.
        return [("sliding_window", sliding) if i % 2 == 0 else full for i in range(num_layers)]
    if model_type.startswith("gemma3"):
        pattern = _optional_int(cfg, errors, "sliding_window_pattern", maximum=100_000) or 6
        return [full if (i + 1) % pattern == 0 else ("sliding_window", sliding) for i in range(num_layers)]
    if model_type.startswith(_QWEN_FAMILY_PREFIX):
        if not use_sliding:
            return [full] * num_layers
        # The first max_window_layers layers keep full attention (Qwen2Config docstring).
        first_sliding = _optional_int(cfg, errors, "max_window_layers", minimum=0) or 0
        return [("sliding_window", sliding) if i >= first_sliding else full for i in range(num_layers)]
    if use_sliding is False:
        return [full] * num_layers
    # Mistral v0.1, Phi-3 and others: a set sliding_window applies to every layer, as vLLM does,
    # even where it is as long as the context (Phi-3 mini 4k: 2047 of 4096).
    return [("sliding_window", sliding)] * num_layers


def _groups(kinds: list[tuple[str, int | None]]) -> tuple[tuple[LayerGroup, ...], tuple[int, ...]]:
    order: list[tuple[str, int | None]] = []
    for kind in kinds:
        if kind not in order:
            order.append(kind)
    pattern = tuple(order.index(kind) for kind in kinds)
    groups = tuple(LayerGroup(kind, pattern.count(index), window) for index, (kind, window) in enumerate(order))
    return groups, pattern


def _moe_shape(
    cfg: Mapping[str, Any], errors: dict[str, str], model_type: str, num_layers: int, intermediate: int
) -> MoeShape | None:
    routed = _optional_int(cfg, errors, "n_routed_experts", minimum=0, maximum=_LIMITS["experts"])
    local = _optional_int(cfg, errors, "num_local_experts", minimum=0, maximum=_LIMITS["experts"])
    qwen = _optional_int(cfg, errors, "num_experts", minimum=0, maximum=_LIMITS["experts"])
    num_experts = routed or local or qwen
    if not num_experts or num_experts < 2:
        return None
    top_k = _optional_int(cfg, errors, "num_experts_per_tok", maximum=_LIMITS["experts"])
    if top_k is None:
        errors.setdefault("num_experts_per_tok", "required for a mixture-of-experts config")
        return None
    if top_k > num_experts:
        errors["num_experts_per_tok"] = f"{top_k} is more than the {num_experts} experts"
        return None
    moe_inter = _optional_int(cfg, errors, "moe_intermediate_size", maximum=_LIMITS["intermediate_size"])
    expert_inter = moe_inter or intermediate
    dense_inter = intermediate
    shared = 0
    shared_gate = False
    if routed:  # DeepSeek V2/V3
        first_dense = _optional_int(cfg, errors, "first_k_dense_replace", minimum=0, maximum=100_000) or 0
        freq = _optional_int(cfg, errors, "moe_layer_freq", maximum=100_000) or 1
        layers = tuple(i >= first_dense and i % freq == 0 for i in range(num_layers))
        n_shared = _optional_int(cfg, errors, "n_shared_experts", minimum=0, maximum=_LIMITS["experts"])
        shared = (n_shared or 0) * expert_inter
    elif qwen:  # Qwen2-MoE / Qwen3-MoE
        step = _optional_int(cfg, errors, "decoder_sparse_step", maximum=100_000) or 1
        mlp_only = cfg.get("mlp_only_layers") or []
        if not isinstance(mlp_only, list):
            errors["mlp_only_layers"] = "must be a list of layer indices"
            mlp_only = []
        layers = tuple(i not in mlp_only and (i + 1) % step == 0 for i in range(num_layers))
        shared = _optional_int(cfg, errors, "shared_expert_intermediate_size", minimum=0) or 0
        shared_gate = bool(shared)
    elif model_type.startswith("llama4"):
        step = _optional_int(cfg, errors, "interleave_moe_layer_step", maximum=100_000) or 1
        layers = tuple((i + 1) % step == 0 for i in range(num_layers))
        shared = intermediate  # one shared expert the size of a routed one
        dense_inter = (
            _optional_int(cfg, errors, "intermediate_size_mlp", maximum=_LIMITS["intermediate_size"]) or intermediate
        )
    else:  # Mixtral, gpt-oss: every layer routed, intermediate_size is the expert's
        layers = (True,) * num_layers
    return MoeShape(
        num_experts=num_experts,
        experts_per_token=top_k,
        expert_intermediate_size=expert_inter,
        shared_intermediate_size=shared,
        moe_layers=layers,
        dense_intermediate_size=dense_inter,
        expert_biases=model_type == "gpt_oss",
        router_bias=model_type == "gpt_oss",
        shared_expert_gate=shared_gate,
    )


def model_spec_from_hf_config(
    config: Any,
    *,
    name: str = "",
    num_params: int | None = None,
    num_active_params: int | None = None,
    hf_id: str | None = None,
    slug: str | None = None,
) -> ModelSpec:
    """Build a ModelSpec from ``config.json``. Without ``num_params`` the count is estimated from shapes."""
    cfg = _merged_config(config)
    errors: dict[str, str] = {}
    notes: list[str] = []
    raw_type = cfg.get("model_type")
    model_type = raw_type.lower() if isinstance(raw_type, str) else ""

    layers = _required_int(cfg, errors, "num_hidden_layers")
    heads = _required_int(cfg, errors, "num_attention_heads")
    hidden = _required_int(cfg, errors, "hidden_size")
    max_pos = _required_int(cfg, errors, "max_position_embeddings")
    estimating = num_params is None
    vocab = _optional_int(cfg, errors, "vocab_size", maximum=_LIMITS["vocab_size"])
    intermediate = _optional_int(cfg, errors, "intermediate_size", maximum=_LIMITS["intermediate_size"])
    if vocab is None and "vocab_size" not in errors:
        if estimating:
            errors["vocab_size"] = "missing from the config (needed to estimate the parameter count)"
        vocab = 0
    if intermediate is None and "intermediate_size" not in errors:
        if estimating:
            errors["intermediate_size"] = "missing from the config (needed to estimate the parameter count)"
        intermediate = 0
    multi_query = _optional_bool(cfg, errors, "multi_query")
    kv_key = next((k for k in ("num_key_value_heads", "num_kv_heads", "n_kv_heads") if cfg.get(k) is not None), None)
    kv_heads: int | None
    if kv_key is not None:
        kv_heads = as_int(errors, kv_key, cfg[kv_key], maximum=_LIMITS["num_key_value_heads"])
    elif multi_query:
        kv_heads = 1
    else:
        kv_heads = heads
    kv_lora = _optional_int(cfg, errors, "kv_lora_rank", maximum=_LIMITS["head_dim"])
    rope_dim = _optional_int(cfg, errors, "qk_rope_head_dim", minimum=0, maximum=_LIMITS["head_dim"])
    head_dim = _optional_int(cfg, errors, "head_dim", maximum=_LIMITS["head_dim"])
    dtype = _model_dtype(cfg, errors, notes)
    quantization = _quantization(cfg, errors, notes)
    tie = _optional_bool(cfg, errors, "tie_word_embeddings")
    if errors:
        raise SizingInputError(errors)
    assert layers is not None and heads is not None and hidden is not None and max_pos is not None
    assert kv_heads is not None and vocab is not None and intermediate is not None

    is_mla = kv_lora is not None
    if kv_lora is not None:
        if rope_dim is None:
            raise SizingInputError({"qk_rope_head_dim": "required with kv_lora_rank (MLA)"})
        head_size = kv_lora + rope_dim
        attention_kind = "MLA"
        cached_kv_heads = 1
    else:
        if heads % kv_heads:
            errors[kv_key or "num_key_value_heads"] = f"{kv_heads} KV heads do not divide {heads} attention heads"
        if head_dim is not None:
            head_size = head_dim
        elif hidden % heads:
            errors["head_dim"] = f"missing, and hidden_size {hidden} is not a multiple of {heads} heads"
            head_size = 1
        else:
            head_size = hidden // heads
        attention_kind = "MHA" if kv_heads == heads else "MQA" if kv_heads == 1 else "GQA"
        cached_kv_heads = kv_heads
    kinds = _layer_kinds(cfg, errors, layers, model_type)
    moe = _moe_shape(cfg, errors, model_type, layers, intermediate)
    if errors:
        raise SizingInputError(errors)
    groups, pattern = _groups(kinds)

    if tie is None:
        tie = model_type.startswith("gemma")  # Gemma configs tie by default; Llama-family configs say false
    mla_shape = None
    if is_mla:
        assert kv_lora is not None and rope_dim is not None
        mla_shape = MlaShape(
            kv_lora_rank=kv_lora,
            qk_rope_head_dim=rope_dim,
            qk_nope_head_dim=_optional_int(cfg, errors, "qk_nope_head_dim", minimum=0) or 0,
            v_head_dim=_optional_int(cfg, errors, "v_head_dim") or head_dim or hidden // heads,
            q_lora_rank=_optional_int(cfg, errors, "q_lora_rank"),
        )
    count = estimate_params(
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_size,
        intermediate_size=intermediate,
        vocab_size=vocab,
        tie_word_embeddings=tie,
        qkv_bias=bool(cfg.get("attention_bias") is True or model_type in ("qwen2", "qwen2_moe")),
        o_bias=cfg.get("attention_bias") is True,
        qk_norm=model_type in ("qwen3", "qwen3_moe"),
        attention_sinks=model_type == "gpt_oss",
        norms_per_layer=4 if model_type.startswith(("gemma2", "gemma3")) else 2,
        mla=mla_shape,
        moe=moe,
    )
    if errors:
        raise SizingInputError(errors)
    given_errors: dict[str, str] = {}
    if num_params is not None:
        as_int(given_errors, "num_params", num_params, maximum=10**15)
    if num_active_params is not None:
        as_int(given_errors, "num_active_params", num_active_params, maximum=10**15)
    if given_errors:
        raise SizingInputError(given_errors)
    if estimating:
        notes.append(f"parameter count estimated from the config's shapes: {count.total / 1e9:.3f}B")
    total = int(num_params) if num_params is not None else count.total
    if num_active_params is not None:
        active = int(num_active_params)
    elif num_params is not None and count.total:
        # Scale the shape-derived active share to the official total.
        active = min(total, math.ceil(total * count.active / count.total))
    else:
        active = count.active
    expert_share = count.routed_experts / count.total if count.total else 0.0
    return ModelSpec(
        name=name or (hf_id or model_type or "custom model"),
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=cached_kv_heads,
        head_size=head_size,
        hidden_size=hidden,
        attention_kind=attention_kind,
        layer_groups=groups,
        dtype=dtype,
        num_params=total,
        num_active_params=active,
        params_estimated=estimating,
        max_position_embeddings=max_pos,
        vocab_size=vocab,
        intermediate_size=intermediate,
        kv_lora_rank=kv_lora,
        qk_rope_head_dim=rope_dim if is_mla else None,
        is_moe=moe is not None,
        hf_id=hf_id,
        slug=slug,
        layer_pattern=pattern,
        tie_word_embeddings=tie,
        num_expert_params=round(total * expert_share),
        num_experts=moe.num_experts if moe else 0,
        num_experts_per_tok=moe.experts_per_token if moe else 0,
        expert_intermediate_size=moe.expert_intermediate_size if moe else 0,
        quantization=quantization,
        notes=tuple(notes),
    )
