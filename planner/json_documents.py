"""Checks for JSON documents that callers hand us to store or to read: what PostgreSQL's text and jsonb types
cannot hold, and shapes no real document has.

PostgreSQL refuses NUL in text and jsonb, refuses text that is not valid Unicode (a lone surrogate such as the
JSON escape ``"\\ud800"``), and its jsonb has no NaN or infinity (Python's json reads ``NaN``, ``Infinity`` and
``1e400`` as floats it cannot write back). Each would be a 500 on save; here it is a message.
"""

from __future__ import annotations

import math
from typing import Any

# An HF config.json nests three or four levels (text_config -> rope_scaling -> ...); 32 leaves ample headroom
# while staying far below the depth at which json.loads/json.dumps hit Python's recursion limit.
MAX_DEPTH = 32
# The largest real configs (with id2label maps of a few thousand labels) hold some 10,000 values.
MAX_VALUES = 100_000


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as text, or None."""
    if "\x00" in text:
        return "cannot contain NUL characters"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text (a lone surrogate such as \\ud800)"
    return None


def document_problem(
    document: Any, *, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES, allow_non_finite: bool = False
) -> str | None:
    """Why a parsed JSON document cannot be stored (or is not a plausible document), or None.

    ``allow_non_finite`` for HF configs: real ones hold ``Infinity`` (Nemotron-H's time_step_limit), which
    ModelProfile.save stores as a string.

    Iterative, so a document nested deeper than the recursion limit is reported, not a RecursionError.
    """
    pending: list[tuple[Any, int, str]] = [(document, 1, "")]
    seen = 0
    while pending:
        item, depth, path = pending.pop()
        seen += 1
        if seen > max_values:
            return f"holds more than {max_values:,} values"
        if isinstance(item, dict | list):
            if depth > max_depth:
                return f"is nested more than {max_depth} levels deep"
            if isinstance(item, dict):
                for key, value in item.items():
                    problem = text_problem(key) if isinstance(key, str) else "is not text"
                    if problem:
                        # Not the key itself in the message: it is what cannot be shown.
                        return f"a key under {path or 'the top level'} {problem}"
                    pending.append((value, depth + 1, _where(path, key)))
            else:
                pending.extend((value, depth + 1, f"{path}[{index}]") for index, value in enumerate(item))
        elif isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return f"{path or 'the value'} {problem}"
        elif isinstance(item, float) and not math.isfinite(item) and not allow_non_finite:
            return f"{path or 'the value'} is {item!r}: JSON numbers must be finite (NaN, Infinity, 1e400 are not)"
    return None


def _where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
