"""Writes behind the API that only the API makes: imported models. Scenario writes are planner.services'."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from planner.api.sizing import CUSTOM_MODEL_NAME
from planner.models import ModelProfile
from planner.services import custom_model_create, custom_model_spec
from planner.sizing import ModelSpec

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser


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
