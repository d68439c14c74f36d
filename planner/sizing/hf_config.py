"""ModelSpec from a Hugging Face ``config.json`` dict.

Follows what vLLM reads (``vllm/config/model.py``: ``get_num_kv_heads``, ``get_head_size``, the
per-layer attention types) and what transformers writes for each architecture's ``layer_types``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

from .compressed_attention import COMPRESSOR_BLOCK_SIZES, HEAD_DIM, INDEXER_RATIO, ROPE_HEAD_DIM, CompressedAttention
from .errors import SizingInputError
from .kimi_linear import (
    kda_layer_kinds,
    kda_mixer_params,
    kda_state_spec,
    kimi_moe_shape,
    kimi_quantization,
    mla_output_gate_params,
)
from .mimo_v2 import is_mimo_v2, mimo_v2_spec
from .model_spec import LayerGroup, ModelSpec, StateSpec
from .params import (
    MlaShape,
    MoeShape,
    ParamCount,
    compressed_attention_params,
    estimate_params,
    given_or_estimated,
    state_mixer_params,
    tower_params,
)
from .validation import MAX_LAYERS, as_int, check_param_counts

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
    # GLM-5's layer_types name its DeepSeek sparse attention: MLA with an indexer (deepseek_v32 in vLLM).
    "deepseek_sparse_attention": "full",
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


_QUANT_ALGOS = {"nvfp4": "nvfp4", "fp8": "fp8", "fp8_pb_wo": "fp8_block", "w4a16_awq": "int4", "mxfp4": "mxfp4"}


def _quantization(
    cfg: Mapping[str, Any], errors: dict[str, str], notes: list[str], hf_quant: Mapping[str, Any] | None
) -> tuple[str | None, tuple[str, ...]]:
    """The checkpoint's own weight format and the modules it leaves unquantised, used when weight_dtype is
    ``auto``: ``quantization_config`` (fp8, with or without 128x128 block scales; mxfp4; AWQ/GPTQ;
    ModelOpt; compressed-tensors), else the ModelOpt ``hf_quant_config.json`` (``quantization.quant_algo``,
    ``exclude_modules``)."""
    qc = cfg.get("quantization_config")
    if qc is None and hf_quant is not None:
        inner = hf_quant.get("quantization", hf_quant)
        qc = {"quant_method": "modelopt", **inner} if isinstance(inner, Mapping) else inner
    if qc is None:
        return None, ()
    if not isinstance(qc, Mapping):
        errors["quantization_config"] = "must be a JSON object (dict)"
        return None, ()
    method = qc.get("quant_method")
    producer = qc.get("producer")
    if method is None and (
        qc.get("quant_algo") is not None or (isinstance(producer, Mapping) and producer.get("name") == "modelopt")
    ):
        method = "modelopt"  # ModelOpt checkpoints that leave quant_method out (Qwen3-32B-FP8-Static-PerTensor)
    if not isinstance(method, str):
        notes.append("quantization_config without a quant_method: weights sized from torch_dtype")
        return None, ()
    method = method.lower()
    excluded_raw = qc.get("modules_to_not_convert") or qc.get("ignore") or qc.get("exclude_modules") or []
    excluded = tuple(item for item in excluded_raw if isinstance(item, str)) if isinstance(excluded_raw, list) else ()
    fmt: str | None = None
    if method == "fp8":
        fmt = "fp8_block" if qc.get("weight_block_size") else "fp8"
    elif method == "mxfp4":
        fmt = "mxfp4"
    elif method in ("modelopt", "modelopt_fp4") and not isinstance(qc.get("config_groups"), Mapping):
        algo = qc.get("quant_algo")
        fmt = _QUANT_ALGOS.get(algo.lower()) if isinstance(algo, str) else None
    elif method in ("compressed-tensors", "modelopt", "modelopt_fp4"):  # config_groups (ModelOpt MIXED_PRECISION too)
        # Mixed checkpoints (Qwen3.6-NVFP4: fp8 linear attention, NVFP4 experts) are sized at their
        # narrowest group's format, the one that holds the experts and so most of the weights.
        groups = qc.get("config_groups")
        candidates = [
            group["weights"]
            for group in (groups.values() if isinstance(groups, Mapping) else ())
            if isinstance(group, Mapping) and isinstance(group.get("weights"), Mapping)
        ]
        weights: Any = min(candidates, key=_weight_bits, default=None)
        if isinstance(weights, Mapping):
            bits, kind = weights.get("num_bits"), weights.get("type")
            if bits == 4:
                fmt = (
                    "nvfp4" if kind == "float" and weights.get("group_size") == 16 else _int4(weights.get("group_size"))
                )
            elif bits == 8:
                block = weights.get("strategy") == "block"
                fmt = ("fp8_block" if block else "fp8") if kind == "float" else "int8"
    else:
        bits = qc.get("bits", qc.get("w_bit"))
        if method in ("awq", "gptq", "autoround", "auto-round") and bits in (4, 8):
            fmt = _int4(qc.get("group_size", qc.get("q_group_size"))) if bits == 4 else "int8"
    if fmt is None:
        notes.append(f"quantization_config {method!r} not modelled: weights sized from torch_dtype")
        return None, ()
    return fmt, excluded


def _weight_bits(weights: Mapping[str, Any]) -> int:
    """A config group's weight width for picking the narrowest; anything but a whole number counts as 16."""
    bits = weights.get("num_bits")
    return bits if isinstance(bits, int) and not isinstance(bits, bool) else 16


def _int4(group_size: Any) -> str:
    """W4A16 with an fp16 scale per group: ``int4`` at the usual 128, ``int4_g<n>`` otherwise (Kimi K2.5: 32)."""
    if isinstance(group_size, int) and not isinstance(group_size, bool) and 0 < group_size != 128:
        return f"int4_g{group_size}"
    return "int4"


_ATTENTION_MODULES = ("self_attn", "q_proj", "k_proj", "v_proj", "o_proj", "qkv", "q_a_proj", "q_b_proj", "kv_a_proj")
_STATE_MODULES = ("linear_attn", "in_proj", "out_proj")
_LAYER_INDEX = re.compile(r"layers\.(\d+)\.")


