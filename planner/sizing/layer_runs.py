"""A layer pattern written compactly: runs of a repeated unit instead of one entry per layer.

``(0, 1) * 128`` becomes ``[{"unit": [0, 1], "repeat": 128}]``; Gemma 3's 62 layers (five sliding, one full)
``[{"unit": [0, 0, 0, 0, 0, 1], "repeat": 10}, {"unit": [0], "repeat": 2}]``. An answer's size then follows the
pattern's regularity, not the model's depth."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

# Longest unit tried: real periods are short (2 to 8 layers); a longer one would not shrink the answer much.
MAX_UNIT = 16


def _repeats(pattern: tuple[int, ...], start: int, period: int) -> int:
    unit = pattern[start : start + period]
    count = 1
    position = start + period
    while pattern[position : position + period] == unit:
        count += 1
        position += period
    return count


@lru_cache(maxsize=256)
def layer_runs(pattern: tuple[int, ...]) -> tuple[tuple[tuple[int, ...], int], ...]:
    """``pattern`` as (unit, repeat) runs: at each position the unit covering the most layers (the shortest
    on a tie); units seen once in a row are merged into one literal run."""
    runs: list[tuple[tuple[int, ...], int]] = []
    literal: list[int] = []
    start = 0
    while start < len(pattern):
        best_period, best_repeat = 1, 1
        for period in range(1, min(MAX_UNIT, len(pattern) - start) + 1):
            repeat = _repeats(pattern, start, period)
            if repeat > 1 and repeat * period > best_repeat * best_period:
                best_period, best_repeat = period, repeat
        if best_repeat == 1:
            literal.append(pattern[start])
            start += 1
            continue
        if literal:
            runs.append((tuple(literal), 1))
            literal = []
        runs.append((pattern[start : start + best_period], best_repeat))
        start += best_period * best_repeat
    if literal:
        runs.append((tuple(literal), 1))
    return tuple(runs)


def layer_runs_json(pattern: tuple[int, ...]) -> list[dict[str, Any]]:
    return [{"unit": list(unit), "repeat": repeat} for unit, repeat in layer_runs(pattern)]
