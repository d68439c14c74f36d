"""What a GPU node's agent does, without a database: scrape the targets it is given (vLLM servers and
NVML), build one payload per round and seal it with the node key for the central ingest task.

The agent holds broker credentials and its node key only. Its configuration comes from the environment
(``run_agent`` sets it): ``KVDASH_AGENT_NODE`` and ``KVDASH_NODE_KEY`` (or ``KVDASH_NODE_KEY_FILE``).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor.scrape import NvmlReader, ScrapeResult, VllmScraper
from monitor.signing import NodeKeyMaterial, node_key_parse, payload_sign

AGENT_VERSION = "kvdash-agent/0.1"
PAYLOAD_VERSION = 1
HISTOGRAM_EVERY_S = 60.0
MAX_PARALLEL_SCRAPES = 16


class AgentNotConfigured(RuntimeError):
    """The worker was asked to scrape but has no node name or key: it is not an agent."""


@dataclass(frozen=True)
class AgentConfig:
    node: str
    key: NodeKeyMaterial = field(repr=False)
    hostname: str


def agent_config_from_env(environ: dict[str, str] | None = None) -> AgentConfig:
    env = os.environ if environ is None else environ
    node = env.get("KVDASH_AGENT_NODE", "").strip()
    if not node:
        raise AgentNotConfigured("KVDASH_AGENT_NODE is not set: start agents with `manage.py run_agent --node NAME`")
    key_text = env.get("KVDASH_NODE_KEY", "")
    key_file = env.get("KVDASH_NODE_KEY_FILE", "")
    if not key_text and key_file:
        key_text = Path(key_file).read_text()
    if not key_text.strip():
        raise AgentNotConfigured(f"node {node}: no KVDASH_NODE_KEY (make one with `manage.py create_node_key {node}`)")
    return AgentConfig(node=node, key=node_key_parse(key_text), hostname=socket.gethostname())


class HistogramPacer:
    """Latency buckets go out at most once a minute per engine: the raw rows carry sums and counts, the
    minute rows the buckets (docs/monitor.md explains the trade)."""

    def __init__(self, every_s: float = HISTOGRAM_EVERY_S) -> None:
        self.every_s = every_s
        self._last: dict[tuple[int, str], float] = {}
        self._lock = threading.Lock()

    def due(self, endpoint_id: int, engine: str, now: float) -> bool:
        with self._lock:
            last = self._last.get((endpoint_id, engine))
            if last is not None and now - last < self.every_s:
                return False
            self._last[(endpoint_id, engine)] = now
            return True


def _engine_entry(record: Any, *, include_histograms: bool) -> dict[str, Any]:
    entry: dict[str, Any] = record.as_dict()
    entry.pop("histograms", None)
    sums: dict[str, float] = {}
    buckets: dict[str, dict[str, list[float]]] = {}
    for name, histogram in record.histograms.items():
        sums[f"{name}_sum"] = histogram.sum
        sums[f"{name}_count"] = histogram.count
        if include_histograms:
            buckets[name] = {
                # JSON has no infinity: the +Inf bucket's bound is written as null.
                "bounds": [None if bound == float("inf") else bound for bound, _ in histogram.buckets],
                "counts": [count for _, count in histogram.buckets],
            }
    entry["histogram_sums"] = sums
    if buckets:
        entry["histograms"] = buckets
    return entry


def _endpoint_entry(target: dict[str, Any], result: ScrapeResult, pacer: HistogramPacer) -> dict[str, Any]:
    return {
        "id": target["id"],
        "url": result.url,
        "up": result.up,
        "error": result.error,
        "duration_ms": round(result.duration_ms, 3),
        "scraped_at": result.scraped_at,
        "series": result.series_count,
        "rejected": list(result.rejected)[:20],
        "engines": [
            _engine_entry(record, include_histograms=pacer.due(target["id"], record.engine, result.scraped_at))
            for record in result.engines
        ],
    }


def agent_round(
    *,
    config: AgentConfig,
    targets: Sequence[dict[str, Any]],
    scraper: VllmScraper,
    nvml: NvmlReader | None,
    pacer: HistogramPacer,
) -> dict[str, Any]:
    """Scrape every target at once (one slow server must not delay the rest) and NVML; the payload."""
    started = time.time()
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL_SCRAPES, len(targets)))) as pool:
        results = list(pool.map(lambda target: scraper.scrape(target["url"]), targets))
    payload: dict[str, Any] = {
        "v": PAYLOAD_VERSION,
        "node": config.node,
        "hostname": config.hostname,
        "agent_version": AGENT_VERSION,
        "sent_at": started,
        "endpoints": [_endpoint_entry(target, result, pacer) for target, result in zip(targets, results, strict=True)],
    }
    if nvml is not None:
        payload["nvml"] = nvml.snapshot().as_dict()
    return payload


@dataclass(frozen=True)
class SealedPayload:
    body: str
    key_id: str
    signature: str


def payload_seal(*, payload: dict[str, Any], key: NodeKeyMaterial) -> SealedPayload:
    # allow_nan=False: a NaN that slipped past the scraper must fail here, not poison the database.
    body = json.dumps(payload, separators=(",", ":"), allow_nan=False)
    return SealedPayload(body=body, key_id=key.key_id, signature=payload_sign(body=body, secret=key.secret))
