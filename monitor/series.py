"""Time series for charts and the API: one endpoint's metric over a range, on a step grid.

The source follows the step, as Prometheus recording rules would: raw 10 s rows for steps under a minute,
1-minute rollups up to an hour, 1-hour rollups beyond, and never more than ``MAX_POINTS`` points. Each point
covers [t, t + step); a step with no sample is ``None`` (a gap, never a zero). Engines of one endpoint are
combined: KV usage by the maximum (the engine nearest to running out), counts and rates by the sum.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models.expressions import RawSQL

from monitor.models import Endpoint, EngineRollup, EngineSample, GpuRollup, GpuSample, HistogramSample
from monitor.rollups import COUNTER_LOOKBACK_S, HOUR, MINUTE, counter_increase

MAX_POINTS = 1000
MAX_RANGE = dt.timedelta(days=400)
TAIL_FROM_RAW = dt.timedelta(hours=3)

GAUGE_METRICS = {
    "kv_cache_usage": ("kv_cache_usage", "kv_cache_usage_avg", max),
    "num_requests_running": ("num_requests_running", "num_requests_running_avg", sum),
    "num_requests_waiting": ("num_requests_waiting", "num_requests_waiting_avg", sum),
}
# rate metrics: (raw counter, rollup increase)
RATE_METRICS = {
    "preemptions_per_s": ("num_preemptions_total", "preemptions_inc"),
    "prompt_tokens_per_s": ("prompt_tokens_total", "prompt_tokens_inc"),
    "generation_tokens_per_s": ("generation_tokens_total", "generation_tokens_inc"),
}
# ratio metrics: (numerator counter, denominator counter) in raw and rollup names
RATIO_METRICS = {
    "prefix_cache_hit_rate": (
        ("prefix_cache_hits_total", "prefix_cache_queries_total"),
        ("prefix_cache_hits_inc", "prefix_cache_queries_inc"),
    ),
    "ttft_mean_seconds": (("ttft_sum", "ttft_count"), ("ttft_sum_inc", "ttft_count_inc")),
    "itl_mean_seconds": (("itl_sum", "itl_count"), ("itl_sum_inc", "itl_count_inc")),
}
QUANTILE_METRICS = {f"{name}_p{q}_seconds": (name, q / 100) for name in ("ttft", "itl", "e2e") for q in (50, 90, 99)}
OTHER_METRICS = ("kv_tokens_used", "kv_tokens_capacity", "gpu_memory_used_bytes")
METRICS: tuple[str, ...] = (
    *GAUGE_METRICS,
    *RATE_METRICS,
    *RATIO_METRICS,
    *OTHER_METRICS,
    *QUANTILE_METRICS,
)


class SeriesInputError(ValueError):
    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class Series:
    metric: str
    step: int
    source: str
    points: list[tuple[int, float | None]]


def series_window(*, start: dt.datetime, end: dt.datetime, step: int | None) -> tuple[int, int, str]:
    """(aligned start in unix seconds, step, source) for a requested window; raises SeriesInputError."""
    if end <= start:
        raise SeriesInputError({"end": "must be after start"})
    if end - start > MAX_RANGE:
        raise SeriesInputError({"start": f"a range is at most {MAX_RANGE.days} days"})
    span = (end - start).total_seconds()
    # Without a step, none finer than the scrape interval: finer steps would be mostly gaps.
    wanted = step if step is not None else settings.KVDASH_SCRAPE_INTERVAL
    if wanted < 0:
        raise SeriesInputError({"step": "must be a positive number of seconds"})
    step = max(wanted, math.ceil(span / MAX_POINTS), 1)
    if step >= HOUR / 6:
        # Steps of 10 minutes or more (ranges past ~7 days at 1,000 points) read the hourly rollups.
        source, step = "1h", math.ceil(step / HOUR) * HOUR
    elif step >= MINUTE / 3:
        # Steps of 20 s or more read the minute rollups: a third of the rows at most a third coarser.
        source, step = "1m", math.ceil(step / MINUTE) * MINUTE
    else:
        source = "raw"
    aligned = int(start.timestamp()) // step * step
    return aligned, step, source


def _grid(aligned: int, step: int, end: dt.datetime) -> list[int]:
    last = int(end.timestamp())
    return list(range(aligned, last + 1, step))[: MAX_POINTS + 1]


def _epoch_modulo(step: int) -> RawSQL:
    if connection.vendor == "postgresql":
        return RawSQL('(EXTRACT(EPOCH FROM "monitor_histogramsample"."time")::bigint %% %s)', (step,))
    return RawSQL("""(CAST(strftime('%%s', "monitor_histogramsample"."time") AS INTEGER) %% %s)""", (step,))


class _Rows:
    """Rows of one endpoint read once per request: several metrics of one chart page share them."""

    def __init__(self, endpoint: Endpoint, engine: int | None) -> None:
        self.endpoint = endpoint
        self.engine = engine
        self._cache: dict[tuple[Any, ...], Any] = {}

    def raw(self, lo: dt.datetime, hi: dt.datetime) -> list[dict[str, Any]]:
        key = ("raw", lo, hi)
        if key not in self._cache:
            lookback = dt.timedelta(seconds=COUNTER_LOOKBACK_S)
            self._cache[key] = list(
                EngineSample.objects.filter(
                    endpoint=self.endpoint, time__gte=lo - lookback, time__lt=hi, **_engine_filter(self.engine)
                )
                .order_by("engine", "time")
                .values()
            )
        return self._cache[key]

    def histograms(self, name: str, lo: dt.datetime, hi: dt.datetime, step: int) -> list[tuple[Any, ...]]:
        key = ("histograms", name, lo, hi, step)
        if key not in self._cache:
            rows = HistogramSample.objects.filter(endpoint=self.endpoint, name=name, **_engine_filter(self.engine))
            rows = rows.filter(time__gte=lo, time__lte=hi)
            if step > MINUTE:
                # Only the rows on step boundaries: the database skips the rest (an IN list of a thousand
                # datetimes costs more to build than to run).
                rows = rows.annotate(phase=_epoch_modulo(step)).filter(phase=0)
            self._cache[key] = list(rows.order_by("engine", "time").values_list("engine", "time", "bounds", "counts"))
        return self._cache[key]

    def histogram_windows(self, name: str, lo: dt.datetime, hi: dt.datetime, step: int):
        key = ("windows", name, lo, hi, step)
        if key not in self._cache:
            self._cache[key] = _histogram_windows(self.histograms(name, lo, hi, step), lo, step)
        return self._cache[key]

    def rollups(self, resolution: int, lo: dt.datetime, hi: dt.datetime) -> list[dict[str, Any]]:
        key = ("rollup", resolution, lo, hi)
        if key not in self._cache:
            self._cache[key] = list(
                EngineRollup.objects.filter(
                    endpoint=self.endpoint,
                    resolution=resolution,
                    time__gte=lo,
                    time__lt=hi,
                    **_engine_filter(self.engine),
                ).values()
            )
        return self._cache[key]


def endpoint_series(
    *,
    endpoint: Endpoint,
    metric: str,
    start: dt.datetime,
    end: dt.datetime,
    step: int | None,
    engine: int | None = None,
) -> Series:
    return endpoint_series_many(endpoint=endpoint, metrics=[metric], start=start, end=end, step=step, engine=engine)[
        metric
    ]


def endpoint_series_many(
    *,
    endpoint: Endpoint,
    metrics: list[str],
    start: dt.datetime,
    end: dt.datetime,
    step: int | None,
    engine: int | None = None,
) -> dict[str, Series]:
    """Several metrics of one endpoint on one grid, reading each table once."""
    for metric in metrics:
        if metric not in METRICS:
            raise SeriesInputError({"metric": f"unknown metric {metric[:60]!r}; one of: {', '.join(METRICS)}"})
    aligned, step, source = series_window(start=start, end=end, step=step)
    grid = _grid(aligned, step, end)
    lo = dt.datetime.fromtimestamp(grid[0], tz=dt.UTC)
    hi = dt.datetime.fromtimestamp(grid[-1] + step, tz=dt.UTC)
    rows = _Rows(endpoint, engine)
    result = {}
    for metric in metrics:
        if metric == "gpu_memory_used_bytes":
            values = _gpu_memory(endpoint, lo, hi, step, source)
        elif metric in QUANTILE_METRICS:
            # Buckets arrive once a minute: quantiles get a grid of whole minutes of their own.
            name, quantile = QUANTILE_METRICS[metric]
            q_step = math.ceil(max(step, MINUTE) / MINUTE) * MINUTE
            q_grid = _grid(int(lo.timestamp()) // q_step * q_step, q_step, end)
            q_lo = dt.datetime.fromtimestamp(q_grid[0], tz=dt.UTC)
            q_hi = dt.datetime.fromtimestamp(q_grid[-1] + q_step, tz=dt.UTC)
            values = _quantiles(rows, name, quantile, q_lo, q_hi, q_step)
            result[metric] = Series(
                metric=metric, step=q_step, source="1m", points=[(t, values.get(t)) for t in q_grid]
            )
            continue
        elif source == "raw":
            values = _from_raw(rows.raw(lo, hi), metric, lo, step)
        else:
            resolution = MINUTE if source == "1m" else HOUR
            rollup_rows = rows.rollups(resolution, lo, hi)
            values = _from_rollups(rollup_rows, metric, step)
            tail_start = _tail_start(rollup_rows, lo, hi, step, resolution)
            if tail_start < hi:
                values.update(_from_raw(rows.raw(tail_start, hi), metric, tail_start, step))
        result[metric] = Series(metric=metric, step=step, source=source, points=[(t, values.get(t)) for t in grid])
    return result


def _slot(moment: dt.datetime, step: int) -> int:
    return int(moment.timestamp()) // step * step


def _combine(per_engine: dict[int, float], how: Any) -> float | None:
    return how(per_engine.values()) if per_engine else None


def _engine_filter(engine: int | None) -> dict[str, int]:
    return {} if engine is None else {"engine": engine}


def _from_raw(rows: list[dict[str, Any]], metric: str, lo: dt.datetime, step: int) -> dict[int, float]:
    # slot -> engine -> accumulated
    gauge_sums: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    incs: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    previous: dict[str, Any] | None = None
    for row in rows:
        if previous is not None and previous["engine"] != row["engine"]:
            previous = None
        if row["time"] >= lo:
            slot, row_engine = _slot(row["time"], step), row["engine"]
            if metric in GAUGE_METRICS or metric in ("kv_tokens_used", "kv_tokens_capacity"):
                value = _raw_gauge(metric, row)
                if value is not None:
                    acc = gauge_sums[slot][row_engine]
                    acc[0] += value
                    acc[1] += 1
            elif previous is not None:
                gap = (row["time"] - previous["time"]).total_seconds()
                if 0 < gap <= COUNTER_LOOKBACK_S:
                    if metric in RATE_METRICS:
                        increase = counter_increase(previous[RATE_METRICS[metric][0]], row[RATE_METRICS[metric][0]])
                        if increase is not None:
                            acc = incs[slot][row_engine]
                            acc[0] += increase
                            acc[1] += gap
                    else:
                        numerator, denominator = RATIO_METRICS[metric][0]
                        top = counter_increase(previous[numerator], row[numerator])
                        bottom = counter_increase(previous[denominator], row[denominator])
                        if top is not None and bottom is not None:
                            acc = incs[slot][row_engine]
                            acc[0] += top
                            acc[1] += bottom
        previous = row
    return _finish(metric, gauge_sums, incs)


def _raw_gauge(metric: str, row: dict[str, Any]) -> float | None:
    if metric in GAUGE_METRICS:
        return row[GAUGE_METRICS[metric][0]]
    blocks, block_size = row["num_gpu_blocks"], row["block_size"]
    if blocks is None or block_size is None:
        return None
    if metric == "kv_tokens_capacity":
        return float(blocks * block_size)
    usage = row["kv_cache_usage"]
    return None if usage is None else usage * blocks * block_size


def _finish(metric: str, gauge_sums, incs) -> dict[int, float]:
    result: dict[int, float] = {}
    if metric in GAUGE_METRICS or metric in ("kv_tokens_used", "kv_tokens_capacity"):
        how = GAUGE_METRICS[metric][2] if metric in GAUGE_METRICS else sum
        for slot, engines in gauge_sums.items():
            combined = _combine({e: s / n for e, (s, n) in engines.items() if n}, how)
            if combined is not None:
                result[slot] = combined
    elif metric in RATE_METRICS:
        for slot, engines in incs.items():
            rates = {e: inc / seconds for e, (inc, seconds) in engines.items() if seconds > 0}
            if rates:
                result[slot] = sum(rates.values())
    else:
        for slot, engines in incs.items():
            top = sum(t for t, _ in engines.values())
            bottom = sum(b for _, b in engines.values())
            if bottom > 0:
                result[slot] = top / bottom
    return result


def _from_rollups(rows: list[dict[str, Any]], metric: str, step: int) -> dict[int, float]:
    gauge_sums: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    incs: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    for row in rows:
        slot, row_engine = _slot(row["time"], step), row["engine"]
        weight = row["samples"] or 0
        if metric in GAUGE_METRICS or metric in ("kv_tokens_used", "kv_tokens_capacity"):
            value = _rollup_gauge(metric, row)
            if value is not None and weight:
                acc = gauge_sums[slot][row_engine]
                acc[0] += value * weight
                acc[1] += weight
        elif metric in RATE_METRICS:
            increase, covered = row[RATE_METRICS[metric][1]], row["covered_seconds"]
            if increase is not None and covered:
                acc = incs[slot][row_engine]
                acc[0] += increase
                acc[1] += covered
        else:
            numerator, denominator = RATIO_METRICS[metric][1]
            if row[numerator] is not None and row[denominator] is not None:
                acc = incs[slot][row_engine]
                acc[0] += row[numerator]
                acc[1] += row[denominator]
    return _finish(metric, gauge_sums, incs)


def _tail_start(rollup_rows: list[dict[str, Any]], lo: dt.datetime, hi: dt.datetime, step: int, resolution: int):
    """Where the newest steps the rollup task has not reached yet begin (it runs once a minute): those are read
    from raw rows, so a long-range chart still ends at the latest scrape."""
    latest = max((row["time"] for row in rollup_rows), default=None)
    tail_start = max(lo, hi - TAIL_FROM_RAW) if latest is None else latest + dt.timedelta(seconds=resolution)
    tail_start = max(tail_start, hi - TAIL_FROM_RAW, lo)
    return dt.datetime.fromtimestamp(_slot(tail_start, step), tz=dt.UTC)


def _rollup_gauge(metric: str, row: dict[str, Any]) -> float | None:
    if metric in GAUGE_METRICS:
        return row[GAUGE_METRICS[metric][1]]
    blocks, block_size = row["num_gpu_blocks"], row["block_size"]
    if blocks is None or block_size is None:
        return None
    if metric == "kv_tokens_capacity":
        return float(blocks * block_size)
    usage = row["kv_cache_usage_avg"]
    return None if usage is None else usage * blocks * block_size


def endpoint_gpu_ids(endpoint: Endpoint) -> list[int]:
    gpus = endpoint.node.gpus.all()
    wanted = set(endpoint.gpu_indices or [])
    return [gpu.pk for gpu in gpus if not wanted or gpu.index in wanted]


def _gpu_memory(endpoint: Endpoint, lo, hi, step: int, source: str) -> dict[int, float]:
    """The most-used GPU of the endpoint's per step: what the plan's per-GPU breakdown is compared with."""
    gpu_ids = endpoint_gpu_ids(endpoint)
    per_slot: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    if source == "raw":
        rows: Iterable[tuple[int, dt.datetime, float]] = GpuSample.objects.filter(
            gpu_id__in=gpu_ids, time__gte=lo, time__lt=hi
        ).values_list("gpu_id", "time", "memory_used_bytes")
        weighted = ((gpu, time, used, 1) for gpu, time, used in rows)
    else:
        resolution = MINUTE if source == "1m" else HOUR
        weighted = GpuRollup.objects.filter(
            gpu_id__in=gpu_ids, resolution=resolution, time__gte=lo, time__lt=hi
        ).values_list("gpu_id", "time", "memory_used_bytes_avg", "samples")
    for gpu, time, used, weight in weighted:
        acc = per_slot[_slot(time, step)][gpu]
        acc[0] += used * weight
        acc[1] += weight
    return {slot: max(s / n for s, n in gpus.values() if n) for slot, gpus in per_slot.items()}


def histogram_quantile(quantile: float, bounds: list[float | None], counts: list[float]) -> float | None:
    """Prometheus' histogram_quantile on cumulative buckets (linear within a bucket; the +Inf bucket
    answers the highest finite bound)."""
    if not counts or counts[-1] <= 0:
        return None
    rank = quantile * counts[-1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= rank:
            if bound is None:
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = (bound if bound is not None else lower_bound), count
    return lower_bound


def _quantiles(
    rows_cache: _Rows, name: str, quantile: float, lo: dt.datetime, hi: dt.datetime, step: int
) -> dict[int, float]:
    """Per step, the quantile of what happened within it: bucket counts at the step's end minus those at its
    start, per engine, summed over engines (a counter reset restarts from zero). Histogram rows are stamped
    on whole minutes (ingest floors them), so for steps over a minute only the rows on step boundaries are
    read."""
    sums = rows_cache.histogram_windows(name, lo, hi, step)
    result = {}
    for slot, (bounds, counts) in sums.items():
        value = histogram_quantile(quantile, bounds, counts)
        if value is not None:
            result[slot] = value
    return result


def _histogram_windows(
    rows: list[tuple[Any, ...]], lo: dt.datetime, step: int
) -> dict[int, tuple[list[float | None], list[float]]]:
    sums: dict[int, tuple[list[float | None], list[float]]] = {}
    previous: tuple[int, dt.datetime, list[float | None], list[float]] | None = None
    for engine_index, time, bounds, counts in rows:
        if previous is not None and previous[0] == engine_index and previous[2] == bounds and previous[1] >= lo:
            old = previous[3]
            delta = [c - o for c, o in zip(counts, old, strict=True)]
            if any(d < 0 for d in delta):
                delta = list(counts)
            slot = _slot(previous[1], step)
            if slot in sums and sums[slot][0] == bounds:
                sums[slot] = (bounds, [a + b for a, b in zip(sums[slot][1], delta, strict=True)])
            else:
                sums[slot] = (bounds, delta)
        previous = (engine_index, time, bounds, counts)
    return sums
