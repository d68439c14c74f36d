"""Kimi Linear / Kimi-K3 configs (``linear_attn_config``): KDA state layers beside MLA layers, read as vLLM 0.33 does.

Sources (vLLM 0.33.0):
- layer kinds: ``transformers_utils/configs/kimi_linear.py`` (``KimiLinearConfig.is_kda_layer``: layer ``i`` is
  KDA when ``i + 1`` is in ``linear_attn_config["kda_layers"]``, 1-based; every other layer is MLA);
- the decoder layer: ``models/kimi_k3/nvidia/model.py`` (``KimiDecoderLayer``: K3's full-rank-gate KDA
  ``KimiK3DeltaAttention`` when ``use_full_rank_gate``, else the shared ``KimiGatedDeltaNetAttention`` of
  ``model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py``; MLA layers assert ``kv_lora_rank``,
  ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim`` and ``mla_use_nope``; experts where
  ``i >= first_k_dense_replace and i % moe_layer_freq == 0``);
- KDA state: ``model_executor/layers/mamba/mamba_utils.py`` (``kda_state_shape``, ``kda_state_dtype``);
  the align-mode prefill checkpoint: ``models/kimi_k3/nvidia/kda.py`` (``get_kv_cache_spec``,
  ``resolve_kda_prefill_backend``, ``is_flashkda_supported``) and ``layers/mamba/kda_checkpoint.py``;
- the MLA cache: ``models/kimi_k3/nvidia/mla.py`` (``MultiHeadLatentAttention.get_kv_cache_spec``: one
  ``kv_lora_rank + qk_rope_head_dim`` latent per token, whatever ``mla_use_nope``);
- experts: ``KimiMoE`` (shared experts ``num_shared_experts x moe_intermediate_size``; latent MoE when
  ``routed_expert_hidden_size`` is set: replicated down/up projections and an RMSNorm when
  ``latent_moe_use_norm``; router with an ``e_score_correction_bias``);
- weights: ``model_executor/models/config.py`` (``KimiK3ForConditionalGenerationConfig`` rewrites a
  compressed-tensors ``mxfp4-pack-quantized`` checkpoint to ``mxfp4``, whose linear layers are unquantised:
  ``layers/quantization/mxfp4.py``, ``Mxfp4Config.get_quant_method``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .model_spec import StateSpec
from .params import MoeShape
from .validation import MAX_LAYERS, as_int

FIELD = "linear_attn_config"
# The wrapper whose MXFP4 rewrite vLLM applies (model_executor/models/config.py, MODELS_CONFIG_MAP).
K3_ARCHITECTURE = "KimiK3ForConditionalGeneration"
_MLA_FIELDS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def _kda_config(cfg: Mapping[str, Any], errors: dict[str, str]) -> Mapping[str, Any] | None:
    value = cfg.get(FIELD)
    if not isinstance(value, Mapping):
        errors[FIELD] = f"must be a JSON object (dict) with kda_layers, full_attn_layers, num_heads, got {value!r}"
        return None
    return value


def _layer_list(kda: Mapping[str, Any], key: str, num_layers: int, errors: dict[str, str]) -> set[int] | None:
    raw = kda.get(key)
    if not isinstance(raw, list) or any(
        isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= num_layers for item in raw
    ):
        errors[FIELD] = f"{key} must list 1-based layer numbers from 1 to {num_layers}, got {raw!r}"
        return None
    if len(set(raw)) != len(raw):
        errors[FIELD] = f"{key} lists a layer twice: {raw!r}"
        return None
    return set(raw)


def kda_layer_kinds(cfg: Mapping[str, Any], errors: dict[str, str], num_layers: int) -> list[tuple[str, int | None]]:
    """Per layer ``("state", None)`` for KDA, ``("full", None)`` for MLA (``is_kda_layer``, 1-based).

    vLLM reads only ``kda_layers``; a ``full_attn_layers`` that overlaps it or leaves a layer in neither list
    contradicts it, and is refused rather than guessed at."""
    full: list[tuple[str, int | None]] = [("full", None)] * num_layers
    kda = _kda_config(cfg, errors)
    if kda is None or num_layers > MAX_LAYERS:
        return full
    state_layers = _layer_list(kda, "kda_layers", num_layers, errors)
    full_layers = _layer_list(kda, "full_attn_layers", num_layers, errors)
    if state_layers is None or full_layers is None:
        return full
    if state_layers & full_layers:
        errors[FIELD] = f"layers {sorted(state_layers & full_layers)} are in both kda_layers and full_attn_layers"
        return full
    missing = sorted(set(range(1, num_layers + 1)) - state_layers - full_layers)
    if missing:
        errors[FIELD] = f"layers {missing} (1-based) are in neither kda_layers nor full_attn_layers"
        return full
    if not full_layers:
        errors[FIELD] = "no full_attn_layers: attention-free Kimi Linear layouts are not supported"
        return full
    for key in _MLA_FIELDS:
        if cfg.get(key) is None:
            errors.setdefault(key, "required by Kimi Linear's MLA layers (KimiDecoderLayer asserts it)")
    if cfg.get("mla_use_nope") is not True:
        errors.setdefault(
            "mla_use_nope", f"{cfg.get('mla_use_nope')!r}: vLLM 0.33's Kimi MLA is NoPE-only (asserts it)"
        )
    return [("state", None) if i + 1 in state_layers else ("full", None) for i in range(num_layers)]


def kda_state_spec(cfg: Mapping[str, Any], errors: dict[str, str]) -> StateSpec | None:
    """The KDA state (``kda_state_shape``): conv ``(heads x head_dim x 3) / tp`` by ``kernel - 1 + spec`` in the
    conv dtype (auto: the model dtype), recurrent ``(heads / tp, head_dim, head_dim)`` in float32
    (``kda_state_dtype``: ``mamba_ssm_cache_dtype`` auto means float32, not the conv dtype).

    ``flashkda``: K3's full-rank-gate layer with a bounded gate (``gate_lower_bound``) and 128-wide heads, which
    ``resolve_kda_prefill_backend`` (auto) runs on FlashKDA where the GPU and dtype allow; the shared
    ``KimiGatedDeltaNetAttention`` is Triton-only (it asserts so) and adds no checkpoint block."""
    kda = _kda_config(cfg, errors)
    if kda is None:
        return None
    own: dict[str, str] = {}
    values: dict[str, int] = {}
    for key in ("num_heads", "head_dim", "short_conv_kernel_size"):
        # vLLM indexes all three without a default (kda_config["..."]).
        value = as_int(own, key, kda.get(key), minimum=1, maximum=100_000)
        if value is None:
            own[FIELD] = f"{key} is required, a positive integer, got {kda.get(key)!r}"
        values[key] = value or 0
    full_rank = kda.get("use_full_rank_gate", False)
    bound = kda.get("gate_lower_bound")
    if not isinstance(full_rank, bool):
        own[FIELD] = f"use_full_rank_gate must be true or false, got {full_rank!r}"
    if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float)) or not -5 <= bound < 0):
        # KimiK3DeltaAttention asserts _KDA_GATE_LOGBOUND_MIN (-5) <= bound < 0.
        own[FIELD] = f"gate_lower_bound must be in [-5, 0), got {bound!r}"
    if FIELD in own:
        errors[FIELD] = own[FIELD]
        return None
    return StateSpec(
        kind="kda",
        num_heads=values["num_heads"],
        head_dim=values["head_dim"],
        conv_kernel=values["short_conv_kernel_size"],
        ssm_dtype="float32",
        flashkda=full_rank is True and bound is not None and values["head_dim"] == 128,
    )


def kda_mixer_params(cfg: Mapping[str, Any], hidden_size: int) -> int:
    """Weights of one KDA mixer, P = heads x head_dim. Full-rank gate (``KimiK3DeltaAttention``):
    ``in_proj_qkvgfab`` h x (4P + head_dim + heads), ``f_b_proj`` head_dim x P, ``dt_bias`` P, ``conv1d``
    3P x kernel, ``A_log`` heads, ``o_norm`` head_dim, ``o_proj`` P x h. Low-rank gate (Kimi-Linear):
    ``in_proj`` h x (3P + heads + head_dim) and ``g_a_proj`` h x head_dim, ``g_b_proj`` head_dim x P in place
    of the fourth P. The TP padding rows of ``in_proj`` are zeros, not checkpoint weights."""
    kda = cfg.get(FIELD)
    if not isinstance(kda, Mapping):
        return 0
    heads, head_dim, kernel = (int(kda.get(key) or 0) for key in ("num_heads", "head_dim", "short_conv_kernel_size"))
    p, h = heads * head_dim, hidden_size
    common = head_dim * p + p + 3 * p * kernel + heads + head_dim + p * h
    if kda.get("use_full_rank_gate") is True:
        return h * (4 * p + head_dim + heads) + common
    return h * (3 * p + heads + head_dim) + h * head_dim + head_dim * p + common


def mla_output_gate_params(cfg: Mapping[str, Any], hidden_size: int, num_heads: int) -> int:
    """``mla_use_output_gate``: one more h x (heads x v_head_dim) projection per MLA layer (mla.py: the gate
    shard of ``fused_qkv_a_g_proj``, or ``g_proj``)."""
    v_head = cfg.get("v_head_dim")
    if cfg.get("mla_use_output_gate") is not True or not isinstance(v_head, int):
        return 0
    return hidden_size * num_heads * v_head


def kimi_moe_shape(
    cfg: Mapping[str, Any],
    errors: dict[str, str],
    *,
    num_layers: int,
    num_experts: int,
    top_k: int,
    expert_intermediate: int,
    dense_intermediate: int,
    hidden_size: int,
) -> MoeShape:
    """``KimiMoE`` / ``KimiDecoderLayer``: experts where ``i >= first_k_dense_replace and i % moe_layer_freq
    == 0``, a dense MLP of ``intermediate_size`` elsewhere; ``num_shared_experts`` shared experts of
    ``moe_intermediate_size``; latent experts of width ``routed_expert_hidden_size`` with h x latent down
    and latent x h up projections (and a latent RMSNorm when ``latent_moe_use_norm``)."""

    def read(key: str, default: int, minimum: int) -> int:
        value = cfg.get(key)
        if value is None:
            return default
        return as_int(errors, key, value, minimum=minimum, maximum=100_000) or default

    first_dense = read("first_k_dense_replace", 0, 0)
    freq = read("moe_layer_freq", 1, 1)
    shared = read("num_shared_experts", 0, 0)
    latent = read("routed_expert_hidden_size", 0, 1)
    extra = 2 * hidden_size * latent + (latent if latent and cfg.get("latent_moe_use_norm") is True else 0)
    return MoeShape(
        num_experts=num_experts,
        experts_per_token=top_k,
        expert_intermediate_size=expert_intermediate,
        shared_intermediate_size=shared * expert_intermediate,
        moe_layers=tuple(i >= first_dense and i % freq == 0 for i in range(num_layers)),
        dense_intermediate_size=dense_intermediate,
        router_bias=True,  # gate.e_score_correction_bias
        expert_hidden_size=latent,
        extra_params_per_layer=extra,
    )


def kimi_quantization(
    config: Mapping[str, Any], cfg: Mapping[str, Any], quantization: str | None, errors: dict[str, str]
) -> str | None:
    """Kimi-K3's compressed-tensors ``mxfp4-pack-quantized`` experts: vLLM serves them as ``mxfp4`` (routed
    experts MXFP4, every linear layer 16-bit). The rewrite is keyed on the K3 wrapper architecture; a
    standalone ``KimiLinearForCausalLM`` checkpoint in that format stays on compressed-tensors, whose
    layout is not modelled: refused rather than sized as another format."""
    qc = cfg.get("quantization_config")
    if not isinstance(qc, Mapping) or qc.get("format") != "mxfp4-pack-quantized":
        return quantization
    if qc.get("quant_method") != "compressed-tensors":
        return quantization
    if config.get("architectures") == [K3_ARCHITECTURE]:
        return "mxfp4"
    errors["quantization_config"] = (
        f"compressed-tensors mxfp4-pack-quantized with architectures {config.get('architectures')!r}: vLLM rewrites "
        f"it to mxfp4 only for {K3_ARCHITECTURE}; this layout is not sized"
    )
    return quantization
