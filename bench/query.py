"""Benchmark of the monitor's reads on PostgreSQL: 7 days of 10 s samples for 64 endpoints, the endpoint
page's charts for each range and the fleet overview, against a raw scan of the same data.

Run from the repository root: ``.venv/bin/python bench/query.py`` (PostgreSQL on 127.0.0.1, or the server
named by ``KVDASH_BENCH_PG``; a throw-away database is created and dropped). Seeding 3.9 million rows with
COPY and rolling them up with the rollup task's own code takes a few minutes.

Timed: for each range (15m, 1h, 6h, 24h, 7d) the six charts of one endpoint page (``endpoint_figures``: 14
series, the rollups or raw rows the step calls for), and the overview (``fleet_overview``: 64 tiles). The
baseline is what a dashboard without rollups does for the 7-day charts: read every raw row of the range
and bucket it (the same series code with the raw source forced). Targets: p95 < 300 ms and >= 10x.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pg_scratch import admin_sql, django_on  # noqa: E402 - after the path above

DB_NAME = f"kvdash_bench_query_{os.getpid()}"
INTERVAL = 10
CHARTED = 4  # endpoints whose pages are timed (and get latency histograms)
TTFT_BOUNDS = [0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, None]
ITL_BOUNDS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 1.0, None]


def seed(endpoints: int, days: float, now: dt.datetime) -> tuple[list[int], float]:
    from django.db import connection

    from monitor.ingest import endpoint_entries_store
    from monitor.models import Endpoint, EngineSample, HistogramSample
    from monitor.partitions import partitions_ensure
    from monitor.services import endpoint_register

    ids = [
        endpoint_register(url=f"http://10.2.{i // 200}.{i % 200}:8000", node=f"n{i // 8}")[0].pk
        for i in range(endpoints)
    ]
    ticks = int(days * 86400 / INTERVAL)
    start = now - dt.timedelta(seconds=ticks * INTERVAL)
    day_list = {(start + dt.timedelta(days=d)).date() for d in range(math.ceil(days) + 2)}
    for table in ("monitor_enginesample", "monitor_histogramsample"):
        partitions_ensure(table=table, days=day_list)
    columns = [
        "endpoint_id", "engine", "time", "kv_cache_usage", "num_requests_running", "num_requests_waiting",
        "num_preemptions_total", "prefix_cache_hits_total", "prefix_cache_queries_total", "prompt_tokens_total",
        "generation_tokens_total", "num_gpu_blocks", "block_size", "ttft_sum", "ttft_count", "itl_sum", "itl_count",
    ]  # fmt: skip
    began = time.perf_counter()
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY monitor_enginesample ({', '.join(columns)}) FROM STDIN") as copy:
            for n, endpoint_id in enumerate(ids):
                phase = n * 0.37
                for tick in range(ticks):
                    at = start + dt.timedelta(seconds=tick * INTERVAL)
                    usage = 0.5 + 0.45 * math.sin(tick / 2000 + phase)
                    copy.write_row(
                        (endpoint_id, 0, at, usage, int(usage * 40), max(0, int((usage - 0.9) * 100)), tick // 5000,
                         tick * 30, tick * 100, tick * 2000, tick * 700, 28580, 16, tick * 0.2, tick, tick * 7.0,
                         tick * 700)
                    )  # fmt: skip
        with cursor.cursor.copy(
            "COPY monitor_histogramsample (endpoint_id, engine, name, time, bounds, counts) FROM STDIN"
        ) as copy:
            for endpoint_id in ids[:CHARTED]:
                for minute in range(ticks * INTERVAL // 60):
                    at = (start + dt.timedelta(minutes=minute)).replace(second=0, microsecond=0)
                    for name, bounds in (("ttft", TTFT_BOUNDS), ("itl", ITL_BOUNDS)):
                        counts = [float(minute * (i + 1)) for i in range(len(bounds))]
                        copy.write_row((endpoint_id, 0, name, at, _json(bounds), _json(counts)))
    seeded = time.perf_counter() - began
    # The latest values the overview shows come from the endpoint rows, as ingest leaves them.
    for endpoint_id in ids:
        endpoint_entries_store(
            endpoint_id=endpoint_id,
            entries=[{"up": True, "scraped_at": now.timestamp(), "duration_ms": 3.0, "engines": [
                {"engine": "0", "kv_cache_usage": 0.5, "num_gpu_blocks": 28580, "block_size": 16}]}],
        )  # fmt: skip
    assert EngineSample.objects.count() == endpoints * ticks + endpoints
    assert Endpoint.objects.count() == endpoints and HistogramSample.objects.exists()
    return ids, seeded


def _json(values: list) -> str:
    import json

    return json.dumps(values)


def rollup_all(days: float, now: dt.datetime) -> float:
    from monitor.rollups import rollup_hours, rollup_minutes

    began = time.perf_counter()
    cursor = now - dt.timedelta(days=days)
    while cursor < now:
        chunk_end = min(now, cursor + dt.timedelta(hours=6))
        rollup_minutes(start=cursor, end=chunk_end)
        cursor = chunk_end
    rollup_hours(start=now - dt.timedelta(days=days), end=now)
    return time.perf_counter() - began


def timed(call, repeat: int) -> list[float]:
    call()  # warm: the first query of a plan, Django's caches
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        times.append((time.perf_counter() - began) * 1000)
    return times


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18] if len(values) >= 2 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", type=int, default=64)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--repeat", type=int, default=8)
    args = parser.parse_args()
    admin_sql(f'CREATE DATABASE "{DB_NAME}"')
    try:
        django_on(DB_NAME)
        from django.db import connection
        from django.utils import timezone

        from monitor import series
        from monitor.charts import CHART_METRICS, RANGES, endpoint_figures
        from monitor.fleet import fleet_overview
        from monitor.models import Endpoint

        now = timezone.now()
        ids, seeded = seed(args.endpoints, args.days, now)
        rolled = rollup_all(args.days, now)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        print(f"seeded {args.endpoints} endpoints x {args.days:g} days of 10 s samples in {seeded:.1f} s (COPY); "
              f"rolled up with the rollup task's code in {rolled:.1f} s")  # fmt: skip
        all_times: list[float] = []
        for key, span in RANGES.items():
            if span > dt.timedelta(days=args.days):
                continue
            per_range = []
            for endpoint_id in ids[:CHARTED]:
                endpoint = Endpoint.objects.select_related("node", "scenario").get(pk=endpoint_id)
                end = timezone.now()
                per_range += timed(
                    lambda e=endpoint, end=end, span=span: endpoint_figures(endpoint=e, start=end - span, end=end),
                    args.repeat,
                )
            all_times += per_range
            print(f"charts {key:>4}: p50 {statistics.median(per_range):7.1f} ms, p95 {p95(per_range):7.1f} ms")
        overview = timed(lambda: fleet_overview(), args.repeat)
        all_times += overview
        print(
            f"overview ({args.endpoints} tiles): p50 {statistics.median(overview):7.1f} ms, p95 {p95(overview):7.1f} ms"
        )

        # Baseline: the longest range's chart series straight from raw rows (no rollups).
        longest = max(span for span in RANGES.values() if span <= dt.timedelta(days=args.days))
        endpoint = Endpoint.objects.get(pk=ids[0])
        end = timezone.now()
        rolled_up = timed(lambda: endpoint_figures(endpoint=endpoint, start=end - longest, end=end), args.repeat)

        def raw_scan() -> None:
            window = series.series_window(start=end - longest, end=end, step=None)
            rows = series._Rows(endpoint, None).raw(end - longest, end)
            for metric in CHART_METRICS:
                if metric in series.GAUGE_METRICS or metric in series.RATE_METRICS or metric in series.RATIO_METRICS:
                    series._from_raw(rows, metric, end - longest, window[1])

        raw = timed(raw_scan, max(2, args.repeat // 4))
        ratio = statistics.median(raw) / statistics.median(rolled_up)
        print(f"charts over {longest.days or longest} from rollups: p50 {statistics.median(rolled_up):.1f} ms; "
              f"raw scan of the same rows: p50 {statistics.median(raw):.1f} ms")  # fmt: skip
        print(f"query: p95 {p95(all_times):.1f} ms (charts of every range and the overview), "
              f"raw scan {statistics.median(raw):.1f} ms, {ratio:.1f}x")  # fmt: skip
        connection.close()
    finally:
        admin_sql(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


if __name__ == "__main__":
    main()
