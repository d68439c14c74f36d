"""Where the simulator meets the planner's database: plans from saved scenarios or catalog slugs, and the
demo scenarios the fleet is tied to (created when missing, never changed once they exist, so a planner's
edits to them survive restarts)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from planner.models import GpuProfile, ModelProfile, Scenario
from planner.plan_inputs import plan_inputs_from_values
from planner.selectors import gpu_spec_by_slug, model_spec_by_slug, scenario_queryset
from planner.services import catalog_load, scenario_create, scenario_plan
from planner.sizing import ModelSpec, Plan, catalog_gpus, catalog_models, compute_plan

from .fleet import FLEET_MAX_STEPS_PER_SECOND, FleetMember
from .spec import ServerSpec

DEMO_USERNAME = "demo"


def scenario_served_model_name(*, scenario: Scenario) -> str:
    return scenario.model.hf_id or scenario.model.slug


def scenario_simulation_plan(*, scenario_id: int) -> tuple[Scenario, Plan]:
    """The scenario and its freshly computed plan. Raises Scenario.DoesNotExist or SizingInputError."""
    scenario = scenario_queryset().get(pk=scenario_id)
    return scenario, scenario_plan(scenario=scenario)


def _model_spec(slug: str) -> tuple[ModelSpec, str] | None:
    # Saved profiles first (the planner's reads), then the engine's own catalog when none is loaded.
    spec = model_spec_by_slug(slug=slug) or catalog_models().get(slug)
    return None if spec is None else (spec, spec.hf_id or slug)


def slug_simulation_plan(*, model_slug: str, gpu_slug: str, inputs: Mapping[str, Any]) -> tuple[Plan, str]:
    """A plan for a model and GPU named by slug (saved profiles first, then the catalog) and the served
    model name. ``inputs`` holds PlanInputs fields, turned into the engine's question the way the planner's
    forms and API turn theirs. Raises LookupError naming the unknown slug, or SizingInputError."""
    model = _model_spec(model_slug)
    if model is None:
        raise LookupError(f"model: no model with slug {model_slug!r}")
    gpu = gpu_spec_by_slug(slug=gpu_slug) or catalog_gpus().get(gpu_slug)
    if gpu is None:
        raise LookupError(f"gpu: no GPU with slug {gpu_slug!r}")
    spec, served_name = model
    return compute_plan(plan_inputs_from_values(model=spec, gpu=gpu, values=inputs)), served_name


def demo_user_ensure() -> AbstractBaseUser:
    """The owner of the demo scenarios; it cannot log in (no usable password)."""
    user, created = get_user_model().objects.get_or_create(
        username=DEMO_USERNAME, defaults={"email": "demo@example.com"}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


@transaction.atomic
def demo_scenario_ensure(*, name: str, model_slug: str, gpu_slug: str, inputs: dict[str, Any], notes: str) -> Scenario:
    """The demo scenario called ``name`` owned by the demo user, created (catalog loaded first if needed)
    when missing. An existing one is returned as it is: the fleet follows whatever the planner saved."""
    owner = demo_user_ensure()
    existing = scenario_queryset().filter(name=name, owner=owner).order_by("pk").first()
    if existing is not None:
        return existing
    have_model = ModelProfile.objects.filter(slug=model_slug).exists()
    if not (have_model and GpuProfile.objects.filter(slug=gpu_slug).exists()):
        catalog_load()
    data = {
        "name": name,
        "model": ModelProfile.objects.get(slug=model_slug),
        "gpu": GpuProfile.objects.get(slug=gpu_slug),
        "notes": notes,
        **inputs,
    }
    return scenario_create(owner=owner, data=data)


def demo_fleet_specs(
    *, members: Sequence[FleetMember], base_port: int, host: str = "127.0.0.1", time_scale: float = 1.0
) -> list[ServerSpec]:
    """One server spec per demo member on consecutive ports, each tied to its saved scenario (created if
    missing) and sized by that scenario's current plan. Raises SizingInputError if a saved scenario was
    edited into one that cannot be planned."""
    specs = []
    for offset, member in enumerate(members):
        scenario = demo_scenario_ensure(
            name=member.scenario_name,
            model_slug=member.model_slug,
            gpu_slug=member.gpu_slug,
            inputs=member.scenario_inputs,
            notes=member.notes,
        )
        scenario, plan = scenario_simulation_plan(scenario_id=scenario.pk)
        if member.server_overrides:
            # The server runs with other settings than its plan: size it as vLLM would with those.
            plan = compute_plan(dataclasses.replace(plan.inputs, **dict(member.server_overrides)))
        specs.append(
            ServerSpec(
                plan=plan,
                model_name=scenario_served_model_name(scenario=scenario),
                max_num_seqs=member.max_num_seqs,
                enable_prefix_caching=member.enable_prefix_caching,
                load=member.load,
                legacy_metrics=member.legacy_metrics,
                time_scale=time_scale,
                max_steps_per_second=FLEET_MAX_STEPS_PER_SECOND,
                host=host,
                port=base_port + offset,
                scenario_id=scenario.pk,
            )
        )
    return specs
