"""The alerts page: firing, acknowledged and resolved alerts, with acknowledge and silence buttons. Reading
follows the monitor's rule (KVDASH_PUBLIC_MONITOR or signed in); acting needs ``monitor.change_alert``."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from monitor.alerting import alert_acknowledge, alert_queryset, alerts_overview, silence_create, silence_expire
from monitor.api.permissions import can_read_monitor
from monitor.models import AlertState, Silence
from monitor.services import MonitorInputError

SILENCE_HOURS = [(1, "1 hour"), (4, "4 hours"), (24, "1 day"), (168, "1 week")]


class AlertFilterForm(forms.Form):
    state = forms.ChoiceField(choices=[("", "All"), *AlertState.choices], required=False)


class SilenceForm(forms.Form):
    hours = forms.TypedChoiceField(choices=SILENCE_HOURS, coerce=int, initial=4)
    scope = forms.ChoiceField(
        choices=[("alert", "this rule on this endpoint"), ("endpoint", "every rule on this endpoint")],
        initial="alert",
    )
    comment = forms.CharField(max_length=500, required=False)


def _may_act(request: HttpRequest) -> None:
    if not request.user.has_perm("monitor.change_alert"):
        raise PermissionDenied("Acknowledging and silencing alerts needs the monitor's change alert right.")


def _has_nul(request: HttpRequest) -> bool:
    # The ORM refuses NUL in PostgreSQL text: answer 400 before it gets there.
    return any("\x00" in value for query in (request.GET, request.POST) for value in query.values())


def alerts_page(request: HttpRequest) -> HttpResponse:
    if not can_read_monitor(request.user):
        return redirect_to_login(request.get_full_path())
    form = AlertFilterForm(request.GET)
    if _has_nul(request) or not form.is_valid():
        return HttpResponseBadRequest("Unknown state: use firing, acknowledged or resolved.")
    state = form.cleaned_data["state"]
    context = {
        **alerts_overview(state=state),
        "state": state,
        "states": AlertState.choices,
        "can_act": request.user.has_perm("monitor.change_alert"),
        "silence_form": SilenceForm(),
    }
    return render(request, "monitor/alerts.html", context)


@require_POST
def alert_acknowledge_view(request: HttpRequest, pk: int) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    _may_act(request)
    alert = get_object_or_404(alert_queryset(), pk=pk)
    try:
        alert_acknowledge(alert=alert, user=request.user)
    except MonitorInputError as error:
        messages.error(request, "; ".join(error.errors.values()))
    else:
        messages.success(request, f"Acknowledged “{alert.rule.name}” on {alert.endpoint.display_name}.")
    return redirect("monitor:alerts")


@require_POST
def alert_silence_view(request: HttpRequest, pk: int) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    _may_act(request)
    alert = get_object_or_404(alert_queryset(), pk=pk)
    form = SilenceForm(request.POST)
    if _has_nul(request) or not form.is_valid():
        return HttpResponseBadRequest("Choose a silence length and scope from the form.")
    data = form.cleaned_data
    silence = silence_create(
        user=request.user,
        duration=dt.timedelta(hours=data["hours"]),
        rule=alert.rule if data["scope"] == "alert" else None,
        endpoint=alert.endpoint,
        comment=data["comment"],
    )
    messages.success(request, f"Notifications held back: {silence} UTC.")
    return redirect("monitor:alerts")


@require_POST
def silence_expire_view(request: HttpRequest, pk: int) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    _may_act(request)
    silence_expire(silence=get_object_or_404(Silence, pk=pk))
    messages.success(request, "Silence ended: notifications resume.")
    return redirect("monitor:alerts")
