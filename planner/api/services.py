"""Writes behind the API that only the API makes: imported models. Scenario writes are planner.services'."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.utils.text import slugify

from planner.api.sizing import CUSTOM_MODEL_NAME, config_model_spec
from planner.models import ModelProfile
from planner.sizing import ModelSpec, SizingInputError

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

    Raises SizingInputError keyed by the request's fields (``config``, ``slug``).
    """
    name = _import_name(name=name, hf_id=hf_id, config=config)[:200]
    num_params = round(params_b * 1e9) if params_b else None
    num_active = round(params_active_b * 1e9) if params_active_b else None
    # Read the way ModelProfile.spec() will read the saved row, so a saved model always makes a spec.
    spec = config_model_spec(
        config=config, name=name, field="config", num_params=num_params, num_active_params=num_active
    )
    if not save:
        return ModelImport(spec=spec, profile=None)
    slug = slug or slugify(name.replace("/", "-"))[:100]
    if not slug:
        raise SizingInputError({"slug": "give a slug: none could be made from the name"})
    try:
        with transaction.atomic():
            if ModelProfile.objects.filter(slug=slug).exists():
                raise SizingInputError({"slug": f"a model {slug!r} exists already"})
            profile = ModelProfile.objects.create(
                slug=slug,
                name=name,
                hf_id=hf_id,
                config=config,
                params_b=params_b,
                params_active_b=params_active_b,
                source="imported through the API",
                is_catalog=False,
                created_by=user if user is not None and user.is_authenticated else None,
            )
    except IntegrityError as exc:  # the same slug saved by a concurrent request
        raise SizingInputError({"slug": f"a model {slug!r} exists already"}) from exc
    return ModelImport(spec=spec, profile=profile)
