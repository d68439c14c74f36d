"""Endpoints read from an existing Prometheus: register them, and pull their vLLM series into the samples.

A pull asks the source's query API for each series kvdash keeps, over the window since the last stored point,
on the scrape interval's grid (``query_range``), plus ``vllm:cache_config_info`` (an instant query). The
points become agent-shaped entries and go through ``monitor.ingest.endpoint_entries_store``: the same checks,
sample rows and health columns as an agent's batch, so charts, the report and alerts read them unchanged.
Prometheus' own gaps stay gaps: a step with no point stores no row. Pulls overlap by two steps and inserts
ignore rows already stored, so a pull run twice writes nothing twice.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from monitor.ingest import IngestOutcome, endpoint_entries_store
from monitor.models import ENGINE_SAMPLE_VALUES, Endpoint, PrometheusSource, PrometheusTarget
from monitor.scrape.prometheus import PrometheusClient, PromSeries, selector_valid
from monitor.scrape.records import ScrapeError
from monitor.scrape.vllm import CACHE_CONFIG_INFO, COUNTERS, GAUGES, HISTOGRAMS, REQUEST_SUCCESS
from monitor.services import MonitorInputError, endpoint_register, endpoint_url_clean, node_name_clean

# The first pull of a target reads this far back; later ones start two steps before the last stored point.
BACKFILL_S = 600
# Never more than this in one pull (Prometheus refuses more than 11,000 points per series).
MAX_WINDOW_S = 3600
# A target whose newest point is older than this many steps is down (Prometheus ends a failed target's
# series with staleness markers, so a dead server shows as no points).
STALE_STEPS = 3

_HISTOGRAM_PARTS = {f"{key}_{part}": (key, part) for key in HISTOGRAMS for part in ("sum", "count")}


def _series_queries() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Sample column -> (aggregation by engine, exposed names, preferred first), from the scraper's tables so
    both readers know the same names (V1 and V0)."""
    queries: dict[str, tuple[str, tuple[str, ...]]] = {}
    for key, names in {**GAUGES, **COUNTERS}.items():
        if key in ENGINE_SAMPLE_VALUES:
            # max: several API-server processes export the gauge once each (pid label), most copies 0.
            queries[key] = ("max", names)
    queries["request_success_total"] = ("sum", (REQUEST_SUCCESS,))  # one series per finished_reason
    for column, (key, part) in _HISTOGRAM_PARTS.items():
        queries[column] = ("max", tuple(f"{base}_{part}" for base in HISTOGRAMS[key]))
    return queries


SERIES_QUERIES = _series_queries()


class PrometheusPullError(Exception):
    """A target that cannot be pulled at all (no such target, its source disabled)."""


@dataclass
class PullOutcome:
    target_id: int
    endpoint_id: int
    up: bool
    points: int = 0
    error: str = ""
    stored: IngestOutcome = field(default_factory=IngestOutcome)


def _instance_url(selector: str) -> str | None:
    found = re.search(r'\binstance\s*=\s*"([^"\\]+)"', selector)
    return f"http://{found.group(1)}" if found else None


@transaction.atomic
def prometheus_source_save(
    *, name: str, base_url: str, bearer_token: str | None = None, enabled: bool = True
) -> tuple[PrometheusSource, bool]:
    """Create or update the source called ``name``; a ``bearer_token`` of None keeps the stored one."""
    try:
        name = node_name_clean(name)
    except MonitorInputError:
        raise MonitorInputError({"name": "1-63 lowercase letters, digits, - or _"}) from None
    try:
        base_url = endpoint_url_clean(base_url)
    except MonitorInputError:
        raise MonitorInputError({"base_url": "an http(s) URL such as http://prometheus:9090"}) from None
    defaults: dict[str, Any] = {"base_url": base_url, "enabled": enabled}
    if bearer_token is not None:
        if len(bearer_token) > 1000 or any(ord(ch) < 33 for ch in bearer_token):
            raise MonitorInputError({"bearer_token": "at most 1000 printable characters, no spaces"})
        defaults["bearer_token"] = bearer_token
    return PrometheusSource.objects.update_or_create(name=name, defaults=defaults)


@transaction.atomic
def prometheus_endpoint_register(
    *,
    name: str,
    source: str,
    selector: str,
    node: str | None = None,
    url: str | None = None,
    scenario_id: int | None = None,
) -> tuple[PrometheusTarget, bool]:
    """Register (or update) an endpoint read from ``source`` through ``selector``. Its node defaults to the
    source's name and its URL to ``http://<instance>`` of the selector (a label for pages and /metrics only:
    nothing scrapes it)."""
    selector = (selector or "").strip()
    if not selector_valid(selector):
        raise MonitorInputError({"selector": 'label matchers in braces, e.g. {instance="10.0.0.7:8000"}'})
    source_row = PrometheusSource.objects.filter(name=source).first()
    if source_row is None:
        raise MonitorInputError({"source": f"no Prometheus source named {source!r}"})
    if url is None:
        url = _instance_url(selector) or f"{source_row.base_url}/graph?g0.expr={quote(selector, safe='')}"
    endpoint, _ = endpoint_register(
        url=url, node=node or source_row.name, name=name, scenario_id=scenario_id, gpu_indices=None
    )
    target, created = PrometheusTarget.objects.update_or_create(
        endpoint=endpoint, defaults={"source": source_row, "selector": selector}
    )
    return target, created


def _client(source: PrometheusSource) -> PrometheusClient:
    return PrometheusClient(
        base_url=source.base_url, bearer_token=source.bearer_token, timeout=settings.KVDASH_SCRAPE_TIMEOUT
    )