def _unquantized_params(count: ParamCount, excluded: tuple[str, ...], kinds: list[tuple[str, int | None]]) -> int:
    """Parameters the checkpoint keeps in 16 bits beyond the embeddings and LM head: the attention, state
    mixer and shared-expert weights of the layers its exclude list names (a pattern without a layer index
    covers every layer). Norms, routers and conv weights are too small to matter."""
    if not excluded:
        return 0
    named: dict[str, set[int] | None] = {"attention": set(), "state": set(), "shared": set(), "dense": set()}

    def add(category: str, layer: int | None) -> None:
        current = named[category]
        if current is None:
            return
        if layer is None:
            named[category] = None
        else:
            current.add(layer)

    for pattern in excluded:
        text = pattern.lower()
        match = _LAYER_INDEX.search(text)
        layer = int(match.group(1)) if match else None
        if "shared_expert" in text:
            add("shared", layer)
        elif "mlp" in text and "expert" not in text and any(k in text for k in ("gate_proj", "up_proj", "down_proj")):
            add("dense", layer)  # a dense MLP (DeepSeek-style first dense layers), not the router's mlp.gate
        elif any(key in text for key in _STATE_MODULES):
            add("state", layer)
        elif any(key in text for key in _ATTENTION_MODULES):
            add("attention", layer)

    def share(category: str, members: list[int]) -> float:
        chosen = named[category]
        if chosen is None:
            return 1.0
        if not members:
            return 0.0
        return len(chosen.intersection(members)) / len(members)

    attention_layers = [i for i, (kind, _) in enumerate(kinds) if kind not in ("state", "none")]
    state_layers = [i for i, (kind, _) in enumerate(kinds) if kind == "state"]
    all_layers = list(range(len(kinds)))
    return round(
        count.attention * share("attention", attention_layers)
        + count.state * share("state", state_layers)
        + count.shared_experts * share("shared", all_layers)
        + count.dense_mlp * share("dense", all_layers)
    )


_STATE_LAYER_TYPES = {"linear_attention": "state", "mamba": "state", "mamba2": "state"}
_PLAIN_LAYER_TYPES = {"attention": "full"}  # Granite 4.0-H (granitemoehybrid), Jamba's layers_block_type
_NO_CACHE_LAYER_TYPES = {"mlp": "none", "moe": "none"}  # Nemotron-H's layers_block_type
# Nemotron-H (``hybrid_override_pattern``): M Mamba2, * attention, - MLP, E MoE (``nemotron_h.py``).
_NEMOTRON_PATTERN = {"M": "state", "*": "full", "-": "none", "E": "none"}
# Config keys that say the model keeps a recurrent state: if none of the layer layouts below placed a
# state layer, the config is refused rather than sized as if every layer were attention.
_STATE_SIGNALS = (
    "linear_num_value_heads",
    "ssm_state_size",
    "mamba_d_state",
    "mamba_num_heads",
    "mamba_n_heads",
    "hybrid_override_pattern",
    "layers_block_type",
    "attn_layer_period",
    "full_attention_interval",
    "linear_attn_config",
)


def _unsupported(cfg: Mapping[str, Any], model_type: str) -> dict[str, str]:
    """Architectures whose caches the engine does not model yet: a 400 naming the field, never a plan."""
    attn_types = cfg.get("attn_type_list")
    if isinstance(attn_types, list) and any(value == 0 for value in attn_types):
        # MiniMax: 0 marks a lightning (linear) attention layer, 1 softmax attention (MiniMax-M2 is all 1).
        return {
            "attn_type_list": "MiniMax lightning-attention (0) layers: vLLM 0.23 and later no longer load "
            "MiniMax-Text-01 / M1 (model_executor/models/registry.py, _PREVIOUSLY_SUPPORTED_MODELS), and earlier "
            "releases' layout is not modelled"
        }
    return {}


def _layer_kinds(
    cfg: Mapping[str, Any], errors: dict[str, str], num_layers: int, model_type: str
) -> list[tuple[str, int | None]]:
    """Per layer ``(kind, window)``, following each architecture's rule in transformers/vLLM."""
    sliding = _optional_int(cfg, errors, "sliding_window")
    chunk = _optional_int(cfg, errors, "attention_chunk_size")
    full: tuple[str, int | None] = ("full", None)
    if cfg.get("linear_attn_config") is not None:
        # Kimi Linear / Kimi-K3: 1-based kda_layers are KDA state layers, the others MLA (kimi_linear.py).
        return kda_layer_kinds(cfg, errors, num_layers)

    pattern = cfg.get("hybrid_override_pattern")
    if pattern is not None:
        if not isinstance(pattern, str) or len(pattern) != num_layers:
            errors["hybrid_override_pattern"] = f"must be a string of {num_layers} layer codes (M, *, -, E)"
            return [full] * num_layers
        unknown = sorted({code for code in pattern if code not in _NEMOTRON_PATTERN})
        if unknown:
            errors["hybrid_override_pattern"] = f"unsupported layer code {unknown[0]!r}; expected M, *, - or E"
            return [full] * num_layers
        return [(_NEMOTRON_PATTERN[code], None) for code in pattern]

    for key in ("layer_types", "layers_block_type"):
        layer_types = cfg.get(key)
        if layer_types is None:
            continue
        if not isinstance(layer_types, list) or len(layer_types) != num_layers:
            errors[key] = f"must be a list of {num_layers} layer types"
            return [full] * num_layers
        kinds: list[tuple[str, int | None]] = []
        for value in layer_types:
            name = value if isinstance(value, str) else ""
            kind = (
                _HF_LAYER_TYPES.get(name)
                or _STATE_LAYER_TYPES.get(name)
                or _PLAIN_LAYER_TYPES.get(name)
                or _NO_CACHE_LAYER_TYPES.get(name)
            )
            if kind is None:
                known = (*_HF_LAYER_TYPES, *_STATE_LAYER_TYPES, *_PLAIN_LAYER_TYPES, *_NO_CACHE_LAYER_TYPES)
                errors[key] = f"unsupported layer type {value!r}; expected one of {', '.join(known)}"
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
                kinds.append((kind, None))
        return kinds

    interval = _optional_int(cfg, errors, "full_attention_interval", maximum=100_000)
    if interval is not None:
        # Qwen3-Next: every interval-th layer is full attention, the others gated delta net
        # (Qwen3NextConfig.layer_types default).
        return [full if (i + 1) % interval == 0 else ("state", None) for i in range(num_layers)]

    period = _optional_int(cfg, errors, "attn_layer_period", maximum=100_000)
    if period is not None:
        # Jamba: attention where i % period == offset, Mamba elsewhere (JambaConfig.layers_block_type).
        offset = _optional_int(cfg, errors, "attn_layer_offset", minimum=0, maximum=100_000) or 0
        return [full if i % period == offset else ("state", None) for i in range(num_layers)]

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
        pattern_length = _optional_int(cfg, errors, "sliding_window_pattern", maximum=100_000) or 6
        return [full if (i + 1) % pattern_length == 0 else ("sliding_window", sliding) for i in range(num_layers)]
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


def _state_dtype(cfg: Mapping[str, Any], errors: dict[str, str], key: str) -> str | None:
    value = cfg.get(key)
    if value is None or value == "auto":
        return None
    if isinstance(value, str) and value.lower() in _DTYPES:
        return _DTYPES[value.lower()]
    errors[key] = f"unknown dtype {value!r}; expected bfloat16, float16 or float32"
    return None


