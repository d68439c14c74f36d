"""``GET /metrics``: kvdash's plans for Prometheus (``monitor/exporter.py``)."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from monitor.api.permissions import can_read_monitor
from monitor.exporter import metrics_registry


def _allowed(request: HttpRequest) -> bool:
    token = settings.KVDASH_METRICS_TOKEN
    if not token:
        return can_read_monitor(request.user)
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    # Constant time: the comparison must not tell a scraper how much of a guess was right.
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        response = HttpResponse("401 Unauthorized: send the token as Authorization: Bearer\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="kvdash metrics"'
        response["Content-Type"] = "text/plain; charset=utf-8"
        return response
    # The classic text format, which every Prometheus-compatible scraper reads.
    return HttpResponse(generate_latest(metrics_registry()), content_type=CONTENT_TYPE_LATEST)
