"""Request checks that apply to every page and API call."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

API_PREFIX = "/api/"
# Pages that check their own query parameters (the monitor's overview ignores a filter it cannot use).
OWN_CHECKS_PREFIXES = ("/monitor/",)


def bad_request_response(
    request: HttpRequest, message: str, *, field: str = "detail", status: int = 400
) -> HttpResponse:
    """A 4xx in the caller's language: JSON for the API, plain text for pages."""
    if request.path.startswith(API_PREFIX):
        return JsonResponse({field: message}, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


class RejectNulMiddleware:
    """A NUL (%00) in a query parameter is a 400 here, in the path a 404 (no slug of ours holds one).

    PostgreSQL refuses NUL in any text it compares, so one reaching a lookup or a search is a 500 otherwise; no
    slug, search or filter of ours can contain one.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(OWN_CHECKS_PREFIXES):
            return self.get_response(request)
        if "\x00" in request.path:
            return bad_request_response(request, "Not found: no address contains NUL (%00) characters.", status=404)
        for key, values in request.GET.lists():
            if "\x00" in key or any("\x00" in value for value in values):
                name = key.replace("\x00", "")
                return bad_request_response(
                    request, f"Query parameter {name!r} cannot contain NUL (%00) characters.", field=name or "detail"
                )
        return self.get_response(request)
