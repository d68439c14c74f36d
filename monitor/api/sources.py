"""API of Prometheus sources and the endpoints read through them. The bearer token is write-only: it is
never shown back, only whether one is set."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from monitor.api.permissions import MAX_ID, MonitorAccess
from monitor.models import PrometheusSource, PrometheusTarget
from monitor.prometheus_sources import prometheus_endpoint_register, prometheus_source_save
from monitor.services import MonitorInputError


class PrometheusSourceSerializer(serializers.ModelSerializer):
    has_bearer_token = serializers.SerializerMethodField()

    class Meta:
        model = PrometheusSource
        fields = ["id", "name", "base_url", "enabled", "has_bearer_token", "created"]
        read_only_fields = fields

    def get_has_bearer_token(self, source: PrometheusSource) -> bool:
        return bool(source.bearer_token)


class PrometheusSourceInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=63)
    base_url = serializers.CharField(max_length=500)
    bearer_token = serializers.CharField(
        max_length=1000, required=False, allow_blank=True, write_only=True, help_text="Omit to keep the stored one."
    )
    enabled = serializers.BooleanField(required=False, default=True)


class PrometheusTargetSerializer(serializers.ModelSerializer):
    source = serializers.SlugRelatedField(slug_field="name", read_only=True)
    endpoint_name = serializers.CharField(source="endpoint.display_name", read_only=True)

    class Meta:
        model = PrometheusTarget
        fields = ["id", "endpoint", "endpoint_name", "source", "selector", "created"]
        read_only_fields = fields


class PrometheusTargetInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    source = serializers.CharField(max_length=63, help_text="The source's name.")
    selector = serializers.CharField(max_length=500, help_text='e.g. {instance="10.0.0.7:8000"}')
    scenario = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1, max_value=MAX_ID)
    node = serializers.CharField(max_length=63, required=False, allow_null=True, default=None)
    url = serializers.CharField(max_length=500, required=False, allow_null=True, default=None)


def _valid(serializer_class: type, data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


@extend_schema_view(create=extend_schema(request=PrometheusSourceInputSerializer))
class PrometheusSourceViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """Prometheus-compatible query APIs kvdash reads endpoints from. POST creates or updates by name."""

    queryset = PrometheusSource.objects.order_by("name")
    serializer_class = PrometheusSourceSerializer
    permission_classes = [MonitorAccess]

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = _valid(PrometheusSourceInputSerializer, request.data)
        try:
            source, created = prometheus_source_save(
                name=data["name"],
                base_url=data["base_url"],
                bearer_token=data.get("bearer_token"),
                enabled=data["enabled"],
            )
        except MonitorInputError as error:
            raise ValidationError(error.errors) from None
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(PrometheusSourceSerializer(source).data, status=code)


@extend_schema_view(create=extend_schema(request=PrometheusTargetInputSerializer))
class PrometheusTargetViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """Endpoints read from a Prometheus source: POST registers the endpoint and its selector together."""

    queryset = PrometheusTarget.objects.select_related("source", "endpoint").order_by("pk")
    serializer_class = PrometheusTargetSerializer
    permission_classes = [MonitorAccess]

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = _valid(PrometheusTargetInputSerializer, request.data)
        try:
            target, created = prometheus_endpoint_register(
                name=data["name"],
                source=data["source"],
                selector=data["selector"],
                scenario_id=data["scenario"],
                node=data["node"],
                url=data["url"],
            )
        except MonitorInputError as error:
            raise ValidationError(error.errors) from None
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(PrometheusTargetSerializer(self.get_queryset().get(pk=target.pk)).data, status=code)
