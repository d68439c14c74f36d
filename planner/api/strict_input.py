"""Request bodies that say exactly what they mean: unknown fields and unstorable text are per-field 400s."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from planner.json_documents import text_problem

# Names echoed back in a message are cut short and made printable (a lone surrogate cannot be encoded).
_NAME_SHOWN = 60
_UNKNOWN_REPORTED = 20


def _shown(name: str) -> str:
    return name[:_NAME_SHOWN].encode("utf-8", "backslashreplace").decode("utf-8")


class StrictInputMixin:
    """For input serializers: a field the serializer does not have is an error, not silently dropped (a typo such
    as ``max_model_length`` would otherwise plan with the default); text fields must be storable text.

    Read-only fields a client sends back (``id``, ``plan``) are known and still ignored.
    """

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            known = set(self.fields)  # type: ignore[attr-defined]
            errors: dict[str, list[str]] = {}
            for name in sorted(set(data) - known)[:_UNKNOWN_REPORTED]:
                close = difflib.get_close_matches(name, sorted(known), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                errors[_shown(name)] = [f"unknown field{hint}"]
            for name, value in data.items():
                if name in known and isinstance(value, str) and (problem := text_problem(value)):
                    errors[name] = [problem]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)  # type: ignore[misc]
