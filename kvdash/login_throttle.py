"""A limit on failed log-ins, per client address and per username, counted in the shared cache.

Password guessing from one address stops after LOGIN_FAILURE_LIMIT failures; guessing one account's password
from many addresses stops after the same number against that username. Both clear LOGIN_FAILURE_WINDOW seconds
after the first failure.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

from kvdash.client_address import client_address

View = Callable[..., HttpResponse]


def _keys(request: HttpRequest) -> list[str]:
    username = str(request.POST.get("username", "")).strip().lower()
    # Hashed: a username is arbitrary text, a cache key is not.
    user_key = hashlib.sha256(username.encode("utf-8", "backslashreplace")).hexdigest()
    address_key = hashlib.sha256(client_address(request.META).encode()).hexdigest()
    return [f"login-fail:addr:{address_key}", f"login-fail:user:{user_key}"]


def _record_failure(keys: list[str]) -> None:
    for key in keys:
        cache.add(key, 0, timeout=settings.LOGIN_FAILURE_WINDOW)
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr: start again
            cache.set(key, 1, timeout=settings.LOGIN_FAILURE_WINDOW)


def _locked(keys: list[str]) -> bool:
    return any((count or 0) >= settings.LOGIN_FAILURE_LIMIT for count in cache.get_many(keys).values())


def throttle_logins(view: View) -> View:
    """Wrap a log-in view (Django's LoginView, the admin's): a POST that shows the form again is a failure."""
    if getattr(view, "login_throttled", False):
        return view  # wrapped once already (the URLconf imported again): count each failure once

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method != "POST":
            return view(request, *args, **kwargs)
        keys = _keys(request)
        if _locked(keys):
            minutes = max(1, settings.LOGIN_FAILURE_WINDOW // 60)
            response = HttpResponse(
                f"Too many failed log-ins from this address or for this user. Try again in {minutes} minutes.",
                status=429,
                content_type="text/plain; charset=utf-8",
            )
            response["Retry-After"] = str(settings.LOGIN_FAILURE_WINDOW)
            return response
        response = view(request, *args, **kwargs)
        if response.status_code == 200:  # the form again, with its "wrong username or password"
            _record_failure(keys)
        return response

    wrapped.login_throttled = True  # type: ignore[attr-defined]
    return wrapped
