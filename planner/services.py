"""Writes and plan computation for the planner. Views and API views call these; no arithmetic lives there."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from planner.models import GIB, SCENARIO_INPUT_FIELDS, GpuProfile, ModelProfile, Scenario
from planner.sizing import GpuSpec, Plan, PlanInputs, catalog_data, catalog_gpus, compute_plan


def scenario_plan_inputs(*, scenario: Scenario) -> PlanInputs:
    values = {field: getattr(scenario, field) for field in SCENARIO_INPUT_FIELDS}
    return PlanInputs(model=scenario.model.spec(), gpu=scenario.gpu.spec(), **values)


def scenario_plan(*, scenario: Scenario) -> Plan:
    """The scenario's plan, always recomputed from its stored inputs (raises SizingInputError)."""
    return compute_plan(scenario_plan_inputs(scenario=scenario))


def _gpu_row_values(spec: GpuSpec, entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": spec.name,
        "memory_bytes": spec.memory_bytes,
        "marketed_memory_gb": spec.marketed_memory_gb,
        "bandwidth_tbs": spec.bandwidth_bytes_per_s / 1e12,
        "bf16_tflops": spec.bf16_tflops,
        "price_per_hour": spec.price_per_hour,
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
def catalog_load(*, reset: bool = False) -> tuple[int, int]:
    """Add the catalog fixture's (planner/sizing/catalog.json) missing rows by slug; safe to run again and again.

    Rows that exist keep what an admin changed in them; ``reset`` writes the fixture's values over them.
    """
    data = catalog_data()
    write = _overwrite if reset else _create_missing
    for entry in data["models"]:
        write(ModelProfile, entry["slug"], _model_row_values(entry))
    raw_gpus = {entry["slug"]: entry for entry in data["gpus"]}
    for slug, spec in catalog_gpus().items():
        write(GpuProfile, slug, _gpu_row_values(spec, raw_gpus.get(slug, {})))
    return len(data["models"]), len(data["gpus"])


def _overwrite(model: type[ModelProfile | GpuProfile], slug: str, values: dict[str, Any]) -> None:
    model.objects.update_or_create(slug=slug, defaults=values)


def _create_missing(model: type[ModelProfile | GpuProfile], slug: str, values: dict[str, Any]) -> None:
    model.objects.get_or_create(slug=slug, defaults=values)


def gib_to_bytes(value: float) -> int:
    return round(value * GIB)
