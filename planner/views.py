"""Planner pages. Each view checks who may do it, validates with a form, calls one selector or saves the
form, and renders; the numbers and sentences come from planner.selectors and planner.charts."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_http_methods, require_POST

from planner import charts, selectors, services
from planner.forms import (
    ENGINE_VERSION_SUGGESTIONS,
    CustomModelForm,
    ScenarioForm,
    ScenarioImportForm,
)
from planner.models import Scenario
from planner.permissions import can_delete_scenario, can_edit_scenario, is_planner
from planner.sizing import SizingInputError, plan_to_dict


def _require_planner(request: HttpRequest) -> None:
    if not is_planner(request.user):
        raise PermissionDenied("Only planners create or change scenarios.")


@login_required
def scenario_list(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("q", "").strip()[:200]
    model_slug = request.GET.get("model", "")[:100]
    gpu_slug = request.GET.get("gpu", "")[:100]
    sort = request.GET.get("sort", "-updated")
    scenarios = selectors.scenario_list(search=search, model_slug=model_slug, gpu_slug=gpu_slug, sort=sort)
    page = Paginator(scenarios, selectors.SCENARIOS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page": page,
        "rows": selectors.scenario_rows(scenarios=page.object_list),
        "search": search,
        "model_slug": model_slug,
        "gpu_slug": gpu_slug,
        "sort": sort if sort in selectors.SCENARIO_SORTS else "-updated",
        "models": selectors.model_choices(),
        "gpus": selectors.gpu_choices(),
        "query": query.urlencode(),
        "can_create": is_planner(request.user),
    }
    return render(request, "planner/scenario_list.html", context)


def _render_form(request: HttpRequest, form: ScenarioForm, *, title: str, scenario: Scenario | None) -> HttpResponse:
    context = {
        "form": form,
        "title": title,
        "scenario": scenario,
        "engine_versions": ENGINE_VERSION_SUGGESTIONS,
        "preview": _preview_context(form.plan) if form.plan else None,
    }
    return render(request, "planner/scenario_form.html", context)


def _preview_context(plan: Any) -> dict[str, Any]:
    return {"headline": selectors.plan_headline(plan=plan), "figures": selectors.plan_key_figures(plan=plan)}


@login_required
@require_http_methods(["GET", "POST"])
def scenario_create(request: HttpRequest) -> HttpResponse:
    _require_planner(request)
    if request.method == "POST":
        form = ScenarioForm(request.POST)
        if form.is_valid():
            scenario = services.scenario_create(owner=request.user, data=form.scenario_data())
            messages.success(request, f"Saved “{scenario.name}”.")
            return redirect("planner:scenario-detail", pk=scenario.pk)
    else:
        # ?model=<slug>&gpu=<slug> preselects, so other pages can link straight to a question.
        initial = {key: request.GET[key] for key in ("model", "gpu", "name") if key in request.GET}
        form = ScenarioForm(initial=initial)
    return _render_form(request, form, title="New scenario", scenario=None)


@login_required
@require_http_methods(["GET", "POST"])
def scenario_edit(request: HttpRequest, pk: int) -> HttpResponse:
    scenario = get_object_or_404(selectors.scenario_queryset(), pk=pk)
    if not can_edit_scenario(request.user, scenario):
        raise PermissionDenied("Only the owner, staff or planners with change rights edit this scenario.")
    title = f"Edit {scenario.name}"
    if request.method == "POST":
        form = ScenarioForm(request.POST, instance=scenario)
        if form.is_valid():
            services.scenario_update(scenario=scenario, data=form.scenario_data())
            messages.success(request, "Saved.")
            return redirect("planner:scenario-detail", pk=scenario.pk)
    else:
        form = ScenarioForm(instance=scenario)
    return _render_form(request, form, title=title, scenario=scenario)


@login_required
@require_http_methods(["GET", "POST"])
def scenario_clone(request: HttpRequest, pk: int) -> HttpResponse:
    """A create form filled from the scenario; its Save writes a new scenario owned by the user."""
    _require_planner(request)
    source = get_object_or_404(selectors.scenario_queryset(), pk=pk)
    if request.method == "POST":
        form = ScenarioForm(request.POST)
        if form.is_valid():
            scenario = services.scenario_clone(source=source, owner=request.user, data=form.scenario_data())
            messages.success(request, f"Saved “{scenario.name}”, a copy of “{source.name}”.")
            return redirect("planner:scenario-detail", pk=scenario.pk)
    else:
        form = ScenarioForm(initial=services.scenario_clone_initial(source=source))
    return _render_form(request, form, title=f"Clone {source.name}", scenario=None)


@login_required
@require_POST
def scenario_preview(request: HttpRequest) -> JsonResponse:
    """The live recompute behind the form: the headline and key numbers, or the field errors."""
    form = ScenarioForm(request.POST, preview=True)
    if not form.is_valid() or form.plan is None:
        return JsonResponse({"ok": False, "errors": form.errors.get_json_data()}, status=400)
    html = render_to_string("planner/_preview.html", {"preview": _preview_context(form.plan)}, request=request)
    return JsonResponse({"ok": True, "html": html, "fits": form.plan.fits, "plan": plan_to_dict(form.plan)})


@login_required
def scenario_detail(request: HttpRequest, pk: int) -> HttpResponse:
    scenario = get_object_or_404(selectors.scenario_queryset(), pk=pk)
    outcome = selectors.scenario_outcome(scenario=scenario)
    plan = outcome.plan
    context: dict[str, Any] = {
        "scenario": scenario,
        "outcome": outcome,
        "can_edit": can_edit_scenario(request.user, scenario),
        "can_delete": can_delete_scenario(request.user, scenario),
        "can_clone": is_planner(request.user),
    }
    if plan is not None:
        context.update(
            headline=selectors.plan_headline(plan=plan),
            key_figures=selectors.plan_key_figures(plan=plan),
            memory_rows=selectors.plan_memory_rows(plan=plan),
            plan=plan,
            figures=charts.detail_figures(plan=plan),
            chart_slots=charts.chart_slots(plan=plan),
        )
    return render(request, "planner/scenario_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def scenario_delete(request: HttpRequest, pk: int) -> HttpResponse:
    scenario = get_object_or_404(selectors.scenario_queryset(), pk=pk)
    if not can_delete_scenario(request.user, scenario):
        raise PermissionDenied("Only the owner or staff delete a scenario.")
    if request.method == "POST":
        name = scenario.name
        services.scenario_delete(scenario=scenario)
        messages.success(request, f"Deleted “{name}”.")
        return redirect("planner:scenario-list")
    return render(request, "planner/scenario_confirm_delete.html", {"scenario": scenario})


@login_required
def scenario_export(request: HttpRequest, pk: int) -> HttpResponse:
    scenario = get_object_or_404(selectors.scenario_queryset(), pk=pk)
    document = selectors.scenario_export_document(scenario=scenario)
    response = HttpResponse(json.dumps(document, indent=2) + "\n", content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="scenario-{scenario.pk}.json"'
    return response


@login_required
@require_http_methods(["GET", "POST"])
def scenario_import(request: HttpRequest) -> HttpResponse:
    _require_planner(request)
    if request.method == "POST":
        form = ScenarioImportForm(request.POST, request.FILES)
        if form.is_valid() and form.scenario_form is not None:
            scenario = services.scenario_create(owner=request.user, data=form.scenario_form.scenario_data())
            messages.success(request, f"Imported “{scenario.name}”.")
            return redirect("planner:scenario-detail", pk=scenario.pk)
    else:
        form = ScenarioImportForm()
    return render(request, "planner/scenario_import.html", {"form": form})


@login_required
def scenario_compare(request: HttpRequest) -> HttpResponse:
    ids = [int(v) for v in request.GET.getlist("ids") if v.isdigit() and len(v) < 19]
    scenarios = selectors.scenarios_by_ids(ids=ids)
    context: dict[str, Any] = {"scenarios": scenarios, "min": selectors.COMPARE_MIN, "max": selectors.COMPARE_MAX}
    if not selectors.COMPARE_MIN <= len(scenarios) <= selectors.COMPARE_MAX:
        context["problem"] = f"Pick {selectors.COMPARE_MIN} to {selectors.COMPARE_MAX} scenarios to compare."
        return render(request, "planner/scenario_compare.html", context, status=400)
    rows = selectors.scenario_rows(scenarios=scenarios)
    outcomes = [row.outcome for row in rows]
    context.update(
        rows=rows,
        table=selectors.compare_rows(outcomes=outcomes),
        figures=charts.compare_figures(scenarios=scenarios, outcomes=outcomes),
    )
    return render(request, "planner/scenario_compare.html", context)


@login_required
def model_list(request: HttpRequest) -> HttpResponse:
    # A list of names: no config.json is decoded to list models.
    context = {"models": selectors.model_profiles().defer("config"), "can_create": is_planner(request.user)}
    return render(request, "planner/model_list.html", context)


@login_required
def model_detail(request: HttpRequest, slug: str) -> HttpResponse:
    profile = get_object_or_404(selectors.model_profiles(), slug=slug)
    context: dict[str, Any] = {"profile": profile, "config": json.dumps(profile.config, indent=2)}
    try:
        context["shape"] = selectors.model_shape(spec=profile.spec())
    except SizingInputError as error:
        context["spec_errors"] = error.errors
    return render(request, "planner/model_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def model_create(request: HttpRequest) -> HttpResponse:
    """Paste or upload a config.json; "Check" shows the derived shape, "Save" stores the model."""
    _require_planner(request)
    shape = None
    if request.method == "POST":
        form = CustomModelForm(request.POST, request.FILES)
        if form.is_valid() and form.spec is not None:
            if "save" in request.POST:
                try:
                    profile, _ = services.custom_model_create(
                        config=form.config or {},
                        name=form.cleaned_data["name"],
                        user=request.user,
                        source="pasted or uploaded config.json",
                        slug=form.cleaned_data.get("slug") or "",
                        hf_id=form.cleaned_data.get("hf_id") or "",
                        params_b=form.cleaned_data.get("params_b"),
                        params_active_b=form.cleaned_data.get("params_active_b"),
                        notes=form.cleaned_data.get("notes") or "",
                    )
                except SizingInputError as error:
                    form.add_service_errors(error)
                    return render(request, "planner/model_form.html", {"form": form, "shape": None})
                messages.success(request, f"Saved model “{profile.name}” ({profile.slug}).")
                return redirect("planner:model-detail", slug=profile.slug)
            shape = selectors.model_shape(spec=form.spec)
            # Show the parsed config in the text box: a browser never re-sends an uploaded file.
            data = request.POST.copy()
            data["config_text"] = json.dumps(form.config, indent=2)
            form = CustomModelForm(data)
            form.is_valid()
    else:
        form = CustomModelForm()
    return render(request, "planner/model_form.html", {"form": form, "shape": shape})
