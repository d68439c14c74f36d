"""The one error type of the sizing engine."""

from __future__ import annotations


class SizingInputError(ValueError):
    """Inputs the engine cannot size: ``errors`` maps each offending input field to a message.

    Everything the engine rejects (malformed HF configs, impossible parallel layouts, absurd numbers)
    is reported this way, so callers (forms, the REST API, the simulator) handle a single type.
    """

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors: dict[str, str] = dict(errors)
        super().__init__("; ".join(f"{field}: {message}" for field, message in self.errors.items()))
