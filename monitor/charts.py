"""The endpoint page's six Plotly figures for a time range, built from the series and the plan.

Figures are built here (plain dicts) and drawn by static/js/monitor-endpoint.js with Plotly.react, so the
page and its tests read the same thing. Every trace name is ours: no user-supplied text reaches a figure.
A step with no sample is null, and Plotly draws it as a gap (connectgaps stays off).
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

from django.utils import timezone

from monitor.fleet import KV_CRITICAL, KV_WARNING
from monitor.models import Endpoint
from monitor.planned import endpoint_planned
from monitor.series import endpoint_series_many

RANGES: dict[str, dt.timedelta] = {
    "15m": dt.timedelta(minutes=15),
    "1h": dt.timedelta(hours=1),
    "6h": dt.timedelta(hours=6),
    "24h": dt.timedelta(hours=24),
    "7d": dt.timedelta(days=7),
}
CHART_IDS = (
    "chart-kv-usage",
    "chart-kv-tokens",
    "chart-requests",
    "chart-preemptions",
    "chart-gpu-memory",
    "chart-speed",
)
MAX_CUSTOM_RANGE = dt.timedelta(days=400)
CHART_METRICS = (
    "kv_cache_usage",
    "kv_tokens_used",
    "kv_tokens_capacity",
    "num_requests_running",
    "num_requests_waiting",
    "preemptions_per_s",
    "prefix_cache_hit_rate",
    "gpu_memory_used_bytes",
    "generation_tokens_per_s",
    "prompt_tokens_per_s",
    "ttft_p50_seconds",
    "ttft_p99_seconds",
    "itl_p50_seconds",
    "itl_p99_seconds",
)

_COLORS = {"actual": "#3559d6", "plan": "#1a7f45", "second": "#b54708", "third": "#7a5af8", "muted": "#98a2b3"}


def _iso(points: list[tuple[int, float | None]]) -> tuple[list[str], list[float | None]]:
    times = tuple(t for t, _ in points)
    return _iso_times(times), [value for _, value in points]


@functools.lru_cache(maxsize=64)
def _iso_times(times: tuple[int, ...]) -> list[str]:
    # Most traces of a page share one grid: format its times once.
    return [dt.datetime.fromtimestamp(t, tz=dt.UTC).isoformat() for t in times]


def _line(points, name: str, color: str, *, line: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    xs, ys = _iso(points)
    style = {"color": color, **(line or {})}
    return {"type": "scatter", "mode": "lines", "name": name, "x": xs, "y": ys, "line": style, **extra}


def _flat(start: dt.datetime, end: dt.datetime, value: float, name: str, color: str) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x": [start.isoformat(), end.isoformat()],
        "y": [value, value],
        "line": {"color": color, "dash": "dash"},
        "hoverinfo": "name+y",
    }


def _layout(title: str, start: dt.datetime, end: dt.datetime, y_title: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 14}},
        "xaxis": {"type": "date", "range": [start.isoformat(), end.isoformat()]},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
        "margin": {"l": 56, "r": 16, "t": 36, "b": 36},
        "height": 280,
        "legend": {"orientation": "h", "y": -0.25},
        "meta": {"accessible_name": title},
    }
    layout.update(extra)
    if "yaxis2" in extra:
        layout["margin"] = {**layout["margin"], "r": 56}
    return layout


def chart_window(*, range_key: str | None, start: dt.datetime | None, end: dt.datetime | None):
    """(start, end, range_key) for a preset or a custom window; raises ValueError with a message."""
    if start is not None or end is not None:
        end = end or timezone.now()
        start = start or end - dt.timedelta(hours=1)
        if end <= start:
            raise ValueError("end must be after start")
        if end - start > MAX_CUSTOM_RANGE:
            raise ValueError(f"a window is at most {MAX_CUSTOM_RANGE.days} days")
        return start, end, "custom"
    key = range_key or "1h"
    if key not in RANGES:
        raise ValueError(f"range must be one of {', '.join(RANGES)} or a custom start and end")
    end = timezone.now()
    return end - RANGES[key], end, key


def endpoint_figures(*, endpoint: Endpoint, start: dt.datetime, end: dt.datetime) -> dict[str, Any]:
    loaded = endpoint_series_many(endpoint=endpoint, metrics=list(CHART_METRICS), start=start, end=end, step=None)

    def series(metric: str) -> list[tuple[int, float | None]]:
        return loaded[metric].points

    planned = endpoint_planned(endpoint=endpoint)
    plan_ok = planned is not None and "error" not in planned
    dp = planned.get("data_parallel_size", 1) if plan_ok else 1
    figures: dict[str, Any] = {}

    usage = series("kv_cache_usage")
    figures["chart-kv-usage"] = {
        "data": [_line(usage, "KV usage (fullest engine)", _COLORS["actual"])],
        "layout": _layout(
            "KV cache usage",
            start,
            end,
            "fraction of blocks",
            yaxis={"range": [0, 1.05], "title": {"text": "fraction of blocks"}},
            shapes=[
                _band(KV_WARNING, KV_CRITICAL, "#fef0c7"),
                _band(KV_CRITICAL, 1.05, "#fee4e2"),
            ],
        ),
    }

    tokens = [_line(series("kv_tokens_used"), "tokens in cache", _COLORS["actual"])]
    tokens.append(_line(series("kv_tokens_capacity"), "server's capacity (cache_config_info)", _COLORS["muted"]))
    if plan_ok:
        tokens.append(_flat(start, end, planned["kv_tokens"] * dp, "plan: KV capacity", _COLORS["plan"]))
    figures["chart-kv-tokens"] = {"data": tokens, "layout": _layout("Tokens in KV cache", start, end, "tokens")}

    requests = [
        _line(series("num_requests_running"), "running", _COLORS["actual"]),
        _line(series("num_requests_waiting"), "waiting", _COLORS["second"]),
    ]
    if plan_ok:
        requests.append(
            _flat(
                start, end, planned["max_concurrency"] * dp, "plan: max concurrency at max_model_len", _COLORS["plan"]
            )
        )
    figures["chart-requests"] = {"data": requests, "layout": _layout("Requests", start, end, "requests")}

    figures["chart-preemptions"] = {
        "data": [
            _line(series("preemptions_per_s"), "preemptions/s", _COLORS["second"]),
            _line(series("prefix_cache_hit_rate"), "prefix-cache hit rate", _COLORS["third"], yaxis="y2"),
        ],
        "layout": _layout(
            "Preemptions and prefix-cache hits",
            start,
            end,
            "preemptions/s",
            yaxis2={"overlaying": "y", "side": "right", "range": [0, 1], "title": {"text": "hit rate"}},
        ),
    }

    memory = [_line(series("gpu_memory_used_bytes"), "GPU memory used (NVML, busiest GPU)", _COLORS["actual"])]
    if plan_ok:
        breakdown = planned["memory_per_gpu"]
        weights = breakdown["weights_bytes"]
        overhead = weights + breakdown["activation_bytes"] + breakdown["non_torch_bytes"]
        memory += [
            _flat(start, end, weights, "plan: weights", _COLORS["muted"]),
            _flat(start, end, overhead, "plan: + activation + non-torch", _COLORS["third"]),
            _flat(start, end, breakdown["requested_bytes"], "plan: + KV cache (requested)", _COLORS["plan"]),
            _flat(start, end, breakdown["total_bytes"], "GPU total", _COLORS["second"]),
        ]
    figures["chart-gpu-memory"] = {
        "data": memory,
        "layout": _layout("GPU memory per GPU", start, end, "bytes"),
    }

    figures["chart-speed"] = {
        "data": [
            _line(series("generation_tokens_per_s"), "generation tokens/s", _COLORS["actual"]),
            _line(series("prompt_tokens_per_s"), "prompt tokens/s", _COLORS["muted"]),
            _line(series("ttft_p50_seconds"), "TTFT p50", _COLORS["plan"], yaxis="y2"),
            _line(series("ttft_p99_seconds"), "TTFT p99", _COLORS["plan"], yaxis="y2", line={"dash": "dot"}),
            _line(series("itl_p50_seconds"), "ITL p50", _COLORS["third"], yaxis="y2"),
            _line(series("itl_p99_seconds"), "ITL p99", _COLORS["third"], yaxis="y2", line={"dash": "dot"}),
        ],
        "layout": _layout(
            "Throughput and latency",
            start,
            end,
            "tokens/s",
            yaxis2={"overlaying": "y", "side": "right", "title": {"text": "seconds"}, "rangemode": "tozero"},
        ),
    }
    for figure in figures.values():
        for trace in figure["data"]:
            trace.setdefault("connectgaps", False)
    return figures


def _band(low: float, high: float, color: str) -> dict[str, Any]:
    return {
        "type": "rect",
        "xref": "paper",
        "x0": 0,
        "x1": 1,
        "yref": "y",
        "y0": low,
        "y1": high,
        "fillcolor": color,
        "opacity": 0.6,
        "line": {"width": 0},
        "layer": "below",
    }
