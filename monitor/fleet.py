"""The fleet overview: one tile per endpoint engine, its state and the figures on-call staff look at first.

Built from the endpoints' latest values (kept on the row by ingest) and two grouped queries over the last
five minutes of raw samples, so its cost grows with the fleet, not with history.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import Max, Min
from django.utils import timezone

from monitor.models import Endpoint, EngineSample
from monitor.planned import endpoint_planned
from monitor.saturation import endpoints_saturation

# Thresholds of vLLM's own Grafana dashboards (KV usage panel: orange 0.9, red 0.98).
KV_WARNING = 0.9
KV_CRITICAL = 0.98
STALE_AFTER_INTERVALS = 3
STATE_ORDER = {"critical": 0, "warning": 1, "down": 2, "stale": 3, "ok": 4}


@dataclass(frozen=True)
class Tile:
    endpoint_id: int
    engine: str
    name: str
    url: str
    node: str
    model: str
    scenario: str | None
    state: str
    kv_usage: float | None
    kv_usage_max_5m: float | None
    waiting: int | None
    running: int | None
    preemptions_per_s: float | None
    kv_tokens_used: int | None
    kv_tokens_capacity: int | None
    planned_kv_tokens: int | None
    last_scrape_at: str | None
    age_s: float | None
    error: str
    saturation: str
    saturation_s: float | None


def tile_state(*, up: bool | None, age_s: float | None, kv: float | None, preemptions_per_s: float | None) -> str:
    if up is False:
        return "down"
    if age_s is None or age_s > STALE_AFTER_INTERVALS * settings.KVDASH_SCRAPE_INTERVAL:
        return "stale"
    if (kv is not None and kv >= KV_CRITICAL) or (preemptions_per_s or 0) > 0:
        return "critical"
    if kv is not None and kv >= KV_WARNING:
        return "warning"
    return "ok"


def _windows(now: dt.datetime) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float]]:
    max_kv = {
        (row["endpoint_id"], row["engine"]): row["kv"]
        for row in EngineSample.objects.filter(time__gte=now - dt.timedelta(minutes=5))
        .values("endpoint_id", "engine")
        .annotate(kv=Max("kv_cache_usage"))
    }
    # Preemptions per second over the last minute; a restart inside it reads as no preemption (rare, brief).
    rates = {}
    for row in (
        EngineSample.objects.filter(time__gte=now - dt.timedelta(seconds=max(60, 3 * settings.KVDASH_SCRAPE_INTERVAL)))
        .values("endpoint_id", "engine")
        .annotate(lo=Min("num_preemptions_total"), hi=Max("num_preemptions_total"), t0=Min("time"), t1=Max("time"))
    ):
        seconds = (row["t1"] - row["t0"]).total_seconds()
        if seconds > 0 and row["lo"] is not None and row["hi"] is not None:
            rates[(row["endpoint_id"], row["engine"])] = (row["hi"] - row["lo"]) / seconds
    return max_kv, rates


def _saturation(endpoint_ids: list[int]) -> dict[int, dict[str, Any]]:
    # The trend moves slowly: computing it at most every 30 s keeps the overview's refresh cheap.
    key = "monitor:saturation:" + ",".join(map(str, endpoint_ids))
    cached = cache.get(key)
    if cached is None:
        cached = {
            pk: {"label": estimate.label, "seconds": estimate.seconds}
            for pk, estimate in endpoints_saturation(endpoint_ids=endpoint_ids).items()
        }
        cache.set(key, cached, 30)
    return cached


def fleet_tiles(*, node: str = "", model: str = "", state: str = "") -> list[Tile]:
    now = timezone.now()
    endpoints = list(
        Endpoint.objects.filter(enabled=True).select_related("node", "scenario", "scenario__model", "scenario__gpu")
    )
    max_kv, rates = _windows(now)
    saturation = _saturation([e.pk for e in endpoints])
    planned_cache: dict[int, dict[str, Any] | None] = {}
    tiles = []
    for endpoint in endpoints:
        latest = endpoint.latest if isinstance(endpoint.latest, dict) else {}
        engines = sorted(latest, key=lambda k: (len(k), k)) or ["0"]
        age = (now - endpoint.last_success_at).total_seconds() if endpoint.last_success_at else None
        scenario_key = endpoint.scenario_id or 0
        if scenario_key not in planned_cache:
            planned_cache[scenario_key] = endpoint_planned(endpoint=endpoint)
        planned = planned_cache[scenario_key]
        for engine in engines:
            values = latest.get(engine, {})
            kv = values.get("kv_cache_usage")
            blocks, block_size = values.get("num_gpu_blocks"), values.get("block_size")
            capacity = blocks * block_size if isinstance(blocks, int) and isinstance(block_size, int) else None
            rate = rates.get((endpoint.pk, int(engine))) if engine.isdecimal() else None
            sat = saturation.get(endpoint.pk, {"label": "not enough data", "seconds": None})
            tile = Tile(
                endpoint_id=endpoint.pk,
                engine=engine,
                name=endpoint.display_name + (f" · engine {engine}" if len(engines) > 1 else ""),
                url=endpoint.url,
                node=endpoint.node.name,
                model=str(values.get("model_name") or (endpoint.scenario.model.name if endpoint.scenario else "")),
                scenario=endpoint.scenario.name if endpoint.scenario else None,
                state=tile_state(up=endpoint.up, age_s=age, kv=kv, preemptions_per_s=rate),
                kv_usage=kv,
                kv_usage_max_5m=max_kv.get((endpoint.pk, int(engine))) if engine.isdecimal() else None,
                waiting=values.get("num_requests_waiting"),
                running=values.get("num_requests_running"),
                preemptions_per_s=rate,
                kv_tokens_used=round(kv * capacity) if kv is not None and capacity else None,
                kv_tokens_capacity=capacity,
                planned_kv_tokens=planned.get("kv_tokens") if planned and "error" not in planned else None,
                last_scrape_at=endpoint.last_success_at.isoformat() if endpoint.last_success_at else None,
                age_s=round(age, 1) if age is not None else None,
                error=endpoint.last_error,
                saturation=sat["label"],
                saturation_s=sat["seconds"],
            )
            tiles.append(tile)
    tiles = [
        t
        for t in tiles
        if (not node or t.node == node) and (not model or t.model == model) and (not state or t.state == state)
    ]
    tiles.sort(key=lambda t: (STATE_ORDER[t.state], -(t.kv_usage or 0.0), t.name))
    return tiles


def fleet_overview(*, node: str = "", model: str = "", state: str = "") -> dict[str, Any]:
    tiles = fleet_tiles(node=node, model=model, state=state)
    return {
        "generated_at": timezone.now().isoformat(),
        "interval_s": settings.KVDASH_SCRAPE_INTERVAL,
        "tiles": [asdict(tile) for tile in tiles],
    }


def fleet_filters() -> dict[str, list[str]]:
    endpoints = Endpoint.objects.filter(enabled=True).select_related("node", "scenario__model")
    nodes = sorted({e.node.name for e in endpoints})
    models = sorted(
        {
            str(engine.get("model_name"))
            for e in endpoints
            for engine in (e.latest or {}).values()
            if isinstance(engine, dict) and engine.get("model_name")
        }
    )
    return {"nodes": nodes, "models": models, "states": list(STATE_ORDER)}
