"""Factories and payload builders for the monitor's data-path tests (one set for ingest, API and tasks)."""

from __future__ import annotations

import json
from typing import Any

from monitor.models import Endpoint, Node
from monitor.services import endpoint_register, node_key_create
from monitor.signing import NodeKeyMaterial, payload_sign

T0 = 1_796_083_200.0  # 2026-12-01T00:00:00Z: a fixed clock for samples


def node_with_key(name: str) -> tuple[Node, NodeKeyMaterial]:
    key = node_key_create(name=name)
    return Node.objects.get(name=name), key


def endpoint_on(node: str, port: int, *, scenario_id: int | None = None, name: str = "") -> Endpoint:
    endpoint, _ = endpoint_register(url=f"http://127.0.0.1:{port}", node=node, scenario_id=scenario_id, name=name)
    return endpoint


def engine_values(engine: str = "0", **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "engine": engine,
        "model_name": "meta-llama/Llama-3.1-8B",
        "kv_cache_usage": 0.25,
        "num_requests_running": 3,
        "num_requests_waiting": 0,
        "num_preemptions_total": 0,
        "prefix_cache_hits_total": 100,
        "prefix_cache_queries_total": 400,
        "prompt_tokens_total": 1000,
        "generation_tokens_total": 500,
        "request_success_total": 2,
        "num_gpu_blocks": 1000,
        "block_size": 16,
        "gpu_memory_utilization": 0.9,
        "cache_dtype": "auto",
        "histogram_sums": {"ttft_sum": 1.5, "ttft_count": 3, "itl_sum": 2.0, "itl_count": 100},
    }
    values.update(overrides)
    return values


def endpoint_entry(endpoint_id: int, at: float, *, up: bool = True, engines: list[dict] | None = None, **extra) -> dict:
    entry = {
        "id": endpoint_id,
        "url": f"http://x/{endpoint_id}",
        "up": up,
        "error": None if up else "connection refused",
        "duration_ms": 12.5,
        "scraped_at": at,
        "series": 150,
        "rejected": [],
        "engines": (engines if engines is not None else [engine_values()]) if up else [],
    }
    entry.update(extra)
    return entry


def payload(node: str, entries: list[dict], *, nvml: dict | None = None, sent_at: float = T0) -> dict[str, Any]:
    body: dict[str, Any] = {
        "v": 1,
        "node": node,
        "hostname": f"{node}.example",
        "agent_version": "kvdash-agent/test",
        "sent_at": sent_at,
        "endpoints": entries,
    }
    if nvml is not None:
        body["nvml"] = nvml
    return body


def sealed(body: dict[str, Any], key: NodeKeyMaterial) -> dict[str, str]:
    text = json.dumps(body, separators=(",", ":"))
    return {"body": text, "key_id": key.key_id, "signature": payload_sign(body=text, secret=key.secret)}
