"""Central ingest: verify an agent's signed payload and store it.

Refused payloads and items are counted by reason (``IngestDrop``) and never raise: a bad batch must not
be retried forever. Database errors do raise, so the task retries with backoff and the batch waits in the
broker. Writes are idempotent: the sample tables' primary keys are (series, time) and inserts ignore
conflicts, so a batch delivered twice writes nothing twice.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import time
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from monitor.models import (
    ENGINE_SAMPLE_VALUES,
    Endpoint,
    EngineSample,
    Gpu,
    GpuSample,
    HistogramSample,
    IngestDrop,
    Node,
    NodeKey,
)
from monitor.partitions import partitions_ensure
from monitor.sample_writer import insert_ignoring, insert_statement, server_bound_cursor
from monitor.signing import payload_signature_valid

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 4 * 2**20
MAX_ENDPOINTS = 512
MAX_ENGINES = 64
MAX_GPUS = 64
# A sample stamped this far from the central clock is refused: a skewed agent clock would write into the
# wrong partition and confuse every chart.
MAX_CLOCK_SKEW = dt.timedelta(days=2)

_GAUGE_RANGES: dict[str, tuple[float, float]] = {"kv_cache_usage": (0.0, 1.0)}
_INT_COLUMNS = {
    name for name in ENGINE_SAMPLE_VALUES if name not in {"kv_cache_usage", "ttft_sum", "itl_sum", "e2e_sum"}
}
_HISTOGRAM_NAMES = ("ttft", "itl", "e2e")
_INT64_MAX = 2**63 - 1


@dataclass
class IngestOutcome:
    node: str | None = None
    refused: str | None = None
    engine_rows: int = 0
    gpu_rows: int = 0
    histogram_rows: int = 0
    endpoints: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str, count: int = 1) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + count


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _clean_value(name: str, value: Any) -> int | float | None:
    number = _finite(value)
    if number is None or number < 0:
        return None
    low, high = _GAUGE_RANGES.get(name, (0.0, math.inf))
    if not low <= number <= high:
        return None
    if name in _INT_COLUMNS:
        return int(number) if number <= _INT64_MAX else None
    return number


def _when(unix_seconds: Any, now: dt.datetime) -> dt.datetime | None:
    seconds = _finite(unix_seconds)
    if seconds is None:
        return None
    try:
        moment = dt.datetime.fromtimestamp(seconds, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment if abs(moment - now) <= MAX_CLOCK_SKEW else None


def _engine_index(value: Any) -> int | None:
    text = str(value)
    return int(text) if text.isdecimal() and int(text) < 32768 else None


def drops_record(*, node_name: str, dropped: dict[str, int], detail: str = "") -> None:
    """Add to the per-node, per-reason counters (in their own transaction: kept when the batch is not)."""
    now = timezone.now()
    for reason, count in dropped.items():
        row, _ = IngestDrop.objects.get_or_create(
            node_name=node_name[:63], reason=reason, defaults={"count": 0, "last_at": now}
        )
        IngestDrop.objects.filter(pk=row.pk).update(count=F("count") + count, last_at=now, last_detail=detail[:500])


def _refuse(outcome: IngestOutcome, node_name: str, reason: str, detail: str) -> IngestOutcome:
    outcome.refused = reason
    outcome.drop(reason)
    log.warning("ingest refused a payload from %s: %s (%s)", node_name, reason, detail)
    drops_record(node_name=node_name, dropped={reason: 1}, detail=detail)
    return outcome


# Per-process caches of what every batch looks up. A revoked key is refused within KEY_CACHE_S; an endpoint
# not in the cached set is looked up again before its entry is dropped.
KEY_CACHE_S = 30.0
ENDPOINT_CACHE_S = 10.0
_keys: dict[str, tuple[float, NodeKey | None]] = {}
_endpoints: dict[int, tuple[float, set[int]]] = {}
GPU_CACHE_S = 60.0
_gpus: dict[int, tuple[float, dict[int, Gpu]]] = {}


def _active_key(key_id: str) -> NodeKey | None:
    cached = _keys.get(key_id)
    if cached is not None and time.monotonic() - cached[0] < KEY_CACHE_S:
        return cached[1]
    key = (
        NodeKey.objects.select_related("node")
        .filter(key_id=key_id, revoked_at__isnull=True)
        .only("secret", "node__name", "node__id")
        .first()
    )
    if len(_keys) > 10_000:
        _keys.clear()
    _keys[key_id] = (time.monotonic(), key)
    return key


def _own_endpoints(node_id: int, *, fresh: bool = False) -> set[int]:
    cached = _endpoints.get(node_id)
    if not fresh and cached is not None and time.monotonic() - cached[0] < ENDPOINT_CACHE_S:
        return cached[1]
    own = set(Endpoint.objects.filter(node_id=node_id).values_list("pk", flat=True))
    _endpoints[node_id] = (time.monotonic(), own)
    return own


def _node_gpus(node_id: int) -> dict[int, Gpu]:
    # A node's GPUs change when one is swapped: a reading that differs is registered again and replaces
    # the cached row, so the cache needs no expiry of its own beyond bounding stale rows from other workers.
    cached = _gpus.get(node_id)
    if cached is None or time.monotonic() - cached[0] > GPU_CACHE_S:
        cached = (time.monotonic(), {gpu.index: gpu for gpu in Gpu.objects.filter(node_id=node_id)})
        _gpus[node_id] = cached
    return cached[1]


def ingest_caches_clear() -> None:
    """Forget cached keys, endpoint lists and GPUs (tests revoke keys and move endpoints within one process)."""
    _keys.clear()
    _endpoints.clear()
    _gpus.clear()


def ingest_signed(*, body: str, key_id: str, signature: str) -> IngestOutcome:
    """Verify and store one agent payload. Returns what was written and what was dropped, and why."""
    outcome = IngestOutcome()
    if not isinstance(body, str) or len(body) > MAX_BODY_BYTES:
        return _refuse(outcome, "?", "too_large", f"{len(body) if isinstance(body, str) else '?'} bytes")
    key = _active_key(str(key_id)[:32])
    if key is None:
        return _refuse(outcome, "?", "unknown_key", f"key id {str(key_id)[:32]!r}")
    node = key.node
    outcome.node = node.name
    if not payload_signature_valid(body=body, secret=key.secret, signature=str(signature)):
        return _refuse(outcome, node.name, "bad_signature", "HMAC does not match the body")
    try:
        payload = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:
        return _refuse(outcome, node.name, "malformed", str(error)[:200])
    if not isinstance(payload, dict):
        return _refuse(outcome, node.name, "malformed", "payload is not an object")
    if payload.get("node") != node.name:
        # Signed with this node's key but naming another node: never write for the other one.
        return _refuse(outcome, node.name, "wrong_node", f"payload names node {str(payload.get('node'))[:63]!r}")
    _store(node=node, payload=payload, outcome=outcome)
    if outcome.dropped:
        drops_record(node_name=node.name, dropped=outcome.dropped)
    return outcome


@dataclass
class _Rows:
    engines: list[EngineSample] = field(default_factory=list)
    histograms: list[HistogramSample] = field(default_factory=list)
    gpus: list[GpuSample] = field(default_factory=list)
    health: list[tuple[int, dict[str, Any], dt.datetime]] = field(default_factory=list)


def _endpoint_rows(entry: dict[str, Any], endpoint_id: int, now: dt.datetime, rows: _Rows, outcome: IngestOutcome):
    scraped_at = _when(entry.get("scraped_at"), now)
    if scraped_at is None:
        outcome.drop("bad_time")
        return
    up = entry.get("up") is True
    engines = entry.get("engines") if up else []
    if not isinstance(engines, list) or len(engines) > MAX_ENGINES:
        outcome.drop("malformed")
        return
    latest: dict[str, dict[str, Any]] = {}
    for engine_entry in engines:
        if not isinstance(engine_entry, dict):
            outcome.drop("malformed")
            continue
        engine = _engine_index(engine_entry.get("engine", "0"))
        if engine is None:
            outcome.drop("bad_engine")
            continue
        values: dict[str, Any] = {}
        for name in ENGINE_SAMPLE_VALUES:
            raw = engine_entry.get(name)
            if raw is None:
                raw = (engine_entry.get("histogram_sums") or {}).get(name)
            if raw is None:
                continue
            cleaned = _clean_value(name, raw)
            if cleaned is None:
                outcome.drop("bad_value")
                continue
            values[name] = cleaned
        rows.engines.append(EngineSample(endpoint_id=endpoint_id, engine=engine, time=scraped_at, **values))
        latest[str(engine)] = _latest_view(engine_entry, values)
        histograms = engine_entry.get("histograms")
        if isinstance(histograms, dict):
            _histogram_rows(histograms, endpoint_id, engine, scraped_at, rows, outcome)
    rows.health.append((endpoint_id, _health(entry, latest), scraped_at))


def _latest_view(engine_entry: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = {"engine": str(engine_entry.get("engine", "0"))[:8]}
    for name in ("model_name", "cache_dtype"):
        if isinstance(engine_entry.get(name), str):
            view[name] = engine_entry[name][:200]
    if isinstance(engine_entry.get("enable_prefix_caching"), bool):
        view["enable_prefix_caching"] = engine_entry["enable_prefix_caching"]
    utilization = _finite(engine_entry.get("gpu_memory_utilization"))
    if utilization is not None and 0 < utilization <= 1:
        view["gpu_memory_utilization"] = utilization
    view.update({name: value for name, value in values.items() if not name.startswith(("ttft", "itl", "e2e"))})
    return view


def _health(entry: dict[str, Any], latest: dict[str, dict[str, Any]]) -> dict[str, Any]:
    error = entry.get("error")
    rejected = entry.get("rejected") if isinstance(entry.get("rejected"), list) else []
    duration = _finite(entry.get("duration_ms"))
    return {
        "up": entry.get("up") is True,
        "error": str(error)[:500] if error else "",
        "duration_ms": duration,
        "latest": latest,
        "rejected": [str(reason)[:200] for reason in rejected[:20]],
    }


def _histogram_rows(histograms: dict[str, Any], endpoint_id: int, engine: int, when: dt.datetime, rows, outcome):
    for name in _HISTOGRAM_NAMES:
        histogram = histograms.get(name)
        if not isinstance(histogram, dict):
            continue
        bounds, counts = histogram.get("bounds"), histogram.get("counts")
        if (
            not isinstance(bounds, list)
            or not isinstance(counts, list)
            or len(bounds) != len(counts)
            or not 0 < len(bounds) <= 64
            or any(bound is not None and _finite(bound) is None for bound in bounds)
            or any(_finite(count) is None or count < 0 for count in counts)
        ):
            outcome.drop("bad_histogram")
            continue
        rows.histograms.append(
            # Floored to the minute: charts read buckets on whole-minute step boundaries (monitor.series).
            HistogramSample(
                endpoint_id=endpoint_id,
                engine=engine,
                name=name,
                time=when.replace(second=0, microsecond=0),
                bounds=bounds,
                counts=counts,
            )
        )


def _nvml_status(nvml: Any) -> dict[str, Any]:
    available = isinstance(nvml, dict) and nvml.get("available") is True
    error = str(nvml.get("error") or "")[:500] if isinstance(nvml, dict) else "no NVML report"
    return {
        "nvml_available": available,
        "nvml_error": "" if available else error,
        "driver_version": str(nvml.get("driver_version") or "")[:64] if isinstance(nvml, dict) else "",
    }


def _gpu_rows(node: Node, nvml: Any, now: dt.datetime, rows: _Rows, outcome: IngestOutcome) -> None:
    if not (isinstance(nvml, dict) and nvml.get("available") is True):
        return
    gpus = nvml.get("gpus")
    taken_at = _when(nvml.get("taken_at"), now) or now
    if not isinstance(gpus, list) or len(gpus) > MAX_GPUS:
        outcome.drop("malformed")
        return
    known = _node_gpus(node.pk)
    for reading in gpus:
        if not isinstance(reading, dict) or _engine_index(reading.get("index")) is None:
            outcome.drop("malformed")
            continue
        index = int(reading["index"])
        total = _clean_value("memory_total_bytes", reading.get("memory_total_bytes"))
        used = _clean_value("memory_used_bytes", reading.get("memory_used_bytes"))
        if total is None or used is None:
            outcome.drop("bad_value")
            continue
        gpu = known.get(index)
        uuid = str(reading.get("uuid") or "")[:96]
        name = str(reading.get("name") or "")[:200]
        if gpu is None or (gpu.uuid, gpu.name, gpu.memory_total_bytes) != (uuid, name, int(total)):
            # A new or swapped GPU: (re)registered; its samples so far stay under the same index row.
            gpu, _ = Gpu.objects.update_or_create(
                node=node,
                index=index,
                defaults={"uuid": uuid, "name": name, "memory_total_bytes": int(total), "last_seen_at": taken_at},
            )
            known[index] = gpu
        reserved = reading.get("memory_reserved_bytes")
        rows.gpus.append(
            GpuSample(
                gpu_id=gpu.pk,
                time=taken_at,
                memory_used_bytes=int(used),
                memory_reserved_bytes=_clean_value("memory_reserved_bytes", reserved) if reserved is not None else None,
                utilization_gpu_pct=_percent(reading.get("utilization_gpu_pct")),
                utilization_memory_pct=_percent(reading.get("utilization_memory_pct")),
            )
        )


def _percent(value: Any) -> float | None:
    number = _finite(value)
    return number if number is not None and 0 <= number <= 100 else None


def _store(*, node: Node, payload: dict[str, Any], outcome: IngestOutcome) -> None:
    now = timezone.now()
    entries = payload.get("endpoints", [])
    if not isinstance(entries, list) or len(entries) > MAX_ENDPOINTS:
        outcome.drop("malformed")
        entries = []
    own = _own_endpoints(node.pk)
    if any(isinstance(e, dict) and isinstance(e.get("id"), int) and e["id"] not in own for e in entries):
        own = _own_endpoints(node.pk, fresh=True)  # registered since the cache was filled?
    rows = _Rows()
    with transaction.atomic():
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), int):
                outcome.drop("malformed")
                continue
            if entry["id"] not in own:
                # Another node's endpoint (or one that does not exist): a key writes its own node only.
                outcome.drop("foreign_endpoint")
                continue
            _endpoint_rows(entry, entry["id"], now, rows, outcome)
        if "nvml" in payload:
            _gpu_rows(node, payload["nvml"], now, rows, outcome)
        if connection.vendor == "postgresql" and len({row[0] for row in rows.health}) == len(rows.health):
            _store_one_statement(node, payload, now, rows, outcome)
            return
        outcome.engine_rows = samples_write(EngineSample, rows.engines)
        outcome.histogram_rows = samples_write(HistogramSample, rows.histograms)
        outcome.gpu_rows = samples_write(GpuSample, rows.gpus)
        outcome.endpoints = health_apply(rows.health)
        _heartbeat(node, payload, now)


_BATCH_TABLES = (("engines", EngineSample), ("histograms", HistogramSample), ("gpus", GpuSample))


@cache
def _batch_sql() -> str:
    # Constant text (empty arrays insert nothing), so psycopg prepares it once per connection.
    parts = [f"{name} AS ({insert_statement(model, [])[0]})" for name, model in _BATCH_TABLES]
    parts.append(f"health AS ({_BULK_HEALTH_SQL})")
    return "WITH " + ", ".join(parts) + _NODE_HEARTBEAT_SQL


def _store_one_statement(node: Node, payload: dict[str, Any], now: dt.datetime, rows: _Rows, outcome) -> None:
    # A node's batch in one statement on PostgreSQL: the three inserts and the health update are CTEs of the
    # heartbeat UPDATE (each runs once, to completion). One round trip and one plan instead of five
    # statements doubled the rate of bench/ingest.py (docs/benchmarks.md).
    params: list[Any] = []
    for objs, (_, model) in zip((rows.engines, rows.histograms, rows.gpus), _BATCH_TABLES, strict=True):
        if objs:
            partitions_ensure(table=model._meta.db_table, days={obj.time.date() for obj in objs})
        params += insert_statement(model, objs)[1]
    params += _health_columns(rows.health)
    params += _heartbeat_params(node, payload, now)
    with server_bound_cursor() as cursor:
        cursor.execute(_batch_sql(), params)
    outcome.engine_rows, outcome.histogram_rows = len(rows.engines), len(rows.histograms)
    outcome.gpu_rows, outcome.endpoints = len(rows.gpus), len(rows.health)


_NODE_HEARTBEAT_SQL = """
UPDATE monitor_node SET last_heartbeat_at = %s, agent_version = %s, hostname = %s,
    nvml_available = COALESCE(%s, nvml_available), nvml_error = COALESCE(%s, nvml_error),
    driver_version = COALESCE(%s, driver_version)
