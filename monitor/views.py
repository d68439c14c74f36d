"""Monitor pages: fleet overview, endpoint page, planned-vs-actual report, and the JSON they refresh from.
Each view checks access, calls one selector and renders."""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render

from monitor.api.permissions import can_read_monitor
from monitor.charts import CHART_IDS, RANGES, chart_window, endpoint_figures
from monitor.fleet import fleet_filters, fleet_overview
from monitor.models import Endpoint
from monitor.planned import endpoint_planned
from monitor.report import endpoint_report, fleet_report
from monitor.saturation import endpoint_saturation
from monitor.selectors import endpoint_queryset
from monitor.timeparse import TimeParseError, parse_time


def _refused(request: HttpRequest) -> HttpResponse | None:
    if can_read_monitor(request.user):
        return None
    if request.path.endswith(".json"):
        return JsonResponse({"detail": "Sign in to read the monitor."}, status=403)
    return redirect_to_login(request.get_full_path())


def _clean_filter(request: HttpRequest, name: str) -> str:
    value = request.GET.get(name, "")
    return "" if "\x00" in value or len(value) > 200 else value


def fleet_page(request: HttpRequest) -> HttpResponse:
    if refused := _refused(request):
        return refused
    filters = {name: _clean_filter(request, name) for name in ("node", "model", "state")}
    overview = fleet_overview(**filters)
    return render(
        request,
        "monitor/fleet.html",
        {"overview": overview, "tiles": overview["tiles"], "filters": filters, "choices": fleet_filters()},
    )


def fleet_data(request: HttpRequest) -> HttpResponse:
    if refused := _refused(request):
        return refused
    filters = {name: _clean_filter(request, name) for name in ("node", "model", "state")}
    return JsonResponse(fleet_overview(**filters))


def _endpoint(pk: int) -> Endpoint:
    return get_object_or_404(endpoint_queryset(), pk=pk)


def endpoint_page(request: HttpRequest, pk: int) -> HttpResponse:
    if refused := _refused(request):
        return refused
    endpoint = _endpoint(pk)
    return render(
        request,
        "monitor/endpoint.html",
        {
            "endpoint": endpoint,
            "engines": [endpoint.latest[k] for k in sorted(endpoint.latest or {}, key=lambda k: (len(k), k))],
            "planned": endpoint_planned(endpoint=endpoint),
            "report": endpoint_report(endpoint=endpoint),
            "saturation": endpoint_saturation(endpoint=endpoint),
            "ranges": list(RANGES),
            "chart_ids": CHART_IDS,
        },
    )


def endpoint_charts(request: HttpRequest, pk: int) -> HttpResponse:
    if refused := _refused(request):
        return refused
    endpoint = _endpoint(pk)
    try:
        start = parse_time(request.GET.get("start")) if request.GET.get("start") else None
        end = parse_time(request.GET.get("end")) if request.GET.get("end") else None
        start, end, key = chart_window(range_key=request.GET.get("range"), start=start, end=end)
    except (TimeParseError, ValueError) as error:
        return JsonResponse({"range": [str(error)]}, status=400)
    saturation = endpoint_saturation(endpoint=endpoint)
    endpoint.refresh_from_db()
    return JsonResponse(
        {
            "range": key,
            "start": start.isoformat(),
            "end": end.isoformat(),
            "figures": endpoint_figures(endpoint=endpoint, start=start, end=end),
            "up": endpoint.up,
            "last_scrape_at": endpoint.last_scrape_at.isoformat() if endpoint.last_scrape_at else None,
            "last_error": endpoint.last_error,
            "saturation": saturation.label,
        }
    )


def report_page(request: HttpRequest) -> HttpResponse:
    if refused := _refused(request):
        return refused
    return render(request, "monitor/report.html", {"rows": fleet_report()})
