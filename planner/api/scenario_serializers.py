"""Scenarios as JSON: the stored inputs with model and GPU by slug; the detail adds the recomputed plan."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from planner.api.plan_serializers import PlanSerializer
from planner.api.strict_input import StrictInputMixin
from planner.models import SCENARIO_INPUT_FIELDS, GpuProfile, ModelProfile, Scenario
from planner.selectors import scenario_plan_result


class CatalogSlugField(serializers.SlugRelatedField):
    """A catalog row by slug. Checks the text first: PostgreSQL rejects NUL in a query (a 500, not a 400)."""

    def to_internal_value(self, data: object) -> object:
        if not isinstance(data, str) or "\x00" in data or len(data) > 100:
            self.fail("invalid")
        return super().to_internal_value(data)


class ScenarioSerializer(StrictInputMixin, serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    model = CatalogSlugField(slug_field="slug", queryset=ModelProfile.objects.all(), help_text="Catalog model slug.")
    gpu = CatalogSlugField(slug_field="slug", queryset=GpuProfile.objects.all(), help_text="Catalog GPU slug.")

    class Meta:
        model = Scenario
        fields = ["id", "name", "owner", "model", "gpu", *SCENARIO_INPUT_FIELDS, "notes", "created", "updated"]
        read_only_fields = ["id", "owner", "created", "updated"]


class ScenarioDetailSerializer(ScenarioSerializer):
    """A scenario and its plan, recomputed now. Inputs the engine no longer accepts give plan null + plan_errors."""

    plan = serializers.SerializerMethodField()
    plan_errors = serializers.SerializerMethodField()

    class Meta(ScenarioSerializer.Meta):
        fields = [*ScenarioSerializer.Meta.fields, "plan", "plan_errors"]

    def _result(self, obj: Scenario) -> tuple[dict[str, Any] | None, dict[str, str] | None]:
        # Both fields come from one engine run per scenario.
        cache = self.context.setdefault("_plan_results", {})
        if obj.pk not in cache:
            cache[obj.pk] = scenario_plan_result(scenario=obj)
        return cache[obj.pk]

    @extend_schema_field(PlanSerializer(allow_null=True))
    def get_plan(self, obj: Scenario) -> dict[str, Any] | None:
        return self._result(obj)[0]

    @extend_schema_field(
        serializers.DictField(
            child=serializers.CharField(),
            allow_null=True,
            help_text="Why the stored inputs give no plan, per input field; null when there is a plan.",
        )
    )
    def get_plan_errors(self, obj: Scenario) -> dict[str, str] | None:
        return self._result(obj)[1]


class ScenarioFilterSerializer(serializers.Serializer):
    """Query parameters of the scenario list."""

    model = serializers.CharField(required=False, max_length=100, help_text="Model slug.")
    gpu = serializers.CharField(required=False, max_length=100, help_text="GPU slug.")
    owner = serializers.CharField(required=False, max_length=150, help_text="Owner's username.")
    search = serializers.CharField(
        required=False, max_length=200, help_text="Part of the scenario's name or notes, or of its model or GPU name."
    )


class ScenarioPlanErrorSerializer(serializers.Serializer):
    plan_errors = serializers.DictField(child=serializers.CharField())
