"""Request bodies of the stateless sizing endpoints (POST /api/v1/size/ and /api/v1/size/search/).

Field names are the engine's PlanInputs names. These serializers check types and plausible ranges only; the
engine checks everything that depends on the model and the GPU (say a tensor-parallel size that does not divide
the attention heads) and the view turns its complaints into per-field 400s.
"""

from __future__ import annotations

import copy
from typing import Any

from rest_framework import serializers
from rest_framework.fields import Field

from planner.api.sizing import DEFAULT_GPU_BANDWIDTH_TBS, DEFAULT_GPU_BF16_TFLOPS, HF_REPO_ID
from planner.api.strict_input import StrictInputMixin
from planner.models import ContextRounding, KvCacheDtype, WeightDtype

# Bounds that reject absurd values early; the engine's own limits are tighter where they matter.
MAX_TOKENS = 2**31
MAX_GIB = 1_000_000.0


class PrototypeFieldsMixin:
    """Build the declared fields once per class and give each instance shallow copies of them.

    DRF deep-copies every declared field for every serializer instance; with ~30 fields that was a fifth of a
    /size/ request. The copies only differ in what bind() sets on them, so a shallow copy of a never-bound
    prototype is enough (the prototypes are never bound or changed, so threads can share them).
    """

    def get_fields(self) -> dict[str, Field]:
        cls = type(self)
        prototypes = cls.__dict__.get("_prototype_fields")
        if prototypes is None:
            prototypes = super().get_fields()  # type: ignore[misc]
            cls._prototype_fields = prototypes  # type: ignore[attr-defined]
        return {name: copy.copy(field) for name, field in prototypes.items()}