def _state_spec(cfg: Mapping[str, Any], errors: dict[str, str], model_type: str, hidden: int) -> StateSpec | None:
    """The recurrent state of the model's state layers, read as vLLM's model classes read it."""

    def need(key: str, default: int | None = None) -> int:
        value = _optional_int(cfg, errors, key, maximum=10**7)
        if value is None:
            if default is not None:
                return default
            errors.setdefault(key, "required by the model's state (Mamba / linear-attention) layers")
            return 0
        return value

    if cfg.get("linear_attn_config") is not None:
        return kda_state_spec(cfg, errors)  # Kimi delta attention (kimi_linear.py)
    if cfg.get("linear_num_value_heads") is not None or cfg.get("linear_key_head_dim") is not None:
        # Gated delta net (qwen3_next.py / qwen3_5.py get_mamba_state_shape_from_config); Qwen3.5's
        # config names the recurrent state's dtype (mamba_ssm_dtype, model_executor/models/config.py).
        spec = StateSpec(
            kind="gdn",
            num_k_heads=need("linear_num_key_heads"),
            head_k_dim=need("linear_key_head_dim"),
            num_heads=need("linear_num_value_heads"),
            head_dim=need("linear_value_head_dim"),
            conv_kernel=need("linear_conv_kernel_dim", 4),
            ssm_dtype=_state_dtype(cfg, errors, "mamba_ssm_dtype"),
        )
    elif cfg.get("mamba_num_heads") is not None:
        # Nemotron-H (nemotron_h.py): Mamba2 with mamba_num_heads x mamba_head_dim channels; its SSM state
        # defaults to float32 (NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE).
        heads, head_dim = need("mamba_num_heads"), need("mamba_head_dim")
        spec = StateSpec(
            kind="mamba2",
            intermediate_size=heads * head_dim,
            n_groups=need("n_groups", 1),
            num_heads=heads,
            head_dim=head_dim,
            state_size=need("ssm_state_size"),
            conv_kernel=need("conv_kernel", 4),
            ssm_dtype=_state_dtype(cfg, errors, "mamba_ssm_cache_dtype") or "float32",
        )
    elif cfg.get("mamba_n_heads") is not None and model_type.startswith("falcon_h1"):
        # Falcon-H1 (falcon_h1.py, get_mamba_state_shape_from_config): Mamba2 with mamba_d_ssm channels, or
        # int(mamba_expand x hidden) without it; mamba_d_head "auto" is mamba_d_ssm // mamba_n_heads
        # (transformers' FalconH1Config). Both states in the model dtype (mamba2_state_dtype, no model default).
        expand = cfg.get("mamba_expand", 2)
        if cfg.get("mamba_d_ssm") is None and (
            isinstance(expand, bool) or not isinstance(expand, (int, float)) or not 0 < expand <= 64
        ):
            errors["mamba_expand"] = f"{expand!r}: expected a number from 0 to 64"
            expand = 2
        inner = need("mamba_d_ssm") if cfg.get("mamba_d_ssm") is not None else int(float(expand) * hidden)
        heads = need("mamba_n_heads")
        head_dim = inner // heads if cfg.get("mamba_d_head", "auto") == "auto" and heads else need("mamba_d_head")
        spec = StateSpec(
            kind="mamba2",
            intermediate_size=inner,
            n_groups=need("mamba_n_groups", 1),
            num_heads=heads,
            head_dim=head_dim,
            state_size=need("mamba_d_state"),
            conv_kernel=need("mamba_d_conv", 4),
        )
    elif cfg.get("mamba_n_heads") is not None:
        # Granite 4.0-H (granitemoehybrid.py): Mamba2 with mamba_expand x hidden channels.
        spec = StateSpec(
            kind="mamba2",
            intermediate_size=need("mamba_expand", 2) * hidden,
            n_groups=need("mamba_n_groups", 1),
            num_heads=need("mamba_n_heads"),
            head_dim=need("mamba_d_head"),
            state_size=need("mamba_d_state"),
            conv_kernel=need("mamba_d_conv", 4),
        )
    elif cfg.get("mamba_d_state") is not None:
        # Jamba (jamba.py): Mamba1 with mamba_expand x hidden channels.
        spec = StateSpec(
            kind="mamba1",
            intermediate_size=need("mamba_expand", 2) * hidden,
            state_size=need("mamba_d_state"),
            conv_kernel=need("mamba_d_conv", 4),
        )
    else:
        errors["layer_types"] = (
            f"state layers in a {model_type or 'model'} config without Mamba or gated-delta-net shapes: not supported"
        )
        return None
    return spec


def _ffn_mult_to_intermediate_size(ffn_mult: float, hidden: int) -> int:
    """DeciLM's FFN width (``nemotron_nas.py``, ``_ffn_mult_to_intermediate_size``): ``int(2 * ffn_mult *
    hidden / 3)`` in floating point, rounded up to a multiple of 256 (``_find_multiple``)."""
    size = int(2 * ffn_mult * hidden / 3)
    return size if size % 256 == 0 else size + 256 - size % 256


def _block_flag(sub: Mapping[str, Any], key: str) -> bool | None:
    """A block's ``no_op`` / ``replace_with_linear``: absent or null is False (the dataclass default, and
    vLLM tests it for truth); anything but a boolean is None (refused)."""
    value = sub.get(key)
    if value is None or isinstance(value, bool):
        return bool(value)
    return None


def _nas_block(block: Any, heads: int, hidden: int) -> tuple[int, int] | str:
    """One ``block_configs`` entry as vLLM 0.33 builds the layer, ``(KV heads, FFN intermediate size)`` with 0
    for a no-op attention or FFN, or why vLLM cannot build it."""
    if not isinstance(block, Mapping):
        return "must be an object with attention and ffn"
    attention, ffn = block.get("attention"), block.get("ffn")
    if not isinstance(attention, Mapping) or not isinstance(ffn, Mapping):
        # BlockConfig's attention and ffn have no default (the checkpoint's block_config.py); vLLM reads both.
        return "needs both an attention and an ffn object"
    if block.get("parallel_blocks") or attention.get("mamba") or attention.get("llama4") or ffn.get("moe"):
        return "parallel, Mamba, Llama-4 or MoE sub-blocks are not built by vLLM 0.33's nemotron_nas.py"
    kv_heads = 0
    for name, sub in (("attention", attention), ("ffn", ffn)):
        no_op, linear = _block_flag(sub, "no_op"), _block_flag(sub, "replace_with_linear")
        if no_op is None or linear is None:
            return f"{name}.no_op and {name}.replace_with_linear must be true or false"
        if no_op and linear:
            return f"{name} cannot be both no_op and replace_with_linear"
        if linear:
            # The checkpoint's config clears n_heads_in_group / ffn_mult for a linear replacement, and
            # nemotron_nas.py has no linear layer: it builds attention or an MLP from them and fails to start.
            return f"{name}.replace_with_linear: vLLM 0.33's nemotron_nas.py has no linear replacement layer"
        if no_op:
            continue
        if name == "attention":
            group = attention.get("n_heads_in_group")
            if isinstance(group, bool) or not isinstance(group, int) or group < 1:
                return "attention.n_heads_in_group must be a positive integer unless attention.no_op"
            if heads % group:
                return f"attention.n_heads_in_group {group} does not divide the {heads} attention heads"
            kv_heads = heads // group
            continue
        mult = ffn.get("ffn_mult")
        if "ffn_mult" not in ffn and ffn.get("intermediate_size") is not None:
            # vLLM reads intermediate_size when the block has no ffn_mult attribute (newer DeciLM configs).
            size = ffn["intermediate_size"]
            if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= _LIMITS["intermediate_size"]:
                return f"ffn.intermediate_size must be an integer from 1 to {_LIMITS['intermediate_size']:,}"
            return kv_heads, size
        if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not 0 < mult < 1000:
            return "ffn.ffn_mult must be a positive number unless ffn.no_op"
        # The checkpoint's FFNConfig rounds ffn_mult to 6 decimals before vLLM reads it.
        size = _ffn_mult_to_intermediate_size(round(float(mult), 6), hidden)
        if size > _LIMITS["intermediate_size"]:
            return f"ffn.ffn_mult {mult} gives an intermediate size over {_LIMITS['intermediate_size']:,}"
        return kv_heads, size
    return kv_heads, 0


