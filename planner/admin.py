from __future__ import annotations

from django.contrib import admin

from planner.models import GpuProfile, ModelProfile, Scenario


@admin.register(ModelProfile)
class ModelProfileAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "hf_id", "params_b", "is_catalog", "updated")
    list_filter = ("is_catalog",)
    search_fields = ("name", "slug", "hf_id")
    prepopulated_fields = {"slug": ("name",)}


@admin.register(GpuProfile)
class GpuProfileAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "slug",
        "memory_bytes",
        "bandwidth_tbs",
        "bf16_tflops",
        "price_per_hour",
        "price_date",
        "is_catalog",
    )
    # Prices move every few months: editable straight from the list, each with its source and date.
    list_editable = ("price_per_hour", "price_date")
    list_filter = ("is_catalog", "fp8")
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}


@admin.register(Scenario)
class ScenarioAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "model", "gpu", "gpu_count", "tensor_parallel_size", "concurrency", "updated")
    list_filter = ("model", "gpu")
    search_fields = ("name", "notes")
    list_select_related = ("owner", "model", "gpu")
    raw_id_fields = ("owner",)
