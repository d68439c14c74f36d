"""Rate limits for anonymous callers of the sizing endpoints."""

from __future__ import annotations

from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle


class AnonSizingThrottle(AnonRateThrottle):
    """Anonymous sizing calls per client IP, at REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["anon_sizing"].

    Signed-in callers are not throttled here (AnonRateThrottle skips them).
    """

    scope = "anon_sizing"

    def get_rate(self) -> str | None:
        # DRF copies the rates onto the class at import; read them per request so settings overrides apply.
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