def _nas_blocks(
    cfg: Mapping[str, Any], errors: dict[str, str], num_layers: int, heads: int, hidden: int
) -> list[tuple[int, int]]:
    """Nemotron-NAS / DeciLM ``block_configs`` (``vllm/model_executor/models/nemotron_nas.py``): per layer
    ``(KV heads, FFN intermediate size)``, 0 where the block's attention or FFN is ``no_op`` (no attention
    means no KV cache: vLLM builds no Attention layer there). Attention has ``num_attention_heads //
    n_heads_in_group`` KV heads; the FFN is a gated MLP of ``_ffn_mult_to_intermediate_size(ffn_mult)``."""
    raw = cfg.get("block_configs")
    if not isinstance(raw, list) or len(raw) != num_layers:
        errors["block_configs"] = f"must list one block per layer ({num_layers})"
        return []
    blocks = []
    for index, block in enumerate(raw):
        answer = _nas_block(block, heads, hidden)
        if isinstance(answer, str):
            errors["block_configs"] = f"layer {index}: {answer}"
            return []
        blocks.append(answer)
    if not any(kv_heads for kv_heads, _ in blocks):
        # NemotronNasModelArchConfigConvertor.get_total_num_kv_heads raises without an attention block.
        errors["block_configs"] = "no layer has attention (every attention is no_op): vLLM cannot start it"
        return []
    return blocks


def _nas_groups(blocks: list[tuple[int, int]], kv_heads: int) -> tuple[tuple[LayerGroup, ...], tuple[int, ...]]:
    """Layer groups of a Nemotron-NAS model: one "full" group per KV head count (vLLM's per-layer
    ``FullAttentionSpec``s, which differ only in heads; ``kv_cache.stage_groups`` keeps them in one KV cache
    group as vLLM does) and a "none" group for the layers without attention."""
    keys = [heads for heads, _ in blocks]
    order = list(dict.fromkeys(keys))
    pattern = tuple(order.index(key) for key in keys)
    groups = tuple(
        LayerGroup("none", keys.count(key))
        if not key
        else LayerGroup("full", keys.count(key), num_kv_heads=None if key == kv_heads else key)
        for key in order
    )
    return groups, pattern


def _nas_note(blocks: list[tuple[int, int]], heads: int) -> str:
    attention = [kv for kv, _ in blocks if kv]
    by_heads = ", ".join(f"{attention.count(kv)} with {kv} KV heads" for kv in dict.fromkeys(attention))
    no_ffn = sum(1 for _, size in blocks if not size)
    return (
        f"Nemotron-NAS block_configs: {len(attention)} attention layers ({by_heads} of {heads} query heads), "
        f"{len(blocks) - len(attention)} without attention (no KV cache), {no_ffn} without an FFN; FFN widths "
        "from ffn_mult as vllm/model_executor/models/nemotron_nas.py computes them"
    )


def _groups(kinds: list[tuple[str, int | None]]) -> tuple[tuple[LayerGroup, ...], tuple[int, ...]]:
    order: list[tuple[str, int | None]] = []
    for kind in kinds:
        if kind not in order:
            order.append(kind)
    pattern = tuple(order.index(kind) for kind in kinds)
    groups = tuple(LayerGroup(kind, pattern.count(index), window) for index, (kind, window) in enumerate(order))
    return groups, pattern


def _nemotron_mlps(cfg: Mapping[str, Any]) -> tuple[str, ...]:
    """Nemotron-H's per-layer MLP: ``-`` a dense MLP, ``E`` experts, Mamba and attention layers none."""
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str):
        return tuple("dense" if code == "-" else "moe" if code == "E" else "none" for code in pattern)
    block_types = cfg.get("layers_block_type")  # the newer NemotronHConfig form (Nemotron 3 Ultra, 3.5)
    if isinstance(block_types, list):
        return tuple("dense" if kind == "mlp" else "moe" if kind == "moe" else "none" for kind in block_types)
    return ()


def _moe_shape(
    cfg: Mapping[str, Any],
    errors: dict[str, str],
    model_type: str,
    num_layers: int,
    intermediate: int,
    kinds: list[tuple[str, int | None]],
) -> MoeShape | None:
    routed = _optional_int(cfg, errors, "n_routed_experts", minimum=0, maximum=_LIMITS["experts"])
    local = _optional_int(cfg, errors, "num_local_experts", minimum=0, maximum=_LIMITS["experts"])
    qwen = _optional_int(cfg, errors, "num_experts", minimum=0, maximum=_LIMITS["experts"])
    num_experts = routed or local or qwen
    if not num_experts or num_experts < 2:
        return None
    top_k_key = next(
        (
            key
            for key in (
                "num_experts_per_tok",
                "experts_per_token",
                "top_k_experts",
                "moe_top_k",
                "num_experts_per_token",
            )
            if key in cfg
        ),
        "num_experts_per_tok",
    )
    top_k = _optional_int(cfg, errors, top_k_key, maximum=_LIMITS["experts"])
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
    expert_hidden = 0
    latent_projections = 0
    if cfg.get("linear_attn_config") is not None:  # Kimi Linear / Kimi-K3 (KimiMoE, kimi_linear.py)
        return kimi_moe_shape(
            cfg,
            errors,
            num_layers=num_layers,
            num_experts=num_experts,
            top_k=top_k,
            expert_intermediate=expert_inter,
            dense_intermediate=intermediate,
            hidden_size=_optional_int(cfg, errors, "hidden_size") or 0,
        )
    if model_type.startswith("gemma4"):
        # Gemma 4 MoE (enable_moe_block): experts on every layer beside a dense MLP of intermediate_size,
        # counted like an always-on shared expert.
        layers = (True,) * num_layers
        shared = intermediate
    elif model_type == "nemotron_h":
        # Nemotron-H: experts on the E layers, non-gated (relu2); a shared expert of its own size; Nemotron 3
        # Super routes in a latent space (moe_latent_size) with projections in and out of it.
        mlps = _nemotron_mlps(cfg)
        layers = tuple(mlp == "moe" for mlp in mlps) if len(mlps) == num_layers else (True,) * num_layers
        shared_inter = _optional_int(cfg, errors, "moe_shared_expert_intermediate_size", minimum=0) or expert_inter
        shared = (_optional_int(cfg, errors, "n_shared_experts", minimum=0, maximum=1_000_000) or 0) * shared_inter
        latent = _optional_int(cfg, errors, "moe_latent_size", minimum=0, maximum=1_000_000_000) or 0
        if latent:
            expert_hidden = latent
            hidden = _optional_int(cfg, errors, "hidden_size") or 0
            latent_projections = 2 * hidden * latent
    elif routed:  # DeepSeek V2/V3
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
        router_bias=model_type in ("gpt_oss", "nemotron_h"),
        shared_expert_gate=shared_gate,
        gated=model_type != "nemotron_h",
        expert_hidden_size=expert_hidden,
        extra_params_per_layer=latent_projections,
    )


