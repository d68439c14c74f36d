"""Writes and plan computation for the planner. Views and API views call these; no arithmetic lives there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.db import transaction

from planner.models import GIB, SCENARIO_INPUT_FIELDS, GpuProfile, ModelProfile, Scenario
from planner.plan_inputs import scenario_plan_inputs
from planner.sizing import GpuSpec, Plan, catalog_data, catalog_gpus, compute_plan

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

# The fields a scenario write may set: what it is called, what it asks and the notes beside it.
SCENARIO_WRITE_FIELDS: tuple[str, ...] = ("name", "model", "gpu", *SCENARIO_INPUT_FIELDS, "notes")


def scenario_plan(*, scenario: Scenario, advice: bool = True) -> Plan:
    """The scenario's plan, always recomputed from its stored inputs (raises SizingInputError)."""
    return compute_plan(scenario_plan_inputs(scenario=scenario), advice=advice)


def _check_plannable(scenario: Scenario) -> None:
    # A scenario is only saved when the engine can plan it, so a stored scenario means an answerable question.
    # (It can still stop planning later, when its model row changes; reads report that as plan errors.)
    scenario_plan(scenario=scenario, advice=False)


def _writable(data: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(data) - set(SCENARIO_WRITE_FIELDS))
    if unknown:
        raise ValueError(f"not scenario fields: {', '.join(unknown)}")
    return dict(data)


@transaction.atomic
def scenario_create(*, owner: AbstractBaseUser, data: Mapping[str, Any]) -> Scenario:
    """Save a new scenario owned by ``owner``; raises SizingInputError when the engine cannot plan it."""
    scenario = Scenario(owner=owner, **_writable(data))
    _check_plannable(scenario)
    scenario.save()
    return scenario


@transaction.atomic
def scenario_update(*, scenario: Scenario, data: Mapping[str, Any]) -> Scenario:
    """Change the given fields (a full or partial update); nothing is saved unless the engine can plan it."""
    for name, value in _writable(data).items():
        setattr(scenario, name, value)
    _check_plannable(scenario)
    scenario.save()
    return scenario


def scenario_clone(*, source: Scenario, owner: AbstractBaseUser, data: Mapping[str, Any] | None = None) -> Scenario:
    """A new scenario owned by ``owner``: ``source``'s inputs with ``data``'s edits; ``source`` is untouched."""
    values: dict[str, Any] = {name: getattr(source, name) for name in SCENARIO_WRITE_FIELDS}
    values["name"] = f"{source.name} (copy)"
    values.update(_writable(data or {}))
    return scenario_create(owner=owner, data=values)


def scenario_clone_initial(*, source: Scenario) -> dict[str, Any]:
    """A create form's initial values for a copy of ``source`` (model and GPU by slug, as the form keys them)."""
    initial: dict[str, Any] = {name: getattr(source, name) for name in SCENARIO_INPUT_FIELDS}
    initial.update(name=f"{source.name} (copy)", notes=source.notes, model=source.model.slug, gpu=source.gpu.slug)
    return initial


def scenario_delete(*, scenario: Scenario) -> None:
    scenario.delete()


def _gpu_row_values(spec: GpuSpec, entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": spec.name,
        "memory_bytes": spec.memory_bytes,
        "marketed_memory_gb": spec.marketed_memory_gb,
        "bandwidth_tbs": spec.bandwidth_bytes_per_s / 1e12,
        "bf16_tflops": spec.bf16_tflops,
        "price_per_hour": spec.price_per_hour,
        "price_source": entry.get("price_source") or "",
        "price_date": entry.get("price_date"),
        "fp8": spec.fp8,
        "source": entry.get("source") or "",
        "notes": entry.get("notes") or entry.get("memory_usable_note") or "",
        "is_catalog": True,
    }


def _model_row_values(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": entry["name"],
        "hf_id": entry.get("hf_id") or "",
        "config": entry["config"],
        "params_b": entry.get("params_b"),
        "params_active_b": entry.get("params_active_b"),
        "source": entry.get("source") or "",
        "notes": entry.get("notes") or "",
        "is_catalog": True,
    }


@transaction.atomic
def catalog_load() -> tuple[int, int]:
    """Upsert the catalog fixture (planner/sizing/catalog.json) by slug; safe to run again and again."""
    data = catalog_data()
    for entry in data["models"]:
        ModelProfile.objects.update_or_create(slug=entry["slug"], defaults=_model_row_values(entry))
    raw_gpus = {entry["slug"]: entry for entry in data["gpus"]}
    for slug, spec in catalog_gpus().items():
        GpuProfile.objects.update_or_create(slug=slug, defaults=_gpu_row_values(spec, raw_gpus.get(slug, {})))
    return len(data["models"]), len(data["gpus"])


def gib_to_bytes(value: float) -> int:
    return round(value * GIB)
