"""Planner data: the catalog (models and GPUs) and saved scenarios. A scenario stores its inputs only;
its plan is always recomputed by the sizing engine (planner.services.scenario_plan)."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from planner.sizing import GpuSpec, ModelSpec, model_spec_from_hf_config
from planner.sizing.hf_config import storable_config

GIB = 2**30


class WeightDtype(models.TextChoices):
    AUTO = "auto", "auto (model dtype / checkpoint quantisation)"
    BFLOAT16 = "bfloat16", "bfloat16"
    FLOAT16 = "float16", "float16"
    FLOAT32 = "float32", "float32 (4-byte weights and KV cache)"
    FP8 = "fp8", "fp8"
    INT8 = "int8", "int8"
    INT4 = "int4", "int4 (with group scales)"


class KvCacheDtype(models.TextChoices):
    AUTO = "auto", "auto (model dtype)"
    BFLOAT16 = "bfloat16", "bfloat16"
    FP16 = "fp16", "fp16"
    FP8 = "fp8", "fp8"
    FP8_E4M3 = "fp8_e4m3", "fp8_e4m3"
    FP8_E5M2 = "fp8_e5m2", "fp8_e5m2"
    INT8 = "int8", "int8 (what-if, not in every engine)"
    INT4 = "int4", "int4 (what-if, not in every engine)"


class ContextRounding(models.TextChoices):
    EXACT = "exact", "exact"
    POW2 = "pow2", "powers of two"


class ModelProfile(models.Model):
    """A model's shape: a catalog entry or a custom HF config.json a user pasted or uploaded."""

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    hf_id = models.CharField("Hugging Face id", max_length=200, blank=True)
    config = models.JSONField(help_text="The HF config.json (nested text_config allowed).")
    params_b = models.FloatField("parameters (billions)", null=True, blank=True)
    params_active_b = models.FloatField("active parameters (billions, MoE)", null=True, blank=True)
    source = models.TextField(blank=True)
    notes = models.TextField(blank=True)
    is_catalog = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Real configs hold JSON's Infinity/NaN extensions (Nemotron-H's time_step_limit); PostgreSQL's
        # jsonb refuses them, so they are stored as strings (none of them matters to sizing).
        self.config = storable_config(self.config)
        super().save(*args, **kwargs)

    def spec(self) -> ModelSpec:
        spec = model_spec_from_hf_config(
            self.config,
            name=self.name,
            num_params=round(self.params_b * 1e9) if self.params_b else None,
            num_active_params=round(self.params_active_b * 1e9) if self.params_active_b else None,
        )
        return dataclasses.replace(spec, hf_id=self.hf_id) if self.hf_id else spec


class GpuProfile(models.Model):
    """A GPU type: memory as CUDA reports it (what vLLM budgets from) beside the marketed figure."""

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    memory_bytes = models.BigIntegerField(
        help_text="CUDA-visible total memory in bytes.", validators=[MinValueValidator(1)]
    )
    marketed_memory_gb = models.FloatField(null=True, blank=True)
    bandwidth_tbs = models.FloatField("memory bandwidth (TB/s)", validators=[MinValueValidator(0.001)])
    bf16_tflops = models.FloatField("dense BF16 TFLOPS", validators=[MinValueValidator(0.001)])
    price_per_hour = models.FloatField(
        "price per GPU-hour (USD)",
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0)],
        help_text="An on-demand cloud list price. Blank: searches rank this GPU after the priced ones.",
    )
    price_source = models.TextField("price source", blank=True, help_text="Where the price was read (a URL).")
    price_date = models.DateField("price as of", null=True, blank=True)
    fp8 = models.BooleanField("native fp8", default=False)
    source = models.TextField(blank=True)
    notes = models.TextField(blank=True)
    is_catalog = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB

    def spec(self) -> GpuSpec:
        return GpuSpec(
            slug=self.slug,
            name=self.name,
            memory_bytes=self.memory_bytes,
            # A custom GPU may have no marketed figure: show what CUDA reports instead.
            marketed_memory_gb=self.marketed_memory_gb
            if self.marketed_memory_gb is not None
            else round(self.memory_bytes / 1e9, 1),
            bandwidth_bytes_per_s=self.bandwidth_tbs * 1e12,
            bf16_tflops=self.bf16_tflops,
            price_per_hour=self.price_per_hour,
            fp8=self.fp8,
        )


class Scenario(models.Model):
    """A saved question: this model on this hardware with these engine settings, under this SLA."""

    name = models.CharField(max_length=200)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scenarios")
    model = models.ForeignKey(ModelProfile, on_delete=models.PROTECT, related_name="scenarios")
    gpu = models.ForeignKey(GpuProfile, on_delete=models.PROTECT, related_name="scenarios")

    gpu_count = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(4096)]
    )
    tensor_parallel_size = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(512)]
    )
    pipeline_parallel_size = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(512)]
    )

    weight_dtype = models.CharField(max_length=16, choices=WeightDtype.choices, default=WeightDtype.AUTO)
    kv_cache_dtype = models.CharField(max_length=16, choices=KvCacheDtype.choices, default=KvCacheDtype.AUTO)
    gpu_memory_utilization = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.01), MaxValueValidator(1.0)]
    )
    block_size = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    max_num_batched_tokens = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    engine_version = models.CharField(max_length=16, default="latest")
    enable_prefix_caching = models.BooleanField(
        null=True,
        blank=True,
        default=None,
        help_text="Blank: vLLM's default for the model and release (on; for hybrid Mamba / linear-attention "
        "models from 0.28). Decides the state blocks each request of a hybrid model holds.",
    )
    num_speculative_tokens = models.PositiveSmallIntegerField(
        default=0,
        validators=[MaxValueValidator(64)],
        help_text="Speculative tokens per step (e.g. MTP): more state blocks, and the model's MTP attention layers.",
    )

    weights_gib = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.0)])
    activation_gib = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.0)])
    non_torch_gib = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.0)])
    kv_cache_memory_gib = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.0)])

    max_model_len = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    concurrency = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    shared_prefix_tokens = models.PositiveIntegerField(null=True, blank=True)
    target_tpot_ms = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.0)])
    target_ttft_ms = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.0)])
    context_rounding = models.CharField(max_length=8, choices=ContextRounding.choices, default=ContextRounding.EXACT)

    notes = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated"]
        indexes = [
            # The scenario list: newest first.
            models.Index(fields=["-updated"], name="scenario_updated_idx"),
        ]

    def __str__(self) -> str:
        return self.name


# The inputs a scenario hands to the sizing engine; the API, forms and export all use this list.
SCENARIO_INPUT_FIELDS: tuple[str, ...] = (
    "gpu_count",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "weight_dtype",
    "kv_cache_dtype",
    "gpu_memory_utilization",
    "block_size",
    "max_num_batched_tokens",
    "engine_version",
    "enable_prefix_caching",
    "num_speculative_tokens",
    "weights_gib",
    "activation_gib",
    "non_torch_gib",
    "kv_cache_memory_gib",
    "max_model_len",
    "concurrency",
    "prompt_tokens",
    "output_tokens",
    "shared_prefix_tokens",
    "target_tpot_ms",
    "target_ttft_ms",
    "context_rounding",
)