def _engine(labels: dict[str, str]) -> str:
    # V0 servers have no engine label: one engine, index 0 (as the scraper reads them).
    return labels.get("engine", "0") or "0"


def _range_values(
    client: PrometheusClient, selector: str, start: float, end: float, step: float
) -> dict[tuple[str, float], dict[str, float]]:
    """(engine, time) -> column -> value over the window; each column from its first name that has series."""
    points: dict[tuple[str, float], dict[str, float]] = {}
    for column, (aggregation, names) in SERIES_QUERIES.items():
        for name in names:
            series: list[PromSeries] = client.query_range(
                f"{aggregation} by (engine) ({name}{selector})", start=start, end=end, step=step
            )
            if series:
                break
        for one in series:
            engine = _engine(one.labels)
            for moment, value in one.points:
                points.setdefault((engine, moment), {})[column] = value
    return points


def _cache_config(client: PrometheusClient, selector: str, at: float) -> dict[str, dict[str, Any]]:
    """engine -> the allocation vLLM reports in ``cache_config_info``'s labels (as the agent sends them)."""
    configs: dict[str, dict[str, Any]] = {}
    for one in client.query(f"{CACHE_CONFIG_INFO}{selector}", at=at):
        labels = one.labels
        config: dict[str, Any] = {}
        for key in ("num_gpu_blocks", "block_size", "gpu_memory_utilization"):
            try:
                number = float(labels.get(key, ""))
            except ValueError:
                continue  # num_gpu_blocks is "None" until the engine has profiled memory
            if math.isfinite(number):
                config[key] = number
        if labels.get("cache_dtype"):
            config["cache_dtype"] = labels["cache_dtype"]
        prefix = {"true": True, "false": False}.get(labels.get("enable_prefix_caching", "").lower())
        if prefix is not None:
            config["enable_prefix_caching"] = prefix
        if labels.get("model_name"):
            config["model_name"] = labels["model_name"]
        configs.setdefault(_engine(labels), config)
    return configs


def _number(column: str, value: float) -> int | float:
    return value if column in ("kv_cache_usage", "ttft_sum", "itl_sum", "e2e_sum") else int(value)


def _entries(
    endpoint_id: int, points: dict[tuple[str, float], dict[str, float]], configs: dict[str, dict[str, Any]], ms: float
) -> list[dict[str, Any]]:
    by_time: dict[float, list[dict[str, Any]]] = {}
    for (engine, moment), values in sorted(points.items(), key=lambda item: (item[0][1], item[0][0])):
        config = configs.get(engine) or configs.get("0") or {}
        engine_entry: dict[str, Any] = {"engine": engine, **config}
        for column, value in values.items():
            if column in _HISTOGRAM_PARTS:
                engine_entry.setdefault("histogram_sums", {})[column] = _number(column, value)
            else:
                engine_entry[column] = _number(column, value)
        by_time.setdefault(moment, []).append(engine_entry)
    return [
        {"id": endpoint_id, "up": True, "error": None, "duration_ms": ms, "scraped_at": moment, "engines": engines}
        for moment, engines in sorted(by_time.items())
    ]


def _window(endpoint: Endpoint, now: float, step: int) -> tuple[float, float]:
    end = math.floor(now / step) * step
    if endpoint.last_success_at is not None:
        start = endpoint.last_success_at.timestamp() - 2 * step
    else:
        start = end - BACKFILL_S
    start = max(start, end - MAX_WINDOW_S)
    # On the epoch-aligned grid: every pull asks for the same instants, so overlaps are exact duplicates.
    return math.floor(start / step) * step, end


def prometheus_target_pull(*, target_id: int, client: PrometheusClient | None = None) -> PullOutcome:
    """Pull one target's window and store it; the source's failures become the endpoint's scrape health."""
    target = PrometheusTarget.objects.select_related("source", "endpoint").filter(pk=target_id).first()
    if target is None:
        raise PrometheusPullError(f"no Prometheus target {target_id}")
    source, endpoint = target.source, target.endpoint
    if not source.enabled or not endpoint.enabled:
        raise PrometheusPullError(f"target {target_id}: its source or endpoint is disabled")
    step = settings.KVDASH_SCRAPE_INTERVAL
    now = timezone.now().timestamp()
    start, end = _window(endpoint, now, step)
    client = client or _client(source)
    started = time.perf_counter()
    outcome = PullOutcome(target_id=target.pk, endpoint_id=endpoint.pk, up=False)
    try:
        points = _range_values(client, target.selector, start, end, step)
        configs = _cache_config(client, target.selector, end)
    except ScrapeError as error:
        outcome.error = f"Prometheus {source.name}: {error}"
        entries: list[dict[str, Any]] = []
    else:
        ms = round((time.perf_counter() - started) * 1000, 3)
        entries = _entries(endpoint.pk, points, configs, ms)
        outcome.points = len(points)
        newest = entries[-1]["scraped_at"] if entries else None
        if newest is None or newest < end - STALE_STEPS * step:
            outcome.error = f"Prometheus {source.name} has no recent samples for {target.selector}"[:500]
    if outcome.error:
        ms = round((time.perf_counter() - started) * 1000, 3)
        down = {"id": endpoint.pk, "up": False, "error": outcome.error, "duration_ms": ms, "scraped_at": now}
        entries.append({**down, "engines": []})
    outcome.up = not outcome.error
    outcome.stored = endpoint_entries_store(endpoint_id=endpoint.pk, entries=entries)
    return outcome


def prometheus_target_ids() -> list[int]:
    """The targets a pull round reads: enabled source, enabled endpoint."""
    return list(
        PrometheusTarget.objects.filter(source__enabled=True, endpoint__enabled=True)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
