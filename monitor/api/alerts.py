"""Alerts API: list and read alerts (filter by state, endpoint, rule), acknowledge and silence one."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response

from monitor.alerting import (
    alert_acknowledge,
    alert_queryset,
    alert_silenced,
    alerts_list,
    silence_create,
    silences_active,
)
from monitor.api.permissions import MAX_ID, MonitorAccess
from monitor.models import Alert, AlertState
from monitor.services import MonitorInputError

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView


class AlertSerializer(serializers.ModelSerializer):
    rule_name = serializers.CharField(source="rule.name", read_only=True)
    kind = serializers.CharField(source="rule.kind", read_only=True)
    severity = serializers.CharField(source="rule.severity", read_only=True)
    endpoint_name = serializers.CharField(source="endpoint.display_name", read_only=True)
    acknowledged_by = serializers.CharField(
        source="acknowledged_by.get_username", read_only=True, default=None, allow_null=True
    )
    silenced = serializers.SerializerMethodField()

    class Meta:
        model = Alert
        fields = [
            "id", "rule", "rule_name", "kind", "severity", "endpoint", "endpoint_name", "state", "started_at",
            "since", "last_seen_at", "resolved_at", "acknowledged_at", "acknowledged_by", "value", "message",
            "silenced",
        ]  # fmt: skip
        read_only_fields = fields

    def get_silenced(self, alert: Alert) -> bool:
        silences = self.context.get("silences")
        if silences is None:
            return False
        return alert_silenced(alert=alert, silences=silences, now=self.context["now"])


class AlertQuerySerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=AlertState.choices, required=False)
    endpoint = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID)


class AlertSilenceSerializer(serializers.Serializer):
    minutes = serializers.IntegerField(min_value=1, max_value=43200, default=240)
    scope = serializers.ChoiceField(
        choices=[("alert", "this rule on this endpoint"), ("endpoint", "every rule on this endpoint")],
        default="alert",
    )
    comment = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class SilenceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    rule = serializers.IntegerField(source="rule_id", allow_null=True)
    endpoint = serializers.IntegerField(source="endpoint_id", allow_null=True)
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()
    comment = serializers.CharField()


class AlertAccess(MonitorAccess):
    """Reads as the rest of the monitor; acknowledging and silencing change an alert: ``monitor.change_alert``."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in SAFE_METHODS:
            return super().has_permission(request, view)
        return bool(request.user.is_authenticated and request.user.has_perm("monitor.change_alert"))


@extend_schema_view(list=extend_schema(parameters=[AlertQuerySerializer]))
class AlertViewSet(viewsets.ReadOnlyModelViewSet):
    """Alerts raised by the rules, newest first. ``state`` is firing, acknowledged or resolved."""

    queryset = alert_queryset()
    serializer_class = AlertSerializer
    permission_classes = [AlertAccess]

    def get_queryset(self) -> QuerySet[Alert]:
        if self.action != "list":
            return alert_queryset()
        query = _valid(AlertQuerySerializer, self.request.query_params)
        return alerts_list(state=query.get("state"), endpoint_id=query.get("endpoint"))

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        now = timezone.now()
        context.update(now=now, silences=silences_active(now=now))
        return context

    @extend_schema(request=None, responses={200: AlertSerializer})
    @action(detail=True, methods=["post"])
    def acknowledge(self, request: Request, pk: str | None = None) -> Response:
        alert = self.get_object()
        try:
            alert = alert_acknowledge(alert=alert, user=request.user)
        except MonitorInputError as error:
            raise ValidationError(error.errors) from None
        return Response(self.get_serializer(alert).data)

    @extend_schema(request=AlertSilenceSerializer, responses={201: SilenceSerializer})
    @action(detail=True, methods=["post"])
    def silence(self, request: Request, pk: str | None = None) -> Response:
        alert = self.get_object()
        data = _valid(AlertSilenceSerializer, request.data)
        try:
            silence = silence_create(
                user=request.user,
                duration=dt.timedelta(minutes=data["minutes"]),
                rule=alert.rule if data["scope"] == "alert" else None,
                endpoint=alert.endpoint,
                comment=data["comment"],
            )
        except MonitorInputError as error:
            raise ValidationError(error.errors) from None
        return Response(SilenceSerializer(silence).data, status=201)


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)
