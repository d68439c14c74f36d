from __future__ import annotations

from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from kvdash.health import run_checks
from kvdash.middleware import bad_request_response


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    checks = run_checks()
    ok = all(check.ok for check in checks)
    body = {
        "status": "ok" if ok else "fail",
        "failing": [check.name for check in checks if not check.ok],
        "checks": {check.name: {"ok": check.ok} for check in checks},
    }
    return JsonResponse(body, status=200 if ok else 503)


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html")


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 400 (a body over DATA_UPLOAD_MAX_MEMORY_SIZE, too many fields, a bad Host): JSON for the API."""
    if isinstance(exception, RequestDataTooBig | TooManyFieldsSent | TooManyFilesSent):
        message = "The request body is too large or has too many fields."
    else:
        message = "Bad request."
    return bad_request_response(request, message)
