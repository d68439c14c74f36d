"""kvdash's own ``/metrics``: the plans (and scrape health and alert states) of every endpoint in the Prometheus
text format, so Grafana users can draw the plan over vLLM's own panels.

A custom collector reads the database at each scrape (nothing is kept in process globals: every web worker
answers the same). Labels: ``endpoint`` (display name), ``endpoint_id``, ``node``, ``model`` (the scenario's
model, or the model the server reports), ``scenario`` (name) and ``vllm_instance`` (host:port of the server's
URL: the ``instance`` label Prometheus gives vLLM's own series; not named ``instance`` because Prometheus
would rename it to ``exported_instance`` when it scrapes kvdash).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from urllib.parse import urlsplit

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from monitor.models import Alert, Endpoint
from monitor.planned import endpoint_planned

log = logging.getLogger(__name__)

LABELS = ["endpoint", "endpoint_id", "node", "model", "scenario", "vllm_instance"]
PLANNED = (
    ("kv_tokens", "kvdash_endpoint_planned_kv_tokens", "KV cache tokens the plan allocates per engine."),
    ("num_gpu_blocks", "kvdash_endpoint_planned_num_gpu_blocks", "KV cache blocks the plan allocates per engine."),
    (
        "max_concurrency",
        "kvdash_endpoint_planned_max_concurrency",
        "Requests of the planned context length the plan holds at once per engine.",
    ),
)


def _instance(url: str) -> str:
    try:
        return urlsplit(url).netloc
    except ValueError:
        return ""


def _model(endpoint: Endpoint) -> str:
    if endpoint.scenario is not None:
        model = endpoint.scenario.model
        return model.hf_id or model.slug
    latest = endpoint.latest if isinstance(endpoint.latest, dict) else {}
    names = [engine.get("model_name") for engine in latest.values() if isinstance(engine, dict)]
    return next((name for name in names if isinstance(name, str)), "")


def _labels(endpoint: Endpoint) -> list[str]:
    return [
        endpoint.display_name,
        str(endpoint.pk),
        endpoint.node.name,
        _model(endpoint),
        endpoint.scenario.name if endpoint.scenario is not None else "",
        _instance(endpoint.url),
    ]


class PlanCollector(Collector):
    """Reads endpoints, their plans and open alerts at each collection."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        planned = {key: GaugeMetricFamily(name, help_text, labels=LABELS) for key, name, help_text in PLANNED}
        up = GaugeMetricFamily(
            "kvdash_endpoint_up",
            "1 if kvdash's latest scrape or pull of the endpoint succeeded, else 0.",
            labels=LABELS,
        )
        endpoints = Endpoint.objects.filter(enabled=True).select_related("node", "scenario", "scenario__model")
        for endpoint in endpoints.order_by("pk"):
            labels = _labels(endpoint)
            if endpoint.up is not None:
                up.add_metric(labels, 1.0 if endpoint.up else 0.0)
            plan = endpoint_planned(endpoint=endpoint) if endpoint.scenario is not None else None
            if plan is None or "error" in plan:
                continue
            for key, family in planned.items():
                if plan.get(key) is not None:
                    family.add_metric(labels, float(plan[key]))
        yield from planned.values()
        yield up
        yield self._alerts()

    def _alerts(self) -> GaugeMetricFamily:
        firing = GaugeMetricFamily(
            "kvdash_alert_firing",
            "1 for each open alert (firing or acknowledged) by rule and endpoint.",
            labels=["rule", "severity", "state", "endpoint", "endpoint_id"],
        )
        alerts = Alert.objects.filter(resolved_at__isnull=True).select_related("rule", "endpoint").order_by("pk")
        for alert in alerts:
            labels = [alert.rule.name, alert.rule.severity, alert.state, alert.endpoint.display_name]
            firing.add_metric([*labels, str(alert.endpoint_id)], 1.0)
        return firing


def metrics_registry() -> CollectorRegistry:
    """A registry holding only kvdash's collector (not the process metrics of the default registry: with
    several web workers those would describe whichever worker answered)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PlanCollector())
    return registry
