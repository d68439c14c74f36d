"""Monitor REST API: nodes, endpoints (register, read, change), series. Views validate, call one selector
or service, and answer."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from monitor import selectors, services
from monitor.api.permissions import MonitorAccess
from monitor.api.serializers import (
    EndpointCreateSerializer,
    EndpointDetailSerializer,
    EndpointSerializer,
    EndpointUpdateSerializer,
    NodeSerializer,
    SeriesQuerySerializer,
    SeriesSerializer,
)
from monitor.report import endpoint_report
from monitor.series import SeriesInputError, endpoint_series

REPORT_SCHEMA = {
    "type": "object",
    "properties": {
        name: {"type": kind, "nullable": True}
        for name, kind in (
            ("planned_num_gpu_blocks", "integer"),
            ("actual_num_gpu_blocks", "integer"),
            ("planned_kv_tokens", "integer"),
            ("actual_kv_tokens", "integer"),
            ("deviation_pct", "number"),
            ("likely_cause", "string"),
            ("cause_detail", "string"),
            ("flagged", "boolean"),
        )
    },
}


class NodeViewSet(viewsets.ReadOnlyModelViewSet):
    """GPU nodes with their agents' heartbeat and GPUs."""

    queryset = selectors.node_queryset()
    serializer_class = NodeSerializer
    permission_classes = [MonitorAccess]


@extend_schema_view(
    create=extend_schema(request=EndpointCreateSerializer, responses={201: EndpointDetailSerializer}),
    partial_update=extend_schema(request=EndpointUpdateSerializer, responses={200: EndpointDetailSerializer}),
)
class EndpointViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """vLLM servers the agents scrape: latest values per engine and the plan they are held against."""

    queryset = selectors.endpoint_queryset()
    permission_classes = [MonitorAccess]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_serializer_class(self) -> type:
        return EndpointSerializer if self.action == "list" else EndpointDetailSerializer

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = _valid(EndpointCreateSerializer, request.data)
        endpoint, created = _service(
            services.endpoint_register,
            url=data["url"],
            node=data["node"],
            name=data.get("name", ""),
            scenario_id=data.get("scenario"),
            gpu_indices=data.get("gpu_indices"),
        )
        body = EndpointDetailSerializer(self.get_queryset().get(pk=endpoint.pk)).data
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        endpoint = self.get_object()
        data = _valid(EndpointUpdateSerializer, request.data)
        _service(services.endpoint_update, endpoint=endpoint, changes=data)
        return Response(EndpointDetailSerializer(self.get_queryset().get(pk=endpoint.pk)).data)

    @extend_schema(
        responses={200: REPORT_SCHEMA},
        description="Planned vs actual: the scenario's blocks and KV tokens per engine against what the server's "
        "cache_config_info reports, the deviation in % and the input that most likely explains it (utilisation, "
        "block size, KV dtype, or the activation / non-torch estimate). 404 when no scenario is linked.",
    )
    @action(detail=True, methods=["get"])
    def report(self, request: Request, pk: str | None = None) -> Response:
        endpoint = self.get_object()
        report = endpoint_report(endpoint=endpoint)
        if report is None:
            return Response({"detail": "This endpoint has no scenario to compare with."}, status=404)
        return Response(report)

    @extend_schema(
        parameters=[SeriesQuerySerializer],
        responses={200: SeriesSerializer},
        description="One metric of this endpoint on a step grid: [[unix_seconds, value or null], ...]. Null is a "
        "gap (no sample), never a zero. At most ~1,000 points; long ranges come from 1-minute or 1-hour rollups.",
    )
    @action(detail=True, methods=["get"])
    def series(self, request: Request, pk: str | None = None) -> Response:
        endpoint = self.get_object()
        query = _valid(SeriesQuerySerializer, request.query_params)
        end = query.get("end") or timezone.now()
        start = query.get("start") or end - dt.timedelta(hours=1)
        try:
            series = endpoint_series(
                endpoint=endpoint,
                metric=query["metric"],
                start=start,
                end=end,
                step=query.get("step"),
                engine=query.get("engine"),
            )
        except SeriesInputError as error:
            raise ValidationError(error.errors) from None
        return Response(
            {"metric": series.metric, "step": series.step, "source": series.source, "points": series.points}
        )


def _valid(serializer_class: type, data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _service(function: Any, **kwargs: Any) -> Any:
    try:
        return function(**kwargs)
    except services.MonitorInputError as error:
        raise ValidationError(error.errors) from None
