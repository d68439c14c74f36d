"""Read series from a Prometheus-compatible HTTP query API (``/api/v1/query``, ``/api/v1/query_range``).

A plain class: it returns parsed results and raises ``ScrapeError`` (with ``retryable``); it never touches
the ORM. The response shapes are Prometheus' documented ones: ``{"status": "success", "data": {"resultType":
"vector" | "matrix", "result": [...]}}``, sample values as strings ("NaN" and "+Inf" included), errors as
``{"status": "error", "errorType": ..., "error": ...}`` with HTTP 400, 422 or 503.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests

from .records import ScrapeError
from .vllm import _connection_error

# A query result is a few series of a few hundred points; the cap only stops a runaway answer.
MAX_BODY_BYTES = 8 * 1024 * 1024

# One label matcher: name, operator, a double-quoted value with escapes (PromQL's own syntax).
_MATCHER = r'[ \t]*[a-zA-Z_][a-zA-Z0-9_]*[ \t]*(?:=~|!~|!=|=)[ \t]*"(?:[^"\\\n]|\\[^\n])*"[ \t]*'
_SELECTOR = re.compile(rf"\{{{_MATCHER}(?:,{_MATCHER})*,?[ \t]*\}}")


def selector_valid(selector: str) -> bool:
    """``{label="value", ...}`` with at least one matcher: an empty selector would read every server as one."""
    return len(selector) <= 500 and _SELECTOR.fullmatch(selector) is not None


@dataclass(frozen=True)
class PromSeries:
    """One series of a query result: its labels and its finite (time, value) points in time order.
    Points whose value is NaN or infinite are left out: a gap, never a number."""

    labels: dict[str, str]
    points: tuple[tuple[float, float], ...]


class PrometheusClient:
    """One source's query API over one HTTP session; ``bearer_token`` is sent on every request."""

    def __init__(
        self, *, base_url: str, bearer_token: str = "", timeout: float = 5.0, session: requests.Session | None = None
    ) -> None:
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        if not (math.isfinite(timeout) and timeout > 0):
            raise ValueError("timeout must be a positive number of seconds")
        self.base_url = base_url.strip().rstrip("/")
        self.timeout = float(timeout)
        self.session = session if session is not None else requests.Session()
        self.headers = {"Accept": "application/json"}
        if bearer_token:
            self.headers["Authorization"] = f"Bearer {bearer_token}"

    def query(self, promql: str, *, at: float | None = None) -> list[PromSeries]:
        """An instant query (``/api/v1/query``): a vector (one point per series) or, for a range selector, a
        matrix."""
        params: dict[str, str] = {"query": promql}
        if at is not None:
            params["time"] = _seconds(at)
        return self._get("/api/v1/query", params)

    def query_range(self, promql: str, *, start: float, end: float, step: float) -> list[PromSeries]:
        """A range query (``/api/v1/query_range``): a matrix on the grid start, start + step, ..., end."""
        params = {"query": promql, "start": _seconds(start), "end": _seconds(end), "step": _seconds(step)}
        return self._get("/api/v1/query_range", params)

    def _get(self, path: str, params: dict[str, str]) -> list[PromSeries]:
        try:
            # POST form is what Grafana uses for long queries; GET keeps the fixtures and proxies simple.
            response = self.session.get(
                self.base_url + path, params=params, headers=self.headers, timeout=self.timeout, stream=True
            )
        except requests.TooManyRedirects:
            raise ScrapeError("too many redirects", retryable=False) from None
        except requests.RequestException as error:
            raise _connection_error(error, self.timeout) from None
        with response:
            body = self._body(response)
        if response.status_code in (401, 403):
            raise ScrapeError(f"HTTP {response.status_code}: check the source's bearer token", retryable=False)
        payload = _json(body, response.status_code)
        if payload.get("status") != "success":
            kind, message = str(payload.get("errorType", "")), str(payload.get("error", ""))
            # Prometheus answers 503 for timeouts and cancellations, 4xx for a query it will never run.
            retryable = response.status_code >= 500 or response.status_code == 429 or kind in ("timeout", "canceled")
            raise ScrapeError(f"HTTP {response.status_code} {kind}: {message}"[:300], retryable=retryable)
        if response.status_code != 200:
            raise ScrapeError(f"HTTP {response.status_code}", retryable=response.status_code >= 500)
        return _result(payload.get("data"))

    def _body(self, response: requests.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.iter_content(64 * 1024):
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise ScrapeError(f"answer larger than {MAX_BODY_BYTES} bytes", retryable=False)
                chunks.append(chunk)
        except requests.RequestException as error:
            raise _connection_error(error, self.timeout) from None
        return b"".join(chunks)


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def _json(body: bytes, status_code: int) -> dict[str, Any]:
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        retryable = status_code >= 500 or status_code == 429
        raise ScrapeError(f"HTTP {status_code}: the answer is not JSON", retryable=retryable) from None
    if not isinstance(payload, dict):
        raise ScrapeError("the answer is not a JSON object", retryable=False)
    return payload


def _point(pair: Any) -> tuple[float, float] | None:
    if not isinstance(pair, list | tuple) or len(pair) != 2:
        raise ScrapeError("malformed sample in the answer", retryable=False)
    try:
        moment, value = float(pair[0]), float(pair[1])  # values are strings: "1.5", "NaN", "+Inf"
    except (TypeError, ValueError):
        raise ScrapeError("malformed sample in the answer", retryable=False) from None
    return (moment, value) if math.isfinite(value) and math.isfinite(moment) else None


def _result(data: Any) -> list[PromSeries]:
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise ScrapeError("the answer has no data.result", retryable=False)
    kind = data.get("resultType")
    if kind not in ("vector", "matrix"):
        raise ScrapeError(f"expected a vector or a matrix, got {kind!r}", retryable=False)
    series: list[PromSeries] = []
    for item in data["result"]:
        if not isinstance(item, dict) or not isinstance(item.get("metric", {}), dict):
            raise ScrapeError("malformed series in the answer", retryable=False)
        raw = [item.get("value")] if kind == "vector" else item.get("values")
        if not isinstance(raw, list):
            raise ScrapeError("malformed series in the answer", retryable=False)
        points = tuple(sorted(point for pair in raw if (point := _point(pair)) is not None))
        labels = {str(key): str(value) for key, value in item.get("metric", {}).items()}
        series.append(PromSeries(labels=labels, points=points))
    return series