class SizeRequestSerializer(StrictInputMixin, PrototypeFieldsMixin, serializers.Serializer):
    model = serializers.CharField(
        required=False, max_length=100, help_text="Catalog model slug (GET /api/v1/models/). Or give model_config."
    )
    model_config = serializers.DictField(
        required=False,
        help_text="A Hugging Face config.json object (nested text_config allowed), instead of a catalog model. "
        "A ModelOpt checkpoint's hf_quant_config.json (NVFP4, FP8) goes under its key hf_quant_config.",
    )
    model_hf_id = serializers.RegexField(
        HF_REPO_ID,
        required=False,
        max_length=200,
        help_text="The Hugging Face repo id model_config came from (org/name), for the vllm serve command. "
        "Blank: the config's _name_or_path when it names a repo.",
    )
    gpu = serializers.CharField(
        required=False, max_length=100, help_text="Catalog GPU slug (GET /api/v1/gpus/). Or give gpu_memory_gib."
    )
    gpu_memory_gib = serializers.FloatField(
        required=False,
        min_value=0.01,
        max_value=100_000.0,
        help_text="An ad-hoc GPU: its CUDA-visible total memory in GiB, instead of a catalog GPU.",
    )
    gpu_bandwidth_tbs = serializers.FloatField(
        required=False,
        min_value=0.001,
        max_value=1_000.0,
        help_text=f"Ad-hoc GPU memory bandwidth in TB/s (default {DEFAULT_GPU_BANDWIDTH_TBS:g}); speed estimates only.",
    )
    gpu_bf16_tflops = serializers.FloatField(
        required=False,
        min_value=0.001,
        max_value=1_000_000.0,
        help_text=f"Ad-hoc GPU dense BF16 TFLOPS (default {DEFAULT_GPU_BF16_TFLOPS:g}); speed estimates only.",
    )
    gpu_count = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=4096,
        help_text="GPUs in all; a multiple of tensor x pipeline parallel size (data-parallel replicas). "
        "Default: tensor x pipeline.",
    )
    tensor_parallel_size = serializers.IntegerField(required=False, min_value=1, max_value=512, default=1)
    pipeline_parallel_size = serializers.IntegerField(required=False, min_value=1, max_value=512, default=1)
    weight_dtype = serializers.ChoiceField(choices=WeightDtype.choices, required=False, default=WeightDtype.AUTO)
    kv_cache_dtype = serializers.ChoiceField(choices=KvCacheDtype.choices, required=False, default=KvCacheDtype.AUTO)
    gpu_memory_utilization = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0.01,
        max_value=1.0,
        help_text="vLLM --gpu-memory-utilization. Default: the engine version's (0.92 latest, 0.9 older).",
    )
    block_size = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=1024,
        help_text="Tokens per KV block. Default 16 (64 MLA).",
    )
    max_num_batched_tokens = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_TOKENS, help_text="Default: vLLM's for the GPU."
    )
    engine_version = serializers.CharField(
        required=False, max_length=16, default="latest", help_text='"latest" or a vLLM release such as "0.10".'
    )
    enable_prefix_caching = serializers.BooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="vLLM --enable-prefix-caching. Default: vLLM's for the model and release (on; for hybrid "
        "Mamba / linear-attention models from 0.28). Decides the state blocks per request.",
    )
    num_speculative_tokens = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=64,
        default=0,
        help_text="Speculative tokens per step (e.g. MTP): more state blocks, and the model's MTP attention layers.",
    )
    weights_gib = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0.0,
        max_value=MAX_GIB,
        help_text="Override: whole-model weights, GiB.",
    )
    activation_gib = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0.0,
        max_value=MAX_GIB,
        help_text="Override: activation peak per GPU, GiB.",
    )
    non_torch_gib = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0.0,
        max_value=MAX_GIB,
        help_text="Override: non-torch memory per GPU, GiB.",
    )
    kv_cache_memory_gib = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0.0,
        max_value=MAX_GIB,
        help_text="Fixed KV cache memory per GPU in GiB, like vLLM --kv-cache-memory-bytes.",
    )
    max_model_len = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_TOKENS, help_text="Default: the model's maximum."
    )
    concurrency = serializers.IntegerField(
        required=False, min_value=1, max_value=1_000_000, default=1, help_text="Concurrent sequences wanted."
    )
    context_rounding = serializers.ChoiceField(
        choices=ContextRounding.choices,
        required=False,
        default=ContextRounding.EXACT,
        help_text="pow2 rounds context lengths down to powers of two, as people quote them.",
    )
    prompt_tokens = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS)
    output_tokens = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS)
    shared_prefix_tokens = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS)
    target_tpot_ms = serializers.FloatField(
        required=False, allow_null=True, min_value=0.0, max_value=1e9, help_text="SLA: time per output token, ms."
    )
    target_ttft_ms = serializers.FloatField(
        required=False, allow_null=True, min_value=0.0, max_value=1e9, help_text="SLA: time to first token, ms."
    )

    gpu_choice_required = True

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        errors: dict[str, str] = {}
        if "model" in attrs and "model_config" in attrs:
            errors["model"] = "give model or model_config, not both"
        elif "model" not in attrs and "model_config" not in attrs:
            errors["model"] = "give a catalog model slug (model) or an HF config.json (model_config)"
        if "gpu" in attrs and "gpu_memory_gib" in attrs:
            errors["gpu"] = "give gpu or gpu_memory_gib, not both"
        elif self.gpu_choice_required and "gpu" not in attrs and "gpu_memory_gib" not in attrs:
            errors["gpu"] = "give a catalog GPU slug (gpu) or its memory (gpu_memory_gib)"
        if "gpu_memory_gib" not in attrs:
            for field in ("gpu_bandwidth_tbs", "gpu_bf16_tflops"):
                if field in attrs:
                    errors[field] = "only with gpu_memory_gib (a catalog GPU has its own figures)"
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class SizeSearchRequestSerializer(SizeRequestSerializer):
    """The SLA of a sizing request; GPU, count, tensor parallel size and KV dtype are what the search varies."""

    gpu_choice_required = False

    gpus = serializers.ListField(
        child=serializers.CharField(max_length=100),
        required=False,
        max_length=100,
        help_text="Catalog GPU slugs to consider. Default: every GPU in the catalog.",
    )
    max_gpus = serializers.IntegerField(required=False, min_value=1, max_value=64, default=8)
    kv_dtypes = serializers.ListField(
        # Plain strings checked below: a second enum of the same choices would name one set twice in the schema.
        child=serializers.CharField(max_length=16),
        required=False,
        min_length=1,
        max_length=len(KvCacheDtype.values),
        help_text=f'KV cache dtypes to try, of {", ".join(KvCacheDtype.values)}. Default ["auto", "fp8"].',
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=50, default=10)

    def validate_kv_dtypes(self, value: list[str]) -> list[str]:
        unknown = [dtype for dtype in value if dtype not in KvCacheDtype.values]
        if unknown:
            raise serializers.ValidationError(
                f"unknown KV cache dtype {unknown[0]!r}; use {', '.join(KvCacheDtype.values)}"
            )
        return value
