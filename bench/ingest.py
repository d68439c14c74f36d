"""Benchmark of the central ingest on PostgreSQL: samples per second through the real write path (a signed
agent batch verified and stored by ``monitor.ingest.ingest_signed``) against a one-row-per-``save()``
baseline measured in the same run, plus scrape+parse of a ~300-series vLLM body.

Run from the repository root: ``.venv/bin/python bench/ingest.py`` (PostgreSQL on 127.0.0.1, or the server
named by ``KVDASH_BENCH_PG``; a throw-away database is created and dropped).

A sample is one value of one series at one time, as Prometheus counts them: an engine row carries 17 (the
KV gauge, request gauges, counters, block figures, latency sums and counts), a GPU row 4, and once a minute
each engine's TTFT / ITL / e2e histograms add their buckets (vLLM's 23 + 20 + 21 = 64 here; the agent sends
them every sixth scrape). Each batch is what one node's agent sends per scrape: 8 vLLM servers (one engine
each) and 8 GPUs. The baseline stores the same samples the naive way: one row per sample, one save() each
(autocommit), as a one-row-per-metric schema written by a plain ORM loop would. Targets: >= 50,000
samples/s and >= 20x the baseline; scrape+parse < 5 ms.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pg_scratch import admin_sql, django_on  # noqa: E402 - after the path above

DB_NAME = f"kvdash_bench_ingest_{os.getpid()}"
ENDPOINTS_PER_NODE = 8
GPUS_PER_NODE = 8
ENGINE_VALUES = 17
GPU_VALUES = 4
# vLLM's bucket bounds (vllm/v1/metrics/loggers.py) for TTFT, inter-token latency and e2e latency.
TTFT_BOUNDS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0, 160.0, 640.0, 2560.0, None]  # fmt: skip
ITL_BOUNDS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
              80.0, None]  # fmt: skip
E2E_BOUNDS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
              960.0, 1920.0, None]  # fmt: skip
HISTOGRAM_EVERY = 6


def _cumulative(bounds: list, tick: int) -> dict:
    return {"bounds": bounds, "counts": [float(min(i * 10, 100) + tick) for i in range(len(bounds))]}


def _engine(index: int, tick: int) -> dict:
    engine = _engine_values(index, tick)
    if tick % HISTOGRAM_EVERY == 0:
        engine["histograms"] = {
            "ttft": _cumulative(TTFT_BOUNDS, tick),
            "itl": _cumulative(ITL_BOUNDS, tick),
            "e2e": _cumulative(E2E_BOUNDS, tick),
        }
    return engine


def _engine_values(index: int, tick: int) -> dict:
    return {
        "engine": "0",
        "model_name": "meta-llama/Llama-3.1-8B",
        "kv_cache_usage": (index * 7 + tick) % 100 / 100,
        "num_requests_running": 10 + tick % 5,
        "num_requests_waiting": tick % 3,
        "num_preemptions_total": tick // 10,
        "prefix_cache_hits_total": 1000 + tick * 40,
        "prefix_cache_queries_total": 4000 + tick * 100,
        "prompt_tokens_total": 100_000 + tick * 2000,
        "generation_tokens_total": 50_000 + tick * 800,
        "request_success_total": 100 + tick,
        "num_gpu_blocks": 28580,
        "block_size": 16,
        "gpu_memory_utilization": 0.92,
        "cache_dtype": "auto",
        "histogram_sums": {
            "ttft_sum": 10.0 + tick,
            "ttft_count": 100 + tick,
            "itl_sum": 50.0 + tick,
            "itl_count": 5000 + tick * 10,
            "e2e_sum": 200.0 + tick,
            "e2e_count": 100 + tick,
        },
    }


def _batches(nodes: list[tuple[str, object, list[int]]], ticks: int, t0: float) -> list[dict[str, str]]:
    from monitor.agent import payload_seal

    batches = []
    for tick in range(ticks):
        at = t0 + tick * 10
        for name, key, endpoint_ids in nodes:
            payload = {
                "v": 1,
                "node": name,
                "hostname": name,
                "agent_version": "bench",
                "sent_at": at,
                "endpoints": [
                    {
                        "id": endpoint_id,
                        "up": True,
                        "error": None,
                        "duration_ms": 3.0,
                        "scraped_at": at,
                        "rejected": [],
                        "engines": [_engine(i, tick)],
                    }
                    for i, endpoint_id in enumerate(endpoint_ids)
                ],
                "nvml": {
                    "available": True,
                    "error": None,
                    "driver_version": "580.65.06",
                    "taken_at": at,
                    "gpus": [
                        {
                            "index": g,
                            "uuid": f"GPU-{name}-{g}",
                            "name": "NVIDIA H100 80GB HBM3",
                            "memory_total_bytes": 85_520_809_984,
                            "memory_used_bytes": 80_000_000_000 + tick,
                            "memory_free_bytes": 5_000_000_000,
                            "utilization_gpu_pct": 90,
                            "utilization_memory_pct": 60,
                        }
                        for g in range(GPUS_PER_NODE)
                    ],
                },
            }
            sealed = payload_seal(payload=payload, key=key)
            batches.append({"body": sealed.body, "key_id": sealed.key_id, "signature": sealed.signature})
    return batches


def _ingest_share(batches: list[dict[str, str]]) -> int:
    from monitor.ingest import ingest_signed

    histogram_rows = 0
    for batch in batches:
        outcome = ingest_signed(**batch)
        assert outcome.refused is None and not outcome.dropped, outcome
        histogram_rows += outcome.histogram_rows
    return histogram_rows


def run(nodes_count: int, ticks: int, baseline_rows: int, writers: int) -> dict[str, float]:
    import datetime as dt

    from django.utils import timezone

    from monitor.ingest import ingest_signed, samples_write
    from monitor.models import EngineSample, GpuSample
    from monitor.services import endpoint_register, node_key_create

    nodes = []
    for n in range(nodes_count):
        name = f"bench-{n}"
        key = node_key_create(name=name)
        endpoint_ids = [
            endpoint_register(url=f"http://10.1.{n}.{e}:8000", node=name)[0].pk for e in range(ENDPOINTS_PER_NODE)
        ]
        nodes.append((name, key, endpoint_ids))
    t0 = timezone.now().timestamp() - ticks * 10
    batches = _batches(nodes, ticks, t0)
    warm, timed_batches = batches[: len(nodes)], batches[len(nodes) :]
    for batch in warm:  # partitions created, GPUs registered, caches filled: steady state from here on
        ingest_signed(**batch)

    # Central ingest runs as many worker processes as it has cores; each node's batches go to one writer
    # here so each node's scrapes arrive in order, as they do from one agent.
    shares = [[b for i, b in enumerate(timed_batches) if (i % len(nodes)) % writers == w] for w in range(writers)]
    from django.db import connections

    connections.close_all()
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(writers) as pool:
        histogram_rows = sum(pool.map(_ingest_share, shares))
    elapsed = time.perf_counter() - start
    engine_rows = len(timed_batches) * ENDPOINTS_PER_NODE
    gpu_rows = len(timed_batches) * GPUS_PER_NODE
    buckets = len(TTFT_BOUNDS) + len(ITL_BOUNDS) + len(E2E_BOUNDS)
    samples = engine_rows * ENGINE_VALUES + gpu_rows * GPU_VALUES + histogram_rows // 3 * buckets
    assert EngineSample.objects.count() == len(batches) * ENDPOINTS_PER_NODE
    assert GpuSample.objects.count() == len(batches) * GPUS_PER_NODE

    # Baseline: one sample per row, one save() each in autocommit (the KV gauge column carries the value).
    endpoint_id = nodes[0][2][0]
    base_t0 = dt.datetime.fromtimestamp(t0, tz=dt.UTC) - dt.timedelta(hours=1)
    samples_write(EngineSample, [EngineSample(endpoint_id=endpoint_id, engine=1, time=base_t0)])
    start = time.perf_counter()
    for i in range(1, baseline_rows + 1):
        row = EngineSample(endpoint_id=endpoint_id, engine=1, time=base_t0 + dt.timedelta(seconds=i))
        row.kv_cache_usage = i % 100 / 100
        row.save(force_insert=True)
    base_elapsed = time.perf_counter() - start
    return {
        "batches": len(timed_batches),
        "seconds": elapsed,
        "engine_rows_per_s": engine_rows / elapsed,
        "samples_per_s": samples / elapsed,
        "batches_per_s": len(timed_batches) / elapsed,
        "baseline_samples_per_s": baseline_rows / base_elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--baseline-rows", type=int, default=2000)
    parser.add_argument("--writers", type=int, default=os.cpu_count() or 1, help="ingest processes (default: cores)")
    args = parser.parse_args()
    admin_sql(f'CREATE DATABASE "{DB_NAME}"')
    try:
        django_on(DB_NAME)
        figures = run(args.nodes, args.ticks, args.baseline_rows, args.writers)
        from django.db import connections

        connections.close_all()
    finally:
        admin_sql(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
    from scrape_parse import measure_scrape_parse

    scrape = measure_scrape_parse(200)
    ratio = figures["samples_per_s"] / figures["baseline_samples_per_s"]
    print(
        f"real write path, {args.writers} writer processes: {figures['batches']} node batches "
        f"({ENDPOINTS_PER_NODE} engines + {GPUS_PER_NODE} GPUs each) "
        f"in {figures['seconds']:.2f} s: {figures['batches_per_s']:,.0f} batches/s, "
        f"{figures['engine_rows_per_s']:,.0f} engine rows/s"
    )
    print(f"baseline (one row per sample, one save() each): {figures['baseline_samples_per_s']:,.0f} samples/s")
    print(
        f"scrape+parse of a {scrape['series']}-series body: p50 {scrape['scrape_parse_p50_ms']:.2f} ms, "
        f"p95 {scrape['scrape_parse_p95_ms']:.2f} ms (target < 5 ms)"
    )
    print(
        f"ingest: {figures['samples_per_s']:,.0f} samples/s (ingest_signed, signed node batches), "
        f"baseline {figures['baseline_samples_per_s']:,.0f} samples/s, {ratio:.1f}x"
    )


if __name__ == "__main__":
    main()
