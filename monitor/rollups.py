"""1-minute and 1-hour rollups of the raw samples, and retention.

A rollup run recomputes whole buckets and upserts them, so running it twice, or again after late samples
arrived, gives the same rows. Counter increases follow Prometheus' ``increase()``: a value lower than the
previous one is a restart, and the new value is the increase since it.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from monitor.models import EngineRollup, EngineSample, GpuRollup, GpuSample, HistogramSample
from monitor.partitions import is_partitioned, partitions_drop_before, partitions_ensure
from monitor.rollups_sql import COUNTERS, rollup_hours_sql, rollup_minutes_sql

MINUTE = 60
HOUR = 3600
# Two samples further apart than this are not joined into an increase (the gap hides what happened).
COUNTER_LOOKBACK_S = 300

GAUGES = ("kv_cache_usage", "num_requests_running", "num_requests_waiting")


def counter_increase(previous: float | None, current: float | None) -> float | None:
    if previous is None or current is None:
        return None
    return current - previous if current >= previous else current


def bucket_start(moment: dt.datetime, resolution: int) -> dt.datetime:
    seconds = int(moment.timestamp()) // resolution * resolution
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


@dataclass
class _Bucket:
    samples: int = 0
    sums: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    maxes: dict[str, float] = field(default_factory=dict)
    incs: dict[str, float] = field(default_factory=dict)
    covered: float = 0.0
    blocks: int | None = None
    block_size: int | None = None

    def gauge(self, name: str, value: float | None) -> None:
        if value is None:
            return
        self.sums[name] += value
        self.counts[name] += 1
        self.maxes[name] = max(self.maxes.get(name, value), value)

    def mean(self, name: str) -> float | None:
        return self.sums[name] / self.counts[name] if self.counts.get(name) else None


_RAW_COLUMNS = ("endpoint_id", "engine", "time", *GAUGES, "num_gpu_blocks", "block_size", *(c for c, _ in COUNTERS))


def _raw_buckets(rows: Iterable[tuple[Any, ...]], start: dt.datetime) -> dict[tuple[int, int, dt.datetime], _Bucket]:
    """Minute buckets from raw rows ordered by series and time; rows before ``start`` only seed counters."""
    buckets: dict[tuple[int, int, dt.datetime], _Bucket] = {}
    previous: dict[str, Any] | None = None
    for row in rows:
        sample = dict(zip(_RAW_COLUMNS, row, strict=True))
        series = (sample["endpoint_id"], sample["engine"])
        if previous is not None and (previous["endpoint_id"], previous["engine"]) != series:
            previous = None
        if sample["time"] >= start:
            key = (*series, bucket_start(sample["time"], MINUTE))
            bucket = buckets.setdefault(key, _Bucket())
            bucket.samples += 1
            for name in GAUGES:
                bucket.gauge(name, sample[name])
            bucket.blocks = sample["num_gpu_blocks"] if sample["num_gpu_blocks"] is not None else bucket.blocks
            bucket.block_size = sample["block_size"] if sample["block_size"] is not None else bucket.block_size
            gap = (sample["time"] - previous["time"]).total_seconds() if previous else None
            if previous is not None and gap is not None and 0 < gap <= COUNTER_LOOKBACK_S:
                bucket.covered += gap
                for column, inc_name in COUNTERS:
                    increase = counter_increase(previous[column], sample[column])
                    if increase is not None:
                        bucket.incs[inc_name] = bucket.incs.get(inc_name, 0.0) + increase
        previous = sample
    return buckets


def _engine_rollup_row(key: tuple[int, int, dt.datetime], bucket: _Bucket, resolution: int) -> EngineRollup:
    endpoint_id, engine, time = key
    running_max = bucket.maxes.get("num_requests_running")
    waiting_max = bucket.maxes.get("num_requests_waiting")
    return EngineRollup(
        resolution=resolution,
        endpoint_id=endpoint_id,
        engine=engine,
        time=time,
        samples=bucket.samples,
        kv_cache_usage_avg=bucket.mean("kv_cache_usage"),
        kv_cache_usage_max=bucket.maxes.get("kv_cache_usage"),
        num_requests_running_avg=bucket.mean("num_requests_running"),
        num_requests_running_max=int(running_max) if running_max is not None else None,
        num_requests_waiting_avg=bucket.mean("num_requests_waiting"),
        num_requests_waiting_max=int(waiting_max) if waiting_max is not None else None,
        num_gpu_blocks=bucket.blocks,
        block_size=bucket.block_size,
        covered_seconds=bucket.covered or None,
        **{inc_name: bucket.incs.get(inc_name) for _, inc_name in COUNTERS},
    )


_ROLLUP_UPDATE_FIELDS = [
    f.name
    for f in EngineRollup._meta.concrete_fields
    if f.name not in {"resolution", "endpoint", "engine", "time"} and not f.primary_key
]
_GPU_ROLLUP_UPDATE_FIELDS = ["samples", "memory_used_bytes_avg", "memory_used_bytes_max", "utilization_gpu_pct_avg"]


def _upsert(model: type[EngineRollup] | type[GpuRollup], rows: list[Any], unique: list[str], update: list[str]) -> int:
    if rows:
        model.objects.bulk_create(
            rows, update_conflicts=True, unique_fields=unique, update_fields=update, batch_size=1000
        )
    return len(rows)


def rollup_minutes(*, start: dt.datetime, end: dt.datetime) -> int:
    """Recompute the 1-minute rollups of every series for whole minutes in [start, end)."""
    start, end = bucket_start(start, MINUTE), bucket_start(end, MINUTE)
    if end <= start:
        return 0
    if connection.vendor == "postgresql":
        with transaction.atomic():
            return rollup_minutes_sql(start=start, end=end, lookback_s=COUNTER_LOOKBACK_S)
    rows = (
        EngineSample.objects.filter(time__gte=start - dt.timedelta(seconds=COUNTER_LOOKBACK_S), time__lt=end)
        .order_by("endpoint_id", "engine", "time")
        .values_list(*_RAW_COLUMNS)
    )
    buckets = _raw_buckets(rows.iterator(chunk_size=5000), start)
    engine_rows = [_engine_rollup_row(key, bucket, MINUTE) for key, bucket in buckets.items()]
    gpu_rows = _gpu_rollups(
        GpuSample.objects.filter(time__gte=start, time__lt=end).values_list(
            "gpu_id", "time", "memory_used_bytes", "utilization_gpu_pct"
        ),
        MINUTE,
    )
    with transaction.atomic():
        count = _upsert(EngineRollup, engine_rows, ["resolution", "endpoint", "engine", "time"], _ROLLUP_UPDATE_FIELDS)
        _upsert(GpuRollup, gpu_rows, ["resolution", "gpu", "time"], _GPU_ROLLUP_UPDATE_FIELDS)
    return count


def _gpu_rollups(rows: Iterable[tuple[Any, ...]], resolution: int) -> list[GpuRollup]:
    buckets: dict[tuple[int, dt.datetime], list[tuple[float, float | None]]] = defaultdict(list)
    for gpu_id, time, used, utilization in rows:
        buckets[(gpu_id, bucket_start(time, resolution))].append((used, utilization))
    result = []
    for (gpu_id, time), values in buckets.items():
        utilizations = [u for _, u in values if u is not None]
        result.append(
            GpuRollup(
                resolution=resolution,
                gpu_id=gpu_id,
                time=time,
                samples=len(values),
                memory_used_bytes_avg=sum(v for v, _ in values) / len(values),
                memory_used_bytes_max=int(max(v for v, _ in values)),
                utilization_gpu_pct_avg=sum(utilizations) / len(utilizations) if utilizations else None,
            )
        )
    return result


def rollup_hours(*, start: dt.datetime, end: dt.datetime) -> int:
    """Recompute the 1-hour rollups for whole hours in [start, end) from the 1-minute ones."""
    start, end = bucket_start(start, HOUR), bucket_start(end, HOUR)
    if end <= start:
        return 0
    if connection.vendor == "postgresql":
        with transaction.atomic():
            return rollup_hours_sql(start=start, end=end)
    minutes = EngineRollup.objects.filter(resolution=MINUTE, time__gte=start, time__lt=end)
    grouped: dict[tuple[int, int, dt.datetime], list[EngineRollup]] = defaultdict(list)
    for row in minutes.iterator(chunk_size=5000):
        grouped[(row.endpoint_id, row.engine, bucket_start(row.time, HOUR))].append(row)
    hour_rows = [_merge(key, rows) for key, rows in grouped.items()]
    gpu_grouped: dict[tuple[int, dt.datetime], list[GpuRollup]] = defaultdict(list)
    for row in GpuRollup.objects.filter(resolution=MINUTE, time__gte=start, time__lt=end).iterator(chunk_size=5000):
        gpu_grouped[(row.gpu_id, bucket_start(row.time, HOUR))].append(row)
    gpu_rows = [
        GpuRollup(
            resolution=HOUR,
            gpu_id=gpu_id,
            time=time,
            samples=sum(r.samples for r in rows),
            memory_used_bytes_avg=sum(r.memory_used_bytes_avg * r.samples for r in rows) / sum(r.samples for r in rows),
            memory_used_bytes_max=max(r.memory_used_bytes_max for r in rows),
            utilization_gpu_pct_avg=_weighted([(r.utilization_gpu_pct_avg, r.samples) for r in rows]),
        )
        for (gpu_id, time), rows in gpu_grouped.items()
    ]
    with transaction.atomic():
        count = _upsert(EngineRollup, hour_rows, ["resolution", "endpoint", "engine", "time"], _ROLLUP_UPDATE_FIELDS)
        _upsert(GpuRollup, gpu_rows, ["resolution", "gpu", "time"], _GPU_ROLLUP_UPDATE_FIELDS)
    return count


def _weighted(pairs: list[tuple[float | None, int]]) -> float | None:
    known = [(value, weight) for value, weight in pairs if value is not None and weight]
    total = sum(weight for _, weight in known)
    return sum(value * weight for value, weight in known) / total if total else None


def _max(values: Iterable[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return max(known) if known else None


def _sum(values: Iterable[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def _merge(key: tuple[int, int, dt.datetime], rows: list[EngineRollup]) -> EngineRollup:
    endpoint_id, engine, time = key
    last = max(rows, key=lambda r: r.time)
    running_max, waiting_max = (
        _max(r.num_requests_running_max for r in rows),
        _max(r.num_requests_waiting_max for r in rows),
    )
    return EngineRollup(
        resolution=HOUR,
        endpoint_id=endpoint_id,
        engine=engine,
        time=time,
        samples=sum(r.samples for r in rows),
        kv_cache_usage_avg=_weighted([(r.kv_cache_usage_avg, r.samples) for r in rows]),
        kv_cache_usage_max=_max(r.kv_cache_usage_max for r in rows),
        num_requests_running_avg=_weighted([(r.num_requests_running_avg, r.samples) for r in rows]),
        num_requests_running_max=int(running_max) if running_max is not None else None,
        num_requests_waiting_avg=_weighted([(r.num_requests_waiting_avg, r.samples) for r in rows]),
        num_requests_waiting_max=int(waiting_max) if waiting_max is not None else None,
        num_gpu_blocks=last.num_gpu_blocks,
        block_size=last.block_size,
        covered_seconds=_sum(r.covered_seconds for r in rows),
        **{inc: _sum(getattr(r, inc) for r in rows) for _, inc in COUNTERS},
    )


def rollup_recent(*, now: dt.datetime | None = None, minutes_back: int = 5) -> dict[str, int]:
    """The task's work: the last few minutes (samples arrive a scrape late, or later after an outage) and
    the current and previous hour."""
    now = now or timezone.now()
    minutes = rollup_minutes(start=now - dt.timedelta(minutes=minutes_back), end=now)
    hours = rollup_hours(start=now - dt.timedelta(hours=1), end=now + dt.timedelta(hours=1))
    return {"minute_rows": minutes, "hour_rows": hours}


def rollup_catch_up(*, now: dt.datetime | None = None, hours_back: int = 3) -> dict[str, int]:
    """Recompute the last few hours: samples that ingest stored late (after a database outage, within the
    retries' ~25 minutes, or a backlog) get into the rollups here."""
    now = now or timezone.now()
    start = now - dt.timedelta(hours=hours_back)
    minutes = 0
    while start < now:
        chunk_end = min(now, start + dt.timedelta(hours=1))
        minutes += rollup_minutes(start=start, end=chunk_end)
        start = chunk_end
    hours = rollup_hours(start=now - dt.timedelta(hours=hours_back), end=now + dt.timedelta(hours=1))
    return {"minute_rows": minutes, "hour_rows": hours}


def retention_apply(*, now: dt.datetime | None = None) -> dict[str, int]:
    """Drop raw partitions past their retention (delete rows on SQLite) and old rollups; create the next
    days' partitions so ingest at midnight finds them ready."""
    now = now or timezone.now()
    retention_days = {
        EngineSample: settings.KVDASH_RAW_RETENTION_DAYS,
        GpuSample: settings.KVDASH_GPU_RETENTION_DAYS,
        HistogramSample: settings.KVDASH_HISTOGRAM_RETENTION_DAYS,
    }
    removed: dict[str, int] = {}
    for model, days in retention_days.items():
        table, cutoff = model._meta.db_table, now - dt.timedelta(days=days)
        if is_partitioned():
            removed[table] = len(partitions_drop_before(table=table, cutoff=cutoff.date()))
            partitions_ensure(table=table, days=[(now + dt.timedelta(days=d)).date() for d in range(3)])
        else:
            removed[table] = model.objects.filter(time__lt=cutoff).delete()[0]
    for resolution, days in (
        (MINUTE, settings.KVDASH_ROLLUP_1M_RETENTION_DAYS),
        (HOUR, settings.KVDASH_ROLLUP_1H_RETENTION_DAYS),
    ):
        cutoff = now - dt.timedelta(days=days)
        removed[f"engine_rollup_{resolution}"] = EngineRollup.objects.filter(
            resolution=resolution, time__lt=cutoff
        ).delete()[0]
        removed[f"gpu_rollup_{resolution}"] = GpuRollup.objects.filter(resolution=resolution, time__lt=cutoff).delete()[
            0
        ]
    return removed
