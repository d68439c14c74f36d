from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def fleet_overview(request: HttpRequest) -> HttpResponse:
    return render(request, "monitor/fleet.html")
