"""Number formats for the monitor's pages (the same ones monitor-fleet.js writes when it refreshes).
Anything that is not a number (a missing value, the empty tile template) shows as a dash."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()
DASH = "–"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@register.filter
def pct(value: Any) -> str:
    number = _number(value)
    return DASH if number is None else f"{number * 100:.1f}%"


@register.filter
def rate(value: Any) -> str:
    number = _number(value)
    return DASH if number is None else f"{number:.2f}"


@register.filter
def tokens(value: Any) -> str:
    number = _number(value)
    if number is None:
        return DASH
    if number >= 1_000_000:
        return f"{number / 1_000_000:.2f}M"
    if number >= 1_000:
        return f"{number / 1_000:.1f}K"
    return f"{number:.0f}"
