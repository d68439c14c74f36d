from __future__ import annotations

import datetime as dt
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from monitor.api.permissions import MAX_ID
from monitor.models import Endpoint, Gpu, Node
from monitor.planned import endpoint_planned
from monitor.series import METRICS
from monitor.timeparse import TimeParseError, parse_time


class GpuSerializer(serializers.ModelSerializer):
    class Meta:
        model = Gpu
        fields = ["index", "uuid", "name", "memory_total_bytes", "last_seen_at"]


class NodeSerializer(serializers.ModelSerializer):
    queue = serializers.CharField(read_only=True)
    gpus = GpuSerializer(many=True, read_only=True)

    class Meta:
        model = Node
        fields = [
            "id", "name", "queue", "hostname", "agent_version", "last_heartbeat_at",
            "nvml_available", "nvml_error", "driver_version", "gpus",
        ]  # fmt: skip


class EndpointSerializer(serializers.ModelSerializer):
    node = serializers.SlugRelatedField(slug_field="name", read_only=True)
    scenario_name = serializers.CharField(source="scenario.name", read_only=True, default=None)

    class Meta:
        model = Endpoint
        fields = [
            "id", "url", "name", "node", "scenario", "scenario_name", "enabled", "up", "last_scrape_at",
            "last_success_at", "last_duration_ms", "last_error", "consecutive_failures",
        ]  # fmt: skip
        read_only_fields = fields


class EndpointDetailSerializer(EndpointSerializer):
    engines = serializers.SerializerMethodField()
    planned = serializers.SerializerMethodField()

    class Meta(EndpointSerializer.Meta):
        fields = [
            *EndpointSerializer.Meta.fields,
            "gpu_indices",
            "rejected_total",
            "last_rejected",
            "engines",
            "planned",
        ]
        read_only_fields = fields

    @extend_schema_field({"type": "array", "items": {"type": "object", "additionalProperties": True}})
    def get_engines(self, endpoint: Endpoint) -> list[dict[str, Any]]:
        latest = endpoint.latest if isinstance(endpoint.latest, dict) else {}
        return [latest[key] for key in sorted(latest, key=lambda k: (len(k), k))]

    @extend_schema_field({"type": "object", "nullable": True, "additionalProperties": True})
    def get_planned(self, endpoint: Endpoint) -> dict[str, Any] | None:
        return endpoint_planned(endpoint=endpoint)


class EndpointCreateSerializer(serializers.Serializer):
    url = serializers.CharField(max_length=500)
    node = serializers.CharField(max_length=63)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    scenario = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1, max_value=MAX_ID)
    gpu_indices = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=255), required=False, max_length=64
    )


class EndpointUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    scenario = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_ID)
    enabled = serializers.BooleanField(required=False)
    gpu_indices = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=255), required=False, max_length=64
    )


@extend_schema_field({"type": "string", "description": "Unix seconds or an RFC 3339 time, as Prometheus takes"})
class TimestampField(serializers.Field):
    """A time as Prometheus' HTTP API takes it: Unix seconds (fractions allowed) or RFC 3339."""

    def to_internal_value(self, data: Any) -> dt.datetime:
        try:
            return parse_time(data)
        except TimeParseError as error:
            raise serializers.ValidationError(str(error)) from None

    def to_representation(self, value: dt.datetime) -> float:
        return value.timestamp()


class SeriesQuerySerializer(serializers.Serializer):
    metric = serializers.ChoiceField(choices=METRICS)
    start = TimestampField(required=False, help_text="Unix seconds or RFC 3339; default: end - 1 h.")
    end = TimestampField(required=False, help_text="Unix seconds or RFC 3339; default: now.")
    step = serializers.IntegerField(required=False, min_value=1, max_value=86400)
    engine = serializers.IntegerField(required=False, min_value=0, max_value=32767)


class SeriesSerializer(serializers.Serializer):
    metric = serializers.CharField()
    step = serializers.IntegerField()
    source = serializers.CharField()
    points = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField(allow_null=True), min_length=2, max_length=2)
    )
