from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from kvdash.health import run_checks


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