WHERE id = %s
"""


def _heartbeat_changes(payload: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    """The node row's new values; the NVML fields only when the payload carries an NVML report."""
    changes: dict[str, Any] = {
        "last_heartbeat_at": now,
        "agent_version": str(payload.get("agent_version") or "")[:64],
        "hostname": str(payload.get("hostname") or "")[:255],
    }
    if "nvml" in payload:
        changes.update(_nvml_status(payload["nvml"]))
    return changes


def _heartbeat_params(node: Node, payload: dict[str, Any], now: dt.datetime) -> list[Any]:
    # In _NODE_HEARTBEAT_SQL's order; a missing NVML field is NULL, which COALESCE keeps as it was.
    changes = _heartbeat_changes(payload, now)
    names = ("last_heartbeat_at", "agent_version", "hostname", "nvml_available", "nvml_error", "driver_version")
    return [changes.get(name) for name in names] + [node.pk]


def _heartbeat(node: Node, payload: dict[str, Any], now: dt.datetime) -> None:
    Node.objects.filter(pk=node.pk).update(**_heartbeat_changes(payload, now))


def health_apply(health_rows: list[tuple[int, dict[str, Any], dt.datetime]]) -> int:
    """Move each endpoint's health to its scrape's, oldest scrape first. On PostgreSQL one UPDATE per round of
    distinct endpoints (a node's batch is one round); elsewhere one per endpoint."""
    pending = sorted(health_rows, key=lambda row: row[2])
    while pending:
        seen: set[int] = set()
        this_round, later = [], []
        for row in pending:
            (later if row[0] in seen else this_round).append(row)
            seen.add(row[0])
        if connection.vendor == "postgresql":
            _health_update_bulk(this_round)
        else:
            for endpoint_id, health, scraped_at in this_round:
                _health_update(endpoint_id, health, scraped_at)
        pending = later
    return len(health_rows)


