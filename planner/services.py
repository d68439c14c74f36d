"""Writes and plan computation for the planner. Views and API views call these; no arithmetic lives there."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.utils.text import slugify

from planner.json_documents import document_problem, text_problem
from planner.models import GIB, SCENARIO_INPUT_FIELDS, GpuProfile, ModelProfile, Scenario
from planner.plan_inputs import scenario_plan_inputs
from planner.sizing import (
    GpuSpec,
    ModelSpec,
    Plan,
    SizingInputError,
    catalog_data,
    catalog_gpus,
    compute_plan,
    model_spec_from_hf_config,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

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
    """Change the given fields (a full or partial update); nothing is saved unless the engine can plan it.

    The row is read again under a lock and only the given fields are written: two PATCHes of different fields at
    once both land (the second waits for the first, then applies its change to the row the first left).
    """
    changes = _writable(data)
    locked = Scenario.objects.select_for_update().select_related("owner", "model", "gpu").get(pk=scenario.pk)
    for name, value in changes.items():
        setattr(locked, name, value)
    _check_plannable(locked)
    locked.save(update_fields=[*changes, "updated"])
    return locked


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


# Catalog slugs carry dots ("llama-3.1-8b"); a slug starts with a letter or digit, so "." and ".." (which a URL
# path would resolve away) are not slugs.
MODEL_SLUG_RE = re.compile(r"^[a-zA-Z0-9][-a-zA-Z0-9_.]*$")
MODEL_SLUG_MAX = 100
# Engine error keys that name a field of the custom-model request rather than a key of the config.
_MODEL_FIELD_KEYS = {"num_params": "params_b", "num_active_params": "params_active_b", "name": "name"}
# How often a save retries the next numbered slug when a concurrent save took the one it chose.
_SLUG_ATTEMPTS = 5


def custom_model_spec(
    *,
    config: Any,
    name: str,
    params_b: float | None = None,
    params_active_b: float | None = None,
) -> ModelSpec:
    """What the engine reads from a caller's config.json, after checking it is a document we can store.

    The one check behind the custom-model page and POST /api/v1/models/import/. Raises SizingInputError keyed by
    the request's fields: ``config``, ``name``, ``params_b``, ``params_active_b``.
    """
    if not isinstance(config, Mapping) or not config:
        raise SizingInputError({"config": "must be a non-empty JSON object (an HF config.json)"})
    problem = document_problem(config, allow_non_finite=True)
    if problem:
        raise SizingInputError({"config": problem})
    name_problem = text_problem(name)
    if name_problem:
        raise SizingInputError({"name": name_problem})
    try:
        return model_spec_from_hf_config(
            dict(config),
            name=name,
            num_params=round(params_b * 1e9) if params_b else None,
            num_active_params=round(params_active_b * 1e9) if params_active_b else None,
        )
    except SizingInputError as exc:
        errors: dict[str, str] = {}
        config_messages = []
        for key, message in exc.errors.items():
            if key in _MODEL_FIELD_KEYS:
                errors[_MODEL_FIELD_KEYS[key]] = message
            else:
                config_messages.append(f"{key}: {message}")
        if config_messages:
            errors["config"] = "; ".join(config_messages)
        raise SizingInputError(errors) from exc
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
        # The config is arbitrary caller JSON: whatever shape the parser trips on, it is the caller's input.
        raise SizingInputError({"config": f"is not a config.json the engine can read ({type(exc).__name__})"}) from exc


def custom_model_create(
    *,
    config: dict[str, Any],
    name: str,
    user: AbstractBaseUser | AnonymousUser | None,
    source: str,
    slug: str = "",
    hf_id: str = "",
    params_b: float | None = None,
    params_active_b: float | None = None,
    notes: str = "",
) -> tuple[ModelProfile, ModelSpec]:
    """Check a custom model like custom_model_spec and save it; a chosen ``slug`` must be free, else the name's
    slug is numbered (``-2``, ``-3``, ...) until one is.

    Two saves at once of the same name both succeed with different numbers; two at once of the same chosen slug
    give one model and one SizingInputError (the unique index decides, not a check that can race).
    """
    spec = custom_model_spec(config=config, name=name, params_b=params_b, params_active_b=params_active_b)
    errors = {
        field: f"{problem}" for field, value in (("hf_id", hf_id), ("notes", notes)) if (problem := text_problem(value))
    }
    if slug and (len(slug) > MODEL_SLUG_MAX or not MODEL_SLUG_RE.match(slug)):
        errors["slug"] = "letters, digits, '-', '_' and '.', starting with a letter or digit (100 at most)"
    if errors:
        raise SizingInputError(errors)
    values = {
        "name": name,
        "hf_id": hf_id,
        "config": config,
        "params_b": params_b,
        "params_active_b": params_active_b,
        "notes": notes,
        "source": source,
        "is_catalog": False,
        "created_by": user if user is not None and user.is_authenticated else None,
    }
    if slug:
        return _create_with_slug(slug, values), spec
    base = slugify(name.replace("/", "-"))[: MODEL_SLUG_MAX - 10].strip("-_") or "model"
    for _ in range(_SLUG_ATTEMPTS):
        try:
            return _create_with_slug(_free_slug(base), values), spec
        except SizingInputError:
            continue  # a concurrent save took that number first: take the next
    raise SizingInputError({"slug": f"models named like {base!r} are being saved at this moment: try again"})


def _free_slug(base: str) -> str:
    taken = set(ModelProfile.objects.filter(slug__startswith=base).values_list("slug", flat=True))
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    return slug


def _create_with_slug(slug: str, values: dict[str, Any]) -> ModelProfile:
    try:
        # A savepoint: a duplicate key leaves the caller's transaction usable.
        with transaction.atomic():
            return ModelProfile.objects.create(slug=slug, **values)
    except IntegrityError as exc:
        raise SizingInputError({"slug": f"a model {slug!r} exists already"}) from exc
