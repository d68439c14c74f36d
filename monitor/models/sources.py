"""Endpoints read from an existing Prometheus (or any server with its HTTP query API) instead of an agent.

The central ``monitor.pull_prometheus`` task reads each target's vLLM series through the query API and
stores them as the agents' samples are stored, so charts, the report and alerts work on them unchanged.
"""

from __future__ import annotations

from django.db import models

from .core import Endpoint


class PrometheusSource(models.Model):
    """A Prometheus-compatible query API (Prometheus, Thanos, Mimir, VictoriaMetrics) kvdash reads from.
    The bearer token is sent as ``Authorization: Bearer``; it is never shown back by the API or the admin."""

    name = models.SlugField(max_length=63, unique=True)
    base_url = models.URLField(max_length=500, help_text="e.g. http://prometheus:9090 (the part before /api/v1/).")
    bearer_token = models.CharField(max_length=1000, blank=True)
    enabled = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class PrometheusTarget(models.Model):
    """Makes an endpoint Prometheus-sourced: its series are the ones ``selector`` picks on ``source``.
    Agents skip such endpoints (``selectors.scrape_plan``)."""

    endpoint = models.OneToOneField(Endpoint, on_delete=models.CASCADE, related_name="prometheus_target")
    source = models.ForeignKey(PrometheusSource, on_delete=models.PROTECT, related_name="targets")
    selector = models.CharField(
        max_length=500, help_text='Label matchers that pick one vLLM server, e.g. {instance="10.0.0.7:8000"}.'
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["source", "pk"]

    def __str__(self) -> str:
        return f"{self.source.name}{self.selector}"
