"""Time to saturation: when an endpoint will reach 100% KV usage if the last hour's trend goes on.

A least-squares line through the last hour of KV usage (1-minute means). Rising: the time it reaches 1.0.
Already full with requests waiting: now. Flat or falling: "not at this rate". Waiting requests that grow
while usage is high pull the estimate in: the queue is the saturation vLLM's gauge cannot show past 100%.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

from django.utils import timezone

from monitor.models import Endpoint, EngineRollup, EngineSample

TREND_WINDOW = dt.timedelta(hours=1)
MIN_POINTS = 5
# Requests waiting while the cache is this full: vLLM is out of KV blocks now (its usage gauge hovers below
# 1.0 under overload, because preemption frees blocks).
FULL = 0.9
HORIZON = dt.timedelta(days=7)


@dataclass(frozen=True)
class Saturation:
    seconds: float | None  # None: not at this rate; 0: saturated now
    slope_per_hour: float | None
    points: int

    @property
    def label(self) -> str:
        if self.seconds is None:
            return "not at this rate"
        if self.seconds <= 0:
            return "saturated now"
        minutes = self.seconds / 60
        if minutes < 60:
            return f"in ~{max(1, round(minutes))} min"
        if minutes < 48 * 60:
            return f"in ~{minutes / 60:.1f} h"
        return f"in ~{minutes / 1440:.1f} days"


def _slope(points: list[tuple[float, float]]) -> float:
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var


def time_to_saturation(usage: list[tuple[float, float]], waiting: list[tuple[float, float]]) -> Saturation:
    """``usage`` and ``waiting``: (unix seconds, value) over the trend window, oldest first."""
    if len(usage) < MIN_POINTS:
        return Saturation(None, None, len(usage))
    current = usage[-1][1]
    latest_waiting = waiting[-1][1] if waiting else 0.0
    slope = _slope(usage)  # per second
    if current >= FULL and latest_waiting > 0:
        return Saturation(0.0, slope * 3600, len(usage))
    if slope <= 0:
        return Saturation(None, slope * 3600, len(usage))
    # Evaluate the fitted line at the newest point rather than the noisy last value.
    mean_t = sum(t for t, _ in usage) / len(usage)
    mean_v = sum(v for _, v in usage) / len(usage)
    fitted_now = mean_v + slope * (usage[-1][0] - mean_t)
    seconds = max(0.0, (1.0 - max(fitted_now, current)) / slope)
    if seconds > HORIZON.total_seconds():
        return Saturation(None, slope * 3600, len(usage))
    return Saturation(seconds, slope * 3600, len(usage))


def endpoints_saturation(*, endpoint_ids: list[int], now: dt.datetime | None = None) -> dict[int, Saturation]:
    """Per endpoint: the fullest engine's trend, from the minute rollups, with raw minutes for the tail the
    rollup task has not reached."""
    now = now or timezone.now()
    start = now - TREND_WINDOW
    per_engine: dict[tuple[int, int], dict[float, tuple[float | None, float | None]]] = defaultdict(dict)
    rollups = EngineRollup.objects.filter(resolution=60, endpoint_id__in=endpoint_ids, time__gte=start).values_list(
        "endpoint_id", "engine", "time", "kv_cache_usage_avg", "num_requests_waiting_avg"
    )
    for endpoint_id, engine, time, usage, waiting in rollups:
        per_engine[(endpoint_id, engine)][time.timestamp()] = (usage, waiting)
    latest_rolled = max((max(minutes) for minutes in per_engine.values()), default=start.timestamp() - 60)
    tail = (
        EngineSample.objects.filter(
            endpoint_id__in=endpoint_ids, time__gte=dt.datetime.fromtimestamp(latest_rolled + 60, tz=dt.UTC)
        )
        .values_list("endpoint_id", "engine", "time", "kv_cache_usage", "num_requests_waiting")
        .order_by("time")
    )
    for endpoint_id, engine, time, usage, waiting in tail:
        per_engine[(endpoint_id, engine)][time.timestamp()] = (usage, waiting)
    result: dict[int, Saturation] = {}
    for (endpoint_id, _engine), points in per_engine.items():
        times = sorted(points)
        usage = [(t, points[t][0]) for t in times if points[t][0] is not None]
        waiting = [(t, points[t][1]) for t in times if points[t][1] is not None]
        estimate = time_to_saturation(usage, waiting)
        known = result.get(endpoint_id)
        if known is None or _sooner(estimate, known):
            result[endpoint_id] = estimate
    return result


def _sooner(a: Saturation, b: Saturation) -> bool:
    if a.seconds is None:
        return False
    return b.seconds is None or a.seconds < b.seconds


def endpoint_saturation(*, endpoint: Endpoint) -> Saturation:
    return endpoints_saturation(endpoint_ids=[endpoint.pk]).get(endpoint.pk, Saturation(None, None, 0))
