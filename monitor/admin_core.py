"""Admin for the data path: nodes and their keys, endpoints, GPUs, and what ingest refused."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from monitor.models import Endpoint, Gpu, IngestDrop, Node, NodeKey


class NodeKeyInline(admin.TabularInline):
    """Keys are listed by id only: the secret is shown once, by create_node_key, and never again."""

    model = NodeKey
    extra = 0
    fields = ["key_id", "created", "revoked_at"]
    readonly_fields = ["key_id", "created"]
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Node | None = None) -> bool:
        return False


class GpuInline(admin.TabularInline):
    model = Gpu
    extra = 0
    fields = ["index", "name", "uuid", "memory_total_bytes", "last_seen_at"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Node | None = None) -> bool:
        return False


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "hostname", "agent_version", "last_heartbeat_at", "nvml_available", "driver_version"]
    search_fields = ["name", "hostname"]
    readonly_fields = [
        "hostname",
        "agent_version",
        "last_heartbeat_at",
        "nvml_available",
        "nvml_error",
        "driver_version",
    ]
    inlines = [NodeKeyInline, GpuInline]
    actions = ["revoke_keys"]

    @admin.action(description="Revoke every key of the selected nodes (their agents stop being accepted)")
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        count = NodeKey.objects.filter(node__in=queryset, revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(
            request, f"Revoked {count} key(s). Make new ones with manage.py create_node_key.", messages.INFO
        )


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    list_display = ["display_name", "url", "node", "scenario", "enabled", "up", "last_scrape_at", "last_error"]
    list_filter = ["enabled", "up", "node"]
    list_select_related = ["node", "scenario"]
    search_fields = ["name", "url"]
    raw_id_fields = ["scenario"]
    fields = ["node", "url", "name", "scenario", "enabled", "gpu_indices"]
    readonly_fields: list[str] = []


@admin.register(IngestDrop)
class IngestDropAdmin(admin.ModelAdmin):
    """What ingest refused, by node and reason: forged or misrouted batches show up here."""

    list_display = ["node_name", "reason", "count", "last_at", "last_detail"]
    list_filter = ["reason"]
    readonly_fields = ["node_name", "reason", "count", "last_at", "last_detail"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
