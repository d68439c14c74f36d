"""Reads of the monitor: what each agent should scrape, endpoint views, nodes."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.db.models import QuerySet
from django.utils import timezone

from monitor.models import Endpoint, Node

log = logging.getLogger(__name__)

# The last plan read, kept for when the database is away: scrapes go on and their batches wait in the
# broker for ingest (docs/monitor.md, "PostgreSQL unavailable").
_last_plan: dict[str, list[dict[str, Any]]] = {}
AGENT_SILENCE = dt.timedelta(minutes=5)


def scrape_plan() -> dict[str, list[dict[str, Any]]]:
    """Per node name, the enabled endpoints its agent scrapes ({"id", "url"}); every node is listed, so
    agents without endpoints still report NVML and heartbeat."""
    global _last_plan
    try:
        # A node that only lists Prometheus-sourced endpoints and has no key runs no agent: a scrape queued for it
        # would wait in the broker forever (expired tasks are dropped only when a worker takes them).
        keyless_prometheus = Node.objects.filter(endpoints__prometheus_target__isnull=False, keys__isnull=True)
        # Only agents heard from lately get scrapes: one that never started, or left long ago, would find
        # thousands of expired messages on its queue (an agent says hello when it starts, and is back at once).
        alive = Node.objects.exclude(pk__in=keyless_prometheus.values("pk")).filter(
            last_heartbeat_at__gte=timezone.now()
            - max(AGENT_SILENCE, 10 * dt.timedelta(seconds=settings.KVDASH_SCRAPE_INTERVAL))
        )
        plan: dict[str, list[dict[str, Any]]] = {name: [] for name in alive.values_list("name", flat=True)}
        for endpoint_id, url, node_name in Endpoint.objects.filter(
            enabled=True, prometheus_target__isnull=True, node__in=alive
        ).values_list("pk", "url", "node__name"):
            plan.setdefault(node_name, []).append({"id": endpoint_id, "url": url})
    except DatabaseError:
        log.warning("database unavailable: scraping with the last known endpoints (%d nodes)", len(_last_plan))
        return _last_plan
    _last_plan = plan
    return plan


def endpoint_queryset() -> QuerySet[Endpoint]:
    return Endpoint.objects.select_related("node", "scenario", "scenario__model", "scenario__gpu").order_by("pk")


def node_queryset() -> QuerySet[Node]:
    return Node.objects.prefetch_related("gpus").order_by("name")