def storable_config(value: Any) -> Any:
    """``value`` with non-finite floats (JSON's ``Infinity``/``NaN`` extensions, which Python's json reads
    and real HF configs contain) replaced by the strings ``"Infinity"``, ``"-Infinity"`` and ``"NaN"``, so
    strict JSON stores (PostgreSQL's jsonb) and renderers accept it."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, Mapping):
        return {key: storable_config(item) for key, item in value.items()}
    if isinstance(value, list):
        return [storable_config(item) for item in value]
    return value


def model_spec_from_hf_config(
    config: Any,
    *,
    name: str = "",
    num_params: int | None = None,
    num_active_params: int | None = None,
    hf_id: str | None = None,
    slug: str | None = None,
    hf_quant_config: Mapping[str, Any] | None = None,
) -> ModelSpec:
    """Build a ModelSpec from ``config.json``. Without ``num_params`` the count is estimated from shapes.

    ``hf_quant_config``: a ModelOpt checkpoint's ``hf_quant_config.json`` (NVFP4/FP8 checkpoints whose
    config.json has no quantization_config); a config may also carry it under the key ``hf_quant_config``."""
    cfg = _merged_config(config)
    if hf_quant_config is None and isinstance(cfg.get("hf_quant_config"), Mapping):
        hf_quant_config = cfg["hf_quant_config"]
    errors: dict[str, str] = {}
    notes: list[str] = []
    raw_type = cfg.get("model_type")
    model_type = raw_type.lower() if isinstance(raw_type, str) else ""
    unsupported = _unsupported(cfg, model_type)
    if unsupported:
        raise SizingInputError(unsupported)
    if cfg.get("compress_ratios") is not None or cfg.get("compress_rates") is not None:
        architectures = cfg.get("architectures")
        if model_type != "deepseek_v4" or architectures not in (None, ["DeepseekV4ForCausalLM"]):
            # DeepSeek-V4.1 (deepseek_v41, vllm/models/deepseek_v41/) and the vision wrapper cache otherwise.
            raise SizingInputError(
                {
                    "model_type": f"{raw_type!r} ({architectures!r}): compressed attention is sized for DeepSeek-V4 "
                    "(model_type deepseek_v4, DeepseekV4ForCausalLM) only"
                    + (
                        ""
                        if model_type.startswith("deepseek_v4")
                        else "; vLLM 0.33 has no config class for this model_type (SGLang's 'deepseek_ref' "
                        "checkpoints): the model's deepseek_v4 config.json is the one vLLM loads"
                    )
                }
            )
        if hf_quant_config is not None and cfg.get("quantization_config") is None:
            # vLLM reads hf_quant_config.json only when config.json has no quantization_config
            # (model_loader/weight_utils.py, get_quant_config); DeepSeek-V4 then leaves DeepseekV4FP8Config's
            # path for ModelOpt's own, whose layer formats are not modelled.
            raise SizingInputError(
                {
                    "hf_quant_config": "DeepSeek-V4 quantised by hf_quant_config.json alone (no quantization_config "
                    "in config.json) is not sized: vLLM would not use its DeepSeek-V4 FP8 path"
                }
            )
        return _compressed_attention_spec(
            cfg,
            name=name,
            num_params=num_params,
            num_active_params=num_active_params,
            hf_id=hf_id,
            slug=slug,
            hf_quant_given=hf_quant_config is not None,
        )

    if is_mimo_v2(cfg):
        # MiMo-V2-Flash: sliding layers with their own KV heads, V heads unlike K's (mimo_v2.py).
        dtype = _model_dtype(cfg, errors, notes)
        quantization, _ = _quantization(cfg, errors, notes, hf_quant_config)
        if errors:
            raise SizingInputError(errors)
        return mimo_v2_spec(
            cfg,
            dtype=dtype,
            quantization=quantization,
            notes=notes,
            name=name,
            num_params=num_params,
            num_active_params=num_active_params,
            hf_id=hf_id,
            slug=slug,
        )

    if _lookup(cfg, "num_hidden_layers")[1] is None and isinstance(cfg.get("layers_block_type"), list):
        # Nemotron-H configs that list the layers (layers_block_type) may leave the count out (Nemotron 3 Ultra).
        cfg = {**cfg, "num_hidden_layers": len(cfg["layers_block_type"])}
    layers = _required_int(cfg, errors, "num_hidden_layers")
    heads = _required_int(cfg, errors, "num_attention_heads")
    hidden = _required_int(cfg, errors, "hidden_size")
    max_pos = _required_int(cfg, errors, "max_position_embeddings")
    estimating = num_params is None
    # Nemotron-NAS / DeciLM: attention and FFN shapes per layer (null intermediate_size and KV heads at the top).
    nas = cfg.get("block_configs") is not None
    vocab = _optional_int(cfg, errors, "vocab_size", maximum=_LIMITS["vocab_size"])
    intermediate = _optional_int(cfg, errors, "intermediate_size", maximum=_LIMITS["intermediate_size"])
    if vocab is None and "vocab_size" not in errors:
        if estimating:
            errors["vocab_size"] = "missing from the config (needed to estimate the parameter count)"
        vocab = 0
    if intermediate is None and "intermediate_size" not in errors:
        # MoE configs whose every layer is routed give only moe_intermediate_size (Qwen3.5-35B-A3B).
        if estimating and cfg.get("moe_intermediate_size") is None and not nas:
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
    quantization, excluded_modules = _quantization(cfg, errors, notes, hf_quant_config)
    if cfg.get("linear_attn_config") is not None:
        quantization = kimi_quantization(config, cfg, quantization, errors)
    tie = _optional_bool(cfg, errors, "tie_word_embeddings")
    if errors:
        raise SizingInputError(errors)
    assert layers is not None and heads is not None and hidden is not None and max_pos is not None
    assert kv_heads is not None and vocab is not None and intermediate is not None
    blocks = _nas_blocks(cfg, errors, layers, heads, hidden) if nas else []
    if errors:
        raise SizingInputError(errors)
    if blocks:
        # The model's KV heads are the first attention layer's (NemotronNasModelArchConfigConvertor); the widest
        # FFN sizes the activation peak.
        kv_heads = next(layer_kv_heads for layer_kv_heads, _ in blocks if layer_kv_heads)
        intermediate = max(size for _, size in blocks)

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
    kinds: list[tuple[str, int | None]] = (
        [("full", None) if layer_kv_heads else ("none", None) for layer_kv_heads, _ in blocks]
        if blocks
        else _layer_kinds(cfg, errors, layers, model_type)
    )
    state = None
    # Falcon-H1 (falcon_h1.py, FalconH1ParallelHybrid): every decoder layer runs attention and a Mamba2 mixer side
    # by side; vLLM registers the mixers as layers num_hidden_layers + i, so the KV cache has 2 x N layers.
    parallel_hybrid = model_type.startswith("falcon_h1")
    if any(kind == "state" for kind, _ in kinds) or parallel_hybrid:
        state = _state_spec(cfg, errors, model_type, hidden)
    elif not errors:
        signal = next((key for key in _STATE_SIGNALS if cfg.get(key) is not None), None)
        if signal is not None and signal not in ("hybrid_override_pattern", "layers_block_type"):
            errors[signal] = (
                f"{cfg.get(signal)!r}: the config describes recurrent-state (Mamba / linear-attention) layers, "
                "but not which layers they are; this layout is not supported"
            )
    moe = _moe_shape(cfg, errors, model_type, layers, intermediate, kinds)
    if moe is None and cfg.get("moe_intermediate_size") is not None and intermediate == 0 and not errors:
        errors["num_experts"] = "moe_intermediate_size is given but no expert count (num_experts, n_routed_experts)"
    if errors:
        raise SizingInputError(errors)
    shared_kv = _optional_int(cfg, errors, "num_kv_shared_layers", minimum=0, maximum=100_000) or 0
    if shared_kv:
        # Gemma 4: the last num_kv_shared_layers layers read earlier layers' KV and cache none of their own
        # (gemma4.py, is_kv_shared_layer).
        if shared_kv >= layers:
            errors["num_kv_shared_layers"] = f"{shared_kv} of {layers} layers"
        kinds = [*kinds[: layers - shared_kv], *[("none", None)] * min(shared_kv, layers)]
    global_head = _optional_int(cfg, errors, "global_head_dim", maximum=_LIMITS["head_dim"])
    global_kv = _optional_int(cfg, errors, "num_global_key_value_heads", maximum=_LIMITS["num_key_value_heads"])
    if errors:
        raise SizingInputError(errors)
    groups, pattern = _nas_groups(blocks, kv_heads) if blocks else _groups(kinds)
    if blocks:
        notes.append(_nas_note(blocks, heads))
    if not is_mla and (global_head or global_kv):
        # Gemma 4: full-attention layers cache global_head_dim-wide heads, num_global_key_value_heads of them
        # (vllm/model_executor/models/gemma4.py, per_layer_config); attention_k_eq_v still stores K and V.
        full_kv = global_kv or kv_heads
        if heads % full_kv:
            raise SizingInputError({"num_global_key_value_heads": f"{full_kv} do not divide {heads} attention heads"})
        groups = tuple(
            dataclasses.replace(group, head_size=global_head or head_size, num_kv_heads=full_kv)
            if group.kind == "full"
            else group
            for group in groups
        )
    if is_mla and cfg.get("index_topk") is not None:
        # DeepSeek V3.2's indexer keeps an fp8 key with a float32 scale per 128 values for every token of
        # every layer (deepseek_v2.py, DeepseekV32IndexerCache: head_dim + head_dim // 128 * 4 bytes).
        index_dim = _optional_int(cfg, errors, "index_head_dim", maximum=1_000_000) or 128
        indexer_bytes = index_dim + index_dim // 128 * 4
    else:
        indexer_bytes = 0
    mtp_layers = 0
    for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers"):
        mtp_layers = mtp_layers or (_optional_int(cfg, errors, key, minimum=0, maximum=1000) or 0)
    if errors:
        raise SizingInputError(errors)

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
    norms_per_layer = 4 if model_type.startswith(("gemma2", "gemma3")) else 1 if model_type == "nemotron_h" else 2
    if blocks:
        norms_per_layer = 0  # a DeciLM layer has a norm before its attention and its FFN, none for a no-op: below
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
        qk_norm=model_type.startswith(("qwen3", "qwen3_moe", "qwen3_next", "qwen3_5")),
        attention_sinks=model_type == "gpt_oss",
        mla=mla_shape,
        moe=moe,
        mixers=tuple("state" if kind == "state" else "none" if kind == "none" else "attention" for kind, _ in kinds)
        if model_type == "nemotron_h" or state is not None or blocks
        else (),
        mlps=_nemotron_mlps(cfg)
        if model_type == "nemotron_h"
        else tuple("dense" if size else "none" for _, size in blocks),
        norms_per_layer=norms_per_layer,
        layer_kv_heads=tuple(kv for kv, _ in blocks),
        layer_intermediate_sizes=tuple(size for _, size in blocks),
        state_params=(
            kda_mixer_params(cfg, hidden)
            if state is not None and state.kind == "kda"
            else state_mixer_params(state, hidden, conv_bias=cfg.get("use_conv_bias") is not False)
            if state is not None
            else 0
        ),
        gated_mlp=model_type != "nemotron_h",
        attention_output_gate=model_type.startswith(("qwen3_next", "qwen3_5"))
        and cfg.get("attn_output_gate", True) is not False,
    )
    gate = mla_output_gate_params(cfg, hidden, heads) if cfg.get("linear_attn_config") is not None else 0
    if gate:
        # Kimi's MLA output gate (mla_use_output_gate), one projection per MLA layer.
        gates = gate * sum(1 for kind, _ in kinds if kind == "full")
        count = dataclasses.replace(
            count, total=count.total + gates, active=count.active + gates, attention=count.attention + gates
        )
    if blocks:
        norms = hidden * sum(bool(layer_kv_heads) + bool(size) for layer_kv_heads, size in blocks)
        count = dataclasses.replace(count, total=count.total + norms, active=count.active + norms)
    towers = 0
    for key in ("vision_config", "audio_config"):
        tower = config.get(key) if isinstance(config, Mapping) else None
        if isinstance(tower, Mapping):
            towers += tower_params(tower)
    if parallel_hybrid and state is not None:
        mixers = layers * state_mixer_params(state, hidden, conv_bias=cfg.get("mamba_conv_bias") is not False)
        count = dataclasses.replace(
            count, total=count.total + mixers, active=count.active + mixers, state=count.state + mixers
        )
    if towers:
        count = dataclasses.replace(count, total=count.total + towers, active=count.active + towers)
        if estimating:
            notes.append(f"vision/audio towers counted: {towers / 1e9:.3f}B parameters (estimated from their configs)")
    if errors:
        raise SizingInputError(errors)
    check_param_counts(num_params, num_active_params)
    if estimating:
        notes.append(f"parameter count estimated from the config's shapes: {count.total / 1e9:.3f}B")
    total, active = given_or_estimated(count, num_params, num_active_params)
    expert_share = count.routed_experts / count.total if count.total else 0.0
    unquantized_share = _unquantized_params(count, excluded_modules, kinds) / count.total if count.total else 0.0
    if parallel_hybrid:
        # Attention and Mamba alternate so that pipeline stages split whole decoder layers (kv_cache.pipeline_stages
        # over 2 x N entries gives each stage N / pp of each when pp divides N; inputs.py refuses other pp).
        groups, pattern = _groups([kind for _ in range(layers) for kind in (("full", None), ("state", None))])
        notes.append(f"Falcon-H1: {layers} decoder layers, each with an attention and a Mamba2 cache layer")
    return ModelSpec(
        name=name or (hf_id or model_type or "custom model"),
        num_layers=2 * layers if parallel_hybrid else layers,
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
        unquantized_params=round(total * unquantized_share),
        num_experts=moe.num_experts if moe else 0,
        num_experts_per_tok=moe.experts_per_token if moe else 0,
        expert_intermediate_size=moe.expert_intermediate_size if moe else 0,
        quantization=quantization,
        notes=tuple(notes),
        state=state,
        num_mtp_layers=mtp_layers,
        indexer_bytes_per_token=indexer_bytes,
        parallel_hybrid=parallel_hybrid,
    )


def _compress_ratios(cfg: Mapping[str, Any], errors: dict[str, str], num_layers: int, mtp: int) -> tuple[int, ...]:
    """Per decoder layer, as vLLM reads them (``transformers_utils/deepseek_v4_utils.py``,
    ``get_compress_ratios``): the config's ``compress_ratios`` (MTP layers' entries after the decoder's), or
    ``compress_rates`` by ``layer_types`` (upstream DeepseekV4Config). 0 means a sliding-window-only layer,
    kept as 1 (``attention.py``: ``max(1, ratio)``); vLLM has compressors for 4 and 128 only."""
    raw: Any = cfg.get("compress_ratios")
    if raw is None:
        rates, types = cfg.get("compress_rates"), cfg.get("layer_types")
        if not isinstance(rates, Mapping) or not isinstance(types, list):
            errors["compress_rates"] = "needs layer_types, a list of each layer's type, to say which layer has which"
            return ()
        raw = [rates.get(kind, 0) if isinstance(kind, str) else None for kind in types]
    if not isinstance(raw, list) or len(raw) not in (num_layers, num_layers + mtp):
        errors["compress_ratios"] = f"must list {num_layers} decoder layers (and {mtp} MTP layers after them)"
        return ()
    ratios = []
    for value in raw[:num_layers]:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and value in (0, 1):
            ratios.append(1)
        elif number and value in COMPRESSOR_BLOCK_SIZES:
            ratios.append(int(value))
        else:
            errors["compress_ratios"] = (
                f"{value!r}: vLLM 0.33's DeepSeek-V4 compressors exist for ratios 4 and 128 (0: sliding window only)"
            )
            return ()
    return tuple(ratios)


def _compressed_attention_spec(
    cfg: Mapping[str, Any],
    *,
    name: str,
    num_params: int | None,
    num_active_params: int | None,
    hf_id: str | None,
    slug: str | None,
    hf_quant_given: bool = False,
) -> ModelSpec:
    """DeepSeek-V4 (``vllm/models/deepseek_v4/``): MLA-like attention with one 512-wide latent head whose caches
    are the compressed-attention ones (compressed_attention.py). Fields vLLM reads without a default are
    required; settings its code does not size the same way are refused, naming the field and value."""
    errors: dict[str, str] = {}
    notes: list[str] = []
    layers = _required_int(cfg, errors, "num_hidden_layers")
    heads = _required_int(cfg, errors, "num_attention_heads")
    hidden = _required_int(cfg, errors, "hidden_size")
    max_pos = _required_int(cfg, errors, "max_position_embeddings")
    vocab = _required_int(cfg, errors, "vocab_size")
    window = _required_int(cfg, errors, "sliding_window")
    head_dim = _required_int(cfg, errors, "head_dim")
    rope_dim = _required_int(cfg, errors, "qk_rope_head_dim")
    q_lora = _required_int(cfg, errors, "q_lora_rank")
    o_lora = _required_int(cfg, errors, "o_lora_rank")
    o_groups = _required_int(cfg, errors, "o_groups")
    experts = _required_int(cfg, errors, "n_routed_experts")
    top_k = _required_int(cfg, errors, "num_experts_per_tok")
    expert_inter = _required_int(cfg, errors, "moe_intermediate_size")
    shared = _optional_int(cfg, errors, "n_shared_experts", minimum=0, maximum=_LIMITS["experts"]) or 0
    mtp = _optional_int(cfg, errors, "num_nextn_predict_layers", minimum=0, maximum=1000) or 0
    hc_mult = _optional_int(cfg, errors, "hc_mult", maximum=64) or 1
    index_dim = _optional_int(cfg, errors, "index_head_dim", maximum=_LIMITS["head_dim"]) or 0
    index_heads = _optional_int(cfg, errors, "index_n_heads", maximum=_LIMITS["num_attention_heads"]) or 0
    index_topk = _optional_int(cfg, errors, "index_topk", maximum=2**24) or 0
    dtype = _model_dtype(cfg, errors, notes)
    tie = bool(_optional_bool(cfg, errors, "tie_word_embeddings"))
    if errors:
        raise SizingInputError(errors)
    assert layers is not None and heads is not None and hidden is not None and max_pos is not None
    assert vocab is not None and window is not None and head_dim is not None and rope_dim is not None
    assert q_lora is not None and o_lora is not None and o_groups is not None
    assert experts is not None and top_k is not None and expert_inter is not None
    ratios = _compress_ratios(cfg, errors, layers, mtp)
    # vLLM 0.33 hard-codes a 584-byte fp8_ds_mla state (448 NoPE + 64 bf16 RoPE + 8 scale bytes) for these.
    if head_dim != HEAD_DIM:
        errors["head_dim"] = f"{head_dim}: vLLM 0.33's DeepSeek-V4 cache layout is built for a 512-wide latent"
    if rope_dim != ROPE_HEAD_DIM:
        errors["qk_rope_head_dim"] = f"{rope_dim}: vLLM 0.33's DeepSeek-V4 cache layout is built for 64 RoPE dims"
    if ratios and INDEXER_RATIO not in ratios:
        # The indexer's backend is what asks for the block-outermost layout the packing follows
        # (v1/attention/backends/mla/indexer.py, supported_kv_cache_layouts); without it vLLM plans otherwise.
        errors["compress_ratios"] = "no ratio-4 (indexed) layer: that cache layout is not modelled"
    if INDEXER_RATIO in ratios and index_dim != 128:
        errors["index_head_dim"] = f"{index_dim or None}: the DeepSeek-V4 indexer's compressor takes 128 only"
    if INDEXER_RATIO in ratios and not index_heads:
        errors["index_n_heads"] = "required by the ratio-4 layers' indexer"
    if (cfg.get("vision_n_layers") or 0) > 0:
        errors["vision_n_layers"] = f"{cfg.get('vision_n_layers')!r}: DeepSeek-V4's vision variant is not modelled"
    expert_dtype = cfg.get("expert_dtype", "fp4")
    if expert_dtype not in ("fp4", "fp8"):
        errors["expert_dtype"] = f"{expert_dtype!r}: vLLM 0.33 knows fp4 and fp8 (quant_config.py)"
    qc = cfg.get("quantization_config")
    quantization = None
    if qc is None:
        notes.append("no quantization_config: weights sized from torch_dtype")
    else:
        method = qc.get("quant_method") if isinstance(qc, Mapping) else None
        moe_algo = qc.get("moe_quant_algo") if isinstance(qc, Mapping) else None
        if method not in ("fp8", "deepseek_v4_fp8") or not qc.get("weight_block_size"):
            errors["quantization_config"] = (
                f"{method!r}: DeepSeek-V4 checkpoints are sized as FP8 128x128 blocks with fp4 or fp8 experts"
            )
        elif moe_algo not in (None, "") and (not isinstance(moe_algo, str) or moe_algo.upper() != "NVFP4"):
            # DeepseekV4FP8Config.get_quant_method: fp4 experts are NVFP4 when moe_quant_algo says so, MXFP4 otherwise.
            errors["quantization_config"] = (
                f"moe_quant_algo {moe_algo!r}: vLLM 0.33's DeepSeek-V4 FP8 path knows NVFP4 routed experts only"
            )
        elif expert_dtype == "fp4":
            # nvidia/DeepSeek-V4-*-NVFP4: ModelOpt NVFP4 routed experts (ModelOptNvFp4FusedMoE), the rest FP8
            # blocks as in DeepSeek's own checkpoint: Fp8Config reads ignored_layers / modules_to_not_convert,
            # not ModelOpt's "ignore" list, so attention and shared experts stay FP8 (quant_config.py).
            nvfp4 = isinstance(moe_algo, str) and moe_algo.upper() == "NVFP4"
            quantization = "fp8_block_nvfp4" if nvfp4 else "fp8_block_mxfp4"
        else:
            quantization = "fp8_block"  # fp8 experts: Fp8MoEMethod, whatever moe_quant_algo says
    if hf_quant_given and qc is not None:
        notes.append("hf_quant_config.json not read: vLLM takes config.json's quantization_config first")
    if errors:
        raise SizingInputError(errors)
    attention = CompressedAttention(
        compress_ratios=ratios,
        sliding_window=window,
        index_head_dim=index_dim,
        index_n_heads=index_heads,
        index_topk=index_topk,
        o_groups=o_groups,
    )
    count = compressed_attention_params(
        compress_ratios=ratios,
        hidden_size=hidden,
        num_attention_heads=heads,
        head_dim=head_dim,
        q_lora_rank=q_lora,
        o_lora_rank=o_lora,
        o_groups=o_groups,
        index_head_dim=index_dim,
        index_n_heads=index_heads,
        vocab_size=vocab,
        num_experts=experts,
        experts_per_token=top_k,
        expert_intermediate_size=expert_inter,
        num_shared_experts=shared,
        hc_mult=hc_mult,
        tie_word_embeddings=tie,
    )
    # Built without a quant config, so 16-bit in an FP8 checkpoint: the compressors' fused_wkv_wgate and the
    # indexer's weights_proj (attention.py, compressor.py).
    unquantized = sum(
        hidden * 2 * (2 if ratio == INDEXER_RATIO else 1) * head_dim
        + (hidden * 2 * 2 * index_dim + hidden * index_heads if ratio == INDEXER_RATIO else 0)
        for ratio in ratios
        if ratio > 1
    )
    check_param_counts(num_params, num_active_params)
    if num_params is None:
        notes.append(f"parameter count estimated from the config's shapes: {count.total / 1e9:.3f}B")
    total = int(num_params) if num_params is not None else count.total
    active = int(num_active_params) if num_active_params is not None else min(total, count.active)
    scale = total / count.total if count.total else 1.0
    swa_only = sum(1 for ratio in ratios if ratio == 1)
    groups = tuple(
        group
        for group in (LayerGroup("sliding_window", swa_only, window), LayerGroup("full", layers - swa_only))
        if group.num_layers
    )
    kinds = [("sliding_window", window) if ratio == 1 else ("full", None) for ratio in ratios]
    order = [(group.kind, group.window) for group in groups]
    notes.append(
        f"DeepSeek-V4 compressed attention: {swa_only} sliding-window-only layers (window {window}), "
        + ", ".join(f"{ratios.count(r)} at ratio {r}" for r in sorted(set(ratios)) if r > 1)
        + "; caches per vllm/models/deepseek_v4/attention.py"
    )
    return ModelSpec(
        name=name or (hf_id or "DeepSeek-V4"),
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=1,
        head_size=head_dim,
        hidden_size=hidden,
        attention_kind="MLA",
        layer_groups=groups,
        dtype=dtype,
        num_params=total,
        num_active_params=active,
        params_estimated=num_params is None,
        max_position_embeddings=max_pos,
        vocab_size=vocab,
        intermediate_size=0,
        qk_rope_head_dim=rope_dim,
        is_moe=True,
        hf_id=hf_id,
        slug=slug,
        layer_pattern=tuple(order.index(kind) for kind in kinds),
        tie_word_embeddings=tie,
        num_expert_params=round(count.routed_experts * scale),
        num_experts=experts,
        num_experts_per_tok=top_k,
        expert_intermediate_size=expert_inter,
        quantization=quantization,
        notes=tuple(notes),
        num_mtp_layers=mtp,
        unquantized_params=round(unquantized * scale),
        compressed_attention=attention,
    )
