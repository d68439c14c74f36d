"""The one way a scenario, a form's cleaned data or an API request becomes the engine's ``PlanInputs``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from planner.models import SCENARIO_INPUT_FIELDS, Scenario
from planner.sizing import GpuSpec, ModelSpec, PlanInputs

# Every PlanInputs field a caller may give (all but the model and the GPU).
PLAN_INPUT_FIELDS: tuple[str, ...] = tuple(
    field.name for field in dataclasses.fields(PlanInputs) if field.name not in ("model", "gpu")
)
# PlanInputs fields that are not optional: a blank form field or a JSON null means "the default".
_DEFAULTS: dict[str, Any] = {
    field.name: field.default
    for field in dataclasses.fields(PlanInputs)
    if field.name in PLAN_INPUT_FIELDS and field.default is not None
}


def plan_inputs_from_values(*, model: ModelSpec, gpu: GpuSpec, values: Mapping[str, Any]) -> PlanInputs:
    """``values`` holds PlanInputs fields (others are ignored); a missing one, or ``None`` where PlanInputs
    has a default, takes that default, so a form, a stored row and an API body give the same question."""
    given = {name: values[name] for name in PLAN_INPUT_FIELDS if name in values}
    for name, default in _DEFAULTS.items():
        if given.get(name) is None:
            given[name] = default
    return PlanInputs(model=model, gpu=gpu, **given)


def scenario_plan_inputs(*, scenario: Scenario, model: ModelSpec | None = None) -> PlanInputs:
    """The scenario's question; ``model`` passes a spec already parsed (a page of rows shares them)."""
    values = {name: getattr(scenario, name) for name in SCENARIO_INPUT_FIELDS}
    spec = model if model is not None else scenario.model.spec()
    return plan_inputs_from_values(model=spec, gpu=scenario.gpu.spec(), values=values)