_BULK_HEALTH_SQL = """
UPDATE monitor_endpoint AS e SET
    up = v.up,
    last_scrape_at = v.scraped_at,
    last_duration_ms = v.duration_ms,
    last_error = v.error,
    last_success_at = CASE WHEN v.up THEN v.scraped_at ELSE e.last_success_at END,
    consecutive_failures = CASE WHEN v.up THEN 0 ELSE e.consecutive_failures + 1 END,
    latest = CASE WHEN v.up THEN v.latest::jsonb ELSE e.latest END,
    rejected_total = e.rejected_total + v.rejected_count,
    last_rejected = CASE WHEN v.rejected_count > 0 THEN v.rejected ELSE e.last_rejected END
FROM unnest(%b::bigint[], %b::boolean[], %b::timestamptz[], %b::double precision[], %b::text[], %b::text[],
            %b::int[], %b::text[])
    AS v(id, up, scraped_at, duration_ms, error, latest, rejected_count, rejected)
WHERE e.id = v.id AND (e.last_scrape_at IS NULL OR e.last_scrape_at < v.scraped_at)
"""


def _health_columns(rows: list[tuple[int, dict[str, Any], dt.datetime]]) -> list[list[Any]]:
    columns: list[list[Any]] = [[] for _ in range(8)]
    for endpoint_id, health, scraped_at in rows:
        values = (
            endpoint_id,
            health["up"],
            scraped_at,
            health["duration_ms"],
            health["error"],
            json.dumps(health["latest"]),
            len(health["rejected"]),
            "; ".join(health["rejected"])[:500],
        )
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    return columns


