"""Times as Prometheus' HTTP API takes them: Unix seconds (fractions allowed) or RFC 3339."""

from __future__ import annotations

import datetime as dt
import math

from django.utils.dateparse import parse_datetime

MAX_UNIX = 32503680000  # year 3000


class TimeParseError(ValueError):
    """Not a time: the message says what is accepted."""


def parse_time(text: str | None) -> dt.datetime:
    raw = str(text or "").strip()
    if not raw or "\x00" in raw or len(raw) > 64:
        raise TimeParseError("use Unix seconds or an RFC 3339 time such as 2026-12-01T04:00:00Z")
    try:
        seconds = float(raw)
    except ValueError:
        try:
            moment = parse_datetime(raw)
        except ValueError:
            moment = None
        if moment is None:
            raise TimeParseError("use Unix seconds or an RFC 3339 time such as 2026-12-01T04:00:00Z") from None
        return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
    if not math.isfinite(seconds) or not 0 <= seconds < MAX_UNIX:
        raise TimeParseError("Unix seconds between 0 and the year 3000")
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)
