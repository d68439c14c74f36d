"""The catalog as JSON: models and GPUs by slug, and the HF config import."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from planner.api.model_shapes import model_shape
from planner.api.plan_serializers import ModelSpecSerializer
from planner.api.strict_input import StrictInputMixin
from planner.models import GpuProfile, ModelProfile

# Catalog slugs carry dots ("llama-3.1-8b"), which Django's SlugField pattern leaves out.
SLUG_PATTERN = r"^[-a-zA-Z0-9_.]+$"


class ModelShapeSerializer(ModelSpecSerializer):
    """What the engine reads from a config.json, plus what one token costs."""

    kv_bytes_per_token_bf16 = serializers.IntegerField(
        help_text="KV cache bytes one token costs the whole model at bf16 on one GPU (all layers)."
    )


class ModelProfileSerializer(serializers.ModelSerializer):
    # Declared as plain text: catalog slugs carry dots, which the model field's SlugField pattern would deny.
    slug = serializers.CharField(read_only=True)

    class Meta:
        model = ModelProfile
        fields = ["slug", "name", "hf_id", "params_b", "params_active_b", "is_catalog", "source", "notes"]


class ModelProfileDetailSerializer(ModelProfileSerializer):
    shape = serializers.SerializerMethodField(help_text="Null when the stored config no longer makes a spec.")

    class Meta(ModelProfileSerializer.Meta):
        fields = [*ModelProfileSerializer.Meta.fields, "config", "shape"]

    @extend_schema_field(ModelShapeSerializer(allow_null=True))
    def get_shape(self, obj: ModelProfile) -> dict[str, Any] | None:
        return model_shape(profile=obj)


class GpuProfileSerializer(serializers.ModelSerializer):
    slug = serializers.CharField(read_only=True)
    memory_gib = serializers.FloatField(read_only=True, help_text="CUDA-visible total memory in GiB.")

    class Meta:
        model = GpuProfile
        fields = [
            "slug",
            "name",
            "memory_bytes",
            "memory_gib",
            "marketed_memory_gb",
            "bandwidth_tbs",
            "bf16_tflops",
            "price_per_hour",
            "price_source",
            "price_date",
            "fp8",
            "is_catalog",
            "source",
            "notes",
        ]


class ModelImportRequestSerializer(StrictInputMixin, serializers.Serializer):
    config = serializers.DictField(
        help_text="A Hugging Face config.json object (nested text_config allowed). A ModelOpt checkpoint's "
        "hf_quant_config.json (NVFP4, FP8) goes under its key hf_quant_config."
    )
    name = serializers.CharField(required=False, max_length=200, help_text="Default: hf_id, else the model_type.")
    slug = serializers.RegexField(
        SLUG_PATTERN, required=False, max_length=100, help_text="Default: made from the name. Must be unused."
    )
    hf_id = serializers.CharField(required=False, max_length=200, allow_blank=True)
    params_b = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0.000001,
        max_value=1_000_000.0,
        help_text="Official parameter count, billions.",
    )
    params_active_b = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0.000001,
        max_value=1_000_000.0,
        help_text="Active parameters (MoE), billions.",
    )
    save = serializers.BooleanField(
        required=False, default=False, help_text="Save as a custom catalog model (needs the planner role)."
    )


class ModelImportResponseSerializer(serializers.Serializer):
    shape = ModelShapeSerializer()
    saved = serializers.BooleanField()
    model = ModelProfileSerializer(allow_null=True, help_text="The saved model; null unless save was true.")
