"""Checks shared by every entry point: numbers that must be finite, positive, integral, in range.

Each helper records a message in an ``errors`` dict under the caller's field name instead of raising,
so one ``SizingInputError`` can list every bad field at once.
"""

from __future__ import annotations

import math
from typing import Any

from .errors import SizingInputError

_MISSING = object()

# The most layers a model may have: 4x the deepest real decoder (Llama 3.1 405B, 126). Plans and searches cost
# time and response size in proportion to it (per-layer patterns and pipeline stages).
MAX_LAYERS = 256


def as_int(
    errors: dict[str, str],
    field: str,
    value: Any,
    *,
    minimum: int = 1,
    maximum: int = 2**31,
) -> int | None:
    """``value`` as an int in ``[minimum, maximum]``; integral floats (JSON ``4096.0``) are accepted."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        errors[field] = f"must be an integer, got {type(value).__name__}"
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            errors[field] = f"must be an integer, got {value!r}"
            return None
        value = int(value)
    if value < minimum:
        errors[field] = f"must be at least {minimum}, got {value}"
        return None
    if value > maximum:
        errors[field] = f"must be at most {maximum}, got {value}"
        return None
    return int(value)


def as_float(
    errors: dict[str, str],
    field: str,
    value: Any,
    *,
    minimum: float = 0.0,
    maximum: float = math.inf,
    inclusive_minimum: bool = True,
) -> float | None:
    """``value`` as a finite float in the range; bools, strings, NaN and infinities are rejected."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        errors[field] = f"must be a number, got {type(value).__name__}"
        return None
    number = float(value)
    if not math.isfinite(number):
        errors[field] = f"must be a finite number, got {number!r}"
        return None
    if number < minimum or (number == minimum and not inclusive_minimum):
        bound = "at least" if inclusive_minimum else "greater than"
        errors[field] = f"must be {bound} {minimum:g}, got {number:g}"
        return None
    if number > maximum:
        errors[field] = f"must be at most {maximum:g}, got {number:g}"
        return None
    return number


def as_choice(errors: dict[str, str], field: str, value: Any, choices: tuple[str, ...]) -> str | None:
    if not isinstance(value, str) or value not in choices:
        errors[field] = f"must be one of {', '.join(choices)}; got {value!r}"
        return None
    return value


def check_param_counts(num_params: Any, num_active_params: Any) -> None:
    """Parameter counts a caller gives beside a config: whole numbers up to 10^15, else ``SizingInputError``."""
    errors: dict[str, str] = {}
    if num_params is not None:
        as_int(errors, "num_params", num_params, maximum=10**15)
    if num_active_params is not None:
        as_int(errors, "num_active_params", num_active_params, maximum=10**15)
    if errors:
        raise SizingInputError(errors)
