"""Writes behind the API: scenarios and imported models. Each checks with the engine before it saves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import transaction

from planner.api.sizing import CUSTOM_MODEL_NAME
from planner.models import ModelProfile, Scenario
from planner.services import custom_model_create, custom_model_spec, scenario_plan
from planner.sizing import ModelSpec

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser


def _check_plannable(scenario: Scenario) -> None:
    # A scenario is only saved when the engine can plan it, so a stored scenario means an answerable question.
    # (It can still stop planning later, when its model row changes; reads report that as plan_errors.)
    scenario_plan(scenario=scenario)


@transaction.atomic
def scenario_create(*, owner: AbstractBaseUser, data: dict[str, Any]) -> Scenario:
    """Save a new scenario owned by ``owner``; raises SizingInputError when the engine cannot plan it."""
    scenario = Scenario(owner=owner, **data)
    _check_plannable(scenario)
    scenario.save()
    return scenario


@transaction.atomic
def scenario_update(*, scenario: Scenario, data: dict[str, Any]) -> Scenario:
    """Change the given fields (a full or partial update); nothing is saved unless the engine can plan it.

    The row is read again under a lock and only the given fields are written: two PATCHes of different fields at
    once both land (the second waits for the first, then applies its change to the row the first left).
    """
    locked = Scenario.objects.select_for_update().select_related("owner", "model", "gpu").get(pk=scenario.pk)
    for field, value in data.items():
        setattr(locked, field, value)
    _check_plannable(locked)
    locked.save(update_fields=[*data, "updated"])
    return locked


@dataclass(frozen=True)
class ModelImport:
    spec: ModelSpec
    profile: ModelProfile | None


def _import_name(*, name: str, hf_id: str, config: dict[str, Any]) -> str:
    model_type = config.get("model_type")
    return name or hf_id or (model_type if isinstance(model_type, str) and model_type else CUSTOM_MODEL_NAME)


def model_profile_import(
    *,
    config: dict[str, Any],
    user: AbstractBaseUser | None = None,
    name: str = "",
    slug: str = "",
    hf_id: str = "",
    params_b: float | None = None,
    params_active_b: float | None = None,
    save: bool = False,
) -> ModelImport:
    """Read an HF config.json with the engine; with ``save`` keep it as a custom ModelProfile.

    The custom-model page's checks and save (planner.services); raises SizingInputError keyed by the request's
    fields (``config``, ``slug``, ...). A chosen slug must be free; without one the name's slug is numbered.
    """
    name = _import_name(name=name, hf_id=hf_id, config=config)[:200] if isinstance(config, dict) else name
    if not save:
        spec = custom_model_spec(config=config, name=name, params_b=params_b, params_active_b=params_active_b)
        return ModelImport(spec=spec, profile=None)
    profile, spec = custom_model_create(
        config=config,
        name=name,
        user=user,
        source="imported through the API",
        slug=slug,
        hf_id=hf_id,
        params_b=params_b,
        params_active_b=params_active_b,
    )
    return ModelImport(spec=spec, profile=profile)
