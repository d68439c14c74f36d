"""The monitor's admin pages, one module per concern."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from monitor import admin_core, admin_sources  # noqa: F401 - register the data path and Prometheus sources
from monitor.models import Alert, AlertRule, Notification, Silence

# --- alerts -----------------------------------------------------------------------------------------------


@admin.register(AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "enabled", "severity", "threshold", "duration_s", "repeat_interval_s"]
    list_filter = ["kind", "enabled", "severity"]
    list_editable = ["enabled", "threshold", "duration_s"]
    search_fields = ["name", "description"]


class NotificationInline(admin.TabularInline):
    model = Notification
    extra = 0
    can_delete = False
    readonly_fields = ["event", "status", "attempts", "last_error", "created", "sent_at"]

    def has_add_permission(self, request: HttpRequest, obj: Alert | None = None) -> bool:
        return False


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ["rule", "endpoint", "state", "started_at", "resolved_at", "acknowledged_by", "message"]
    list_filter = ["state", "rule"]
    list_select_related = ["rule", "endpoint", "acknowledged_by"]
    date_hierarchy = "started_at"
    # Alerts are written by the evaluation; people acknowledge and silence them from /monitor/alerts/.
    readonly_fields = [
        "rule", "endpoint", "state", "started_at", "since", "last_seen_at", "resolved_at", "acknowledged_at",
        "acknowledged_by", "value", "message", "last_notified_at",
    ]  # fmt: skip
    inlines = [NotificationInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Silence)
class SilenceAdmin(admin.ModelAdmin):
    list_display = ["__str__", "rule", "endpoint", "starts_at", "ends_at", "created_by", "comment"]
    list_filter = ["rule"]
    list_select_related = ["rule", "endpoint", "created_by"]
    raw_id_fields = ["endpoint"]
