from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from planner.json_documents import document_problem
from planner.models import GpuProfile, ModelProfile, Scenario


class ModelNameFilter(admin.RelatedFieldListFilter):
    """The model filter lists names only: no config.json is decoded to list models."""

    def field_choices(self, field: Any, request: HttpRequest, model_admin: Any) -> list[tuple[Any, str]]:
        return list(ModelProfile.objects.order_by("name").values_list("pk", "name"))


class ModelProfileAdminForm(forms.ModelForm):
    """The admin's way in checks a config like the custom-model page and the API do."""

    class Meta:
        model = ModelProfile
        fields = (
            "slug",
            "name",
            "hf_id",
            "config",
            "params_b",
            "params_active_b",
            "source",
            "notes",
            "is_catalog",
            "created_by",
        )

    def clean_config(self) -> Any:
        config = self.cleaned_data.get("config")
        problem = document_problem(config, allow_non_finite=True)
        if problem:
            raise forms.ValidationError(f"The config {problem}." if problem.startswith("is") else problem)
        return config


@admin.register(ModelProfile)
class ModelProfileAdmin(admin.ModelAdmin):
    form = ModelProfileAdminForm
    list_display = ("name", "slug", "hf_id", "params_b", "is_catalog", "updated")
    list_filter = ("is_catalog",)
    search_fields = ("name", "slug", "hf_id")
    prepopulated_fields = {"slug": ("name",)}

    def get_queryset(self, request: HttpRequest) -> QuerySet[ModelProfile]:
        # The list shows no config; the change form reads the one it edits.
        return super().get_queryset(request).defer("config")


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
    list_filter = (("model", ModelNameFilter), "gpu")
    search_fields = ("name", "notes")
    list_select_related = ("owner", "model", "gpu")
    raw_id_fields = ("owner",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Scenario]:
        return super().get_queryset(request).defer("model__config")

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "model":
            kwargs["queryset"] = ModelProfile.objects.defer("config")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
