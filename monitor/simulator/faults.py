"""Ways a simulated server misbehaves, for tests and demos of the monitor's scrape health.

- ``hang``: the connection is accepted but nothing is ever answered (the scraper must time out).
- ``down``: the server stops listening (connection refused), for ``duration`` seconds or until cleared.
- ``slow``: every answer waits ``delay`` seconds first.
- ``garbage``: ``/metrics`` answers 200 with text that is not the Prometheus format.
- ``restart``: the engines restart at once: requests lost, counters back to zero, new ``_created`` stamps.
  It is an event, not a state: the mode goes back to ``none``.
The control endpoint ``/fault`` itself is never affected, so a fault can always be cleared over HTTP
(except ``down``, which needs a ``duration``, or a call on the server object).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FAULT_MODES = ("none", "hang", "down", "slow", "garbage", "restart")
DEFAULT_SLOW_DELAY_S = 5.0
MAX_FAULT_SECONDS = 24 * 3600.0

GARBAGE_BODY = (
    "<html><body><h1>502 Bad Gateway</h1>\n"
    "vllm:kv_cache_usage_perc{{{{ not a metric\n"
    "\x00\x01 this is not the Prometheus text format = = =\n"
    "</body></html>\n"
)


@dataclass(frozen=True)
class Fault:
    mode: str = "none"
    delay_s: float = DEFAULT_SLOW_DELAY_S
    duration_s: float | None = None  # None: until changed


def _seconds(raw: str | None, field: str, errors: dict[str, str], *, allow_zero: bool) -> float | None:
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        errors[field] = "must be a number of seconds."
        return None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero) or value > MAX_FAULT_SECONDS:
        errors[field] = f"must be between 0 and {MAX_FAULT_SECONDS:.0f} seconds."
        return None
    return value


def parse_fault(mode: str | None, delay: str | None = None, duration: str | None = None) -> tuple[Fault | None, dict]:
    """A fault from request or command-line strings: ``(fault, {})`` or ``(None, {field: message})``."""
    errors: dict[str, str] = {}
    if mode not in FAULT_MODES:
        errors["mode"] = f"must be one of {', '.join(FAULT_MODES)}."
    delay_s = _seconds(delay, "delay", errors, allow_zero=True)
    duration_s = _seconds(duration, "duration", errors, allow_zero=False)
    if errors:
        return None, errors
    delay_s = DEFAULT_SLOW_DELAY_S if delay_s is None else delay_s
    return Fault(mode=mode or "none", delay_s=delay_s, duration_s=duration_s), {}
