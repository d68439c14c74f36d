"""Rate limits for anonymous callers of the sizing endpoints."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle

from kvdash.client_address import client_address


class AnonSizingThrottle(AnonRateThrottle):
    """Anonymous sizing calls per client IP, at REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["anon_sizing"].

    Signed-in callers are not throttled here (AnonRateThrottle skips them). Counts live in the shared cache (Redis or
    the database, see settings.CACHES), so every worker and replica counts against one limit.
    """

    scope = "anon_sizing"

    def get_rate(self) -> str | None:
        # DRF copies the rates onto the class at import; read them per request so settings overrides apply.
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_ident(self, request: Request) -> str:
        # DRF's own reads X-Forwarded-For from anyone when NUM_PROXIES is unset: a new made-up address per call
        # would never be limited.
        return client_address(request.META)
