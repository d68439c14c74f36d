"""Request parsers that turn every malformed body into a 400."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class JSONBodyParser(JSONParser):
    """DRF's JSON parser, plus: a body nested deeper than Python's recursion limit is a 400, not a 500;
    and JSON's ``Infinity``/``NaN`` extensions are read (real HF configs contain them: Nemotron-H's
    ``time_step_limit``). Number fields still refuse non-finite values (DRF's FloatField), and configs are
    stored with them as strings (``ModelProfile.save``).

    (json.loads raises RecursionError for ``[[[[...]]]]``, which DRF's parser does not catch.)
    """

    strict = False

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - nested too deeply") from exc
