"""What the scrapers return: frozen dataclasses of plain numbers and strings, and the one error type.

No Django here: the agent, the commands, the tests and the benches all use these as they are."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# Keys whose values are counts: handed out as ints when integral (prometheus_client writes every sample as a
# float, so "3.0" on the wire is 3 requests). Fractions (kv_cache_usage, gpu_memory_utilization) stay floats.
COUNT_KEYS = frozenset(
    {
        "num_requests_running",
        "num_requests_waiting",
        "num_requests_swapped",
        "num_requests_waiting_capacity",
        "num_preemptions_total",
        "prefix_cache_hits_total",
        "prefix_cache_queries_total",
        "prompt_tokens_total",
        "generation_tokens_total",
        "request_success_total",
        "num_gpu_blocks",
        "block_size",
    }
)

# The order as_dict lists them in (the order an on-call reader scans a record).
VALUE_KEYS = (
    "kv_cache_usage",
    "num_requests_running",
    "num_requests_waiting",
    "num_requests_waiting_capacity",
    "num_requests_swapped",
    "num_preemptions_total",
    "prefix_cache_hits_total",
    "prefix_cache_queries_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "request_success_total",
    "num_gpu_blocks",
    "block_size",
    "gpu_memory_utilization",
)

HISTOGRAM_KEYS = ("ttft", "itl", "e2e")


class ScrapeError(Exception):
    """The one error a scraper raises. ``retryable`` says whether trying the same target again may help
    (a timeout, a refused connection, an HTTP 5xx) or not (a body that is not a vLLM metrics page)."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle as cls(*args); retryable is keyword-only, so rebuild it explicitly.
        return (_rebuild_scrape_error, (self.message, self.retryable))


def _rebuild_scrape_error(message: str, retryable: bool) -> ScrapeError:
    return ScrapeError(message, retryable=retryable)


def _number(value: float) -> int | float:
    return int(value) if math.isfinite(value) and value.is_integer() else value


def le_text(bound: float) -> str:
    """A bucket bound as the exposition spells it ("0.5", "+Inf"): JSON has no infinity."""
    return "+Inf" if bound == math.inf else repr(float(bound))


@dataclass(frozen=True)
class Histogram:
    """Cumulative buckets as exposed: ``(le, count)`` pairs in ascending ``le``, the last ``math.inf``."""

    buckets: tuple[tuple[float, float], ...]
    sum: float
    count: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "buckets": [[le_text(bound), _number(count)] for bound, count in self.buckets],
            "sum": self.sum,
            "count": _number(self.count),
        }


@dataclass(frozen=True)
class EngineRecord:
    """One engine's figures from one scrape. ``values`` holds only the keys the server exposed (see
    ``VALUE_KEYS``); a key that is absent was not exposed or was rejected, never zero-filled."""

    engine: str
    model_name: str | None
    values: dict[str, float]
    cache_dtype: str | None
    enable_prefix_caching: bool | None
    histograms: dict[str, Histogram]

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"engine": self.engine}
        if self.model_name is not None:
            out["model_name"] = self.model_name
        for key in VALUE_KEYS:
            if key in self.values:
                value = self.values[key]
                out[key] = _number(value) if key in COUNT_KEYS else value
        if self.cache_dtype is not None:
            out["cache_dtype"] = self.cache_dtype
        if self.enable_prefix_caching is not None:
            out["enable_prefix_caching"] = self.enable_prefix_caching
        if self.histograms:
            shown = [key for key in HISTOGRAM_KEYS if key in self.histograms]
            out["histograms"] = {key: self.histograms[key].as_dict() for key in shown}
        return out


@dataclass(frozen=True)
class ScrapeResult:
    """One scrape of one target, in Prometheus's terms: ``up``, how long it took, how many samples it read."""

    url: str
    up: bool
    error: str | None
    duration_ms: float
    scraped_at: float
    engines: tuple[EngineRecord, ...]
    rejected: tuple[str, ...]
    series_count: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "up": self.up,
            "error": self.error,
            "duration_ms": round(self.duration_ms, 3),
            "scraped_at": self.scraped_at,
            "series_count": self.series_count,
            "engines": [engine.as_dict() for engine in self.engines],
            "rejected": list(self.rejected),
        }