def _health_update_bulk(rows: list[tuple[int, dict[str, Any], dt.datetime]]) -> None:
    # The same rule as _health_update (only a newer scrape moves the health), for a whole batch at once: one
    # constant statement with a column array each (prepared by psycopg after a few batches).
    with server_bound_cursor() as cursor:
        cursor.execute(_BULK_HEALTH_SQL, _health_columns(rows))


def _health_update(endpoint_id: int, health: dict[str, Any], scraped_at: dt.datetime) -> None:
    # Only a newer scrape moves the health: a batch redelivered late must not undo a fresher state.
    newer = Endpoint.objects.filter(pk=endpoint_id).filter(
        Q(last_scrape_at__isnull=True) | Q(last_scrape_at__lt=scraped_at)
    )
    changes: dict[str, Any] = {
        "up": health["up"],
        "last_scrape_at": scraped_at,
        "last_duration_ms": health["duration_ms"],
        "last_error": health["error"],
    }
    if health["up"]:
        changes.update(last_success_at=scraped_at, consecutive_failures=0, latest=health["latest"])
    else:
        changes["consecutive_failures"] = F("consecutive_failures") + 1
    if health["rejected"]:
        changes.update(
            rejected_total=F("rejected_total") + len(health["rejected"]),
            last_rejected="; ".join(health["rejected"])[:500],
        )
    newer.update(**changes)


def samples_write(model: type[EngineSample] | type[HistogramSample] | type[GpuSample], objs: list[Any]) -> int:
    """Insert sample rows, ignoring any (series, time) already stored; creates the day partitions first."""
    if not objs:
        return 0
    partitions_ensure(table=model._meta.db_table, days={obj.time.date() for obj in objs})
    insert_ignoring(model, objs)
    return len(objs)


def endpoint_entries_store(*, endpoint_id: int, entries: list[dict[str, Any]]) -> IngestOutcome:
    """Store one endpoint's entries shaped as an agent's (``endpoints[]`` of a payload) that came from a trusted
    central reader instead of a signed batch (a Prometheus source): the same checks, rows and health."""
    outcome = IngestOutcome()
    now = timezone.now()
    rows = _Rows()
    with transaction.atomic():
        for entry in entries:
            _endpoint_rows(entry, endpoint_id, now, rows, outcome)
        outcome.engine_rows = samples_write(EngineSample, rows.engines)
        outcome.histogram_rows = samples_write(HistogramSample, rows.histograms)
        outcome.endpoints = health_apply(rows.health)
    return outcome
