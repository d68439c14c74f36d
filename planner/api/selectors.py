"""Reads behind the API: catalog specs by slug (cached) and the scenario list."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet
from django.db.models.signals import post_delete, post_save

from planner.models import GpuProfile, ModelProfile, Scenario
from planner.services import scenario_plan
from planner.sizing import GpuSpec, ModelSpec, SizingInputError, plan_to_dict

if TYPE_CHECKING:
    from datetime import datetime

# Parsing an HF config into a ModelSpec costs more than the row lookup, and the catalog rarely changes.
# Keyed by (pk, updated), so an edited or re-created row is re-parsed in every process without signals.
_spec_cache: dict[tuple[str, int, datetime], ModelSpec | GpuSpec] = {}
_spec_cache_lock = threading.Lock()
_SPEC_CACHE_MAX = 2048


def _cached_spec(kind: str, row: ModelProfile | GpuProfile) -> ModelSpec | GpuSpec:
    key = (kind, row.pk, row.updated)
    spec = _spec_cache.get(key)
    if spec is None:
        spec = row.spec()  # may raise SizingInputError: a stored config the engine no longer accepts
        with _spec_cache_lock:
            if len(_spec_cache) >= _SPEC_CACHE_MAX:
                _spec_cache.clear()
            _spec_cache[key] = spec
    return spec


# Sizing by slug is the API's hot path: remember slug -> spec for a few seconds so a request needs no database
# query at all. A save or delete in this process forgets at once (signals below); other processes (gunicorn
# workers) see an edited or deleted row after at most SLUG_CACHE_SECONDS.
SLUG_CACHE_SECONDS = 10.0
_slug_cache: dict[tuple[str, str], tuple[float, ModelSpec | GpuSpec]] = {}


def spec_cache_clear(**_signal_kwargs: object) -> None:
    with _spec_cache_lock:
        _spec_cache.clear()
        _slug_cache.clear()


for _sender in (ModelProfile, GpuProfile):
    post_save.connect(spec_cache_clear, sender=_sender, dispatch_uid=f"api-spec-cache-save-{_sender.__name__}")
    post_delete.connect(spec_cache_clear, sender=_sender, dispatch_uid=f"api-spec-cache-delete-{_sender.__name__}")


def _spec_by_slug(kind: str, model: type[ModelProfile] | type[GpuProfile], slug: str) -> ModelSpec | GpuSpec | None:
    hit = _slug_cache.get((kind, slug))
    now = time.monotonic()
    if hit is not None and hit[0] > now:
        return hit[1]
    spec = _spec_by_slug_from_db(kind, model, slug)
    if spec is not None:  # unknown slugs are not remembered: a stream of made-up ones cannot fill the cache
        with _spec_cache_lock:
            if len(_slug_cache) >= _SPEC_CACHE_MAX:
                _slug_cache.clear()
            _slug_cache[(kind, slug)] = (now + SLUG_CACHE_SECONDS, spec)
    return spec


def _spec_by_slug_from_db(
    kind: str, model: type[ModelProfile] | type[GpuProfile], slug: str
) -> ModelSpec | GpuSpec | None:
    # One indexed two-column query; the full row (the config JSON) is read only when the spec is not cached.
    found = model.objects.filter(slug=slug).values_list("pk", "updated").first()
    if found is None:
        return None
    spec = _spec_cache.get((kind, *found))
    if spec is not None:
        return spec
    row = model.objects.filter(pk=found[0]).first()
    return None if row is None else _cached_spec(kind, row)


def model_spec_by_slug(*, slug: str) -> ModelSpec | None:
    """The ModelSpec of the catalog or custom model ``slug``; None when there is no such model.

    Raises SizingInputError when the stored config no longer makes a spec.
    """
    return _spec_by_slug("model", ModelProfile, slug)  # type: ignore[return-value]


def gpu_spec_by_slug(*, slug: str) -> GpuSpec | None:
    return _spec_by_slug("gpu", GpuProfile, slug)  # type: ignore[return-value]


def gpu_specs(*, slugs: list[str] | None = None) -> list[GpuSpec]:
    """GPUs a configuration search may use: the whole DB catalog (custom rows too) or the named ones.

    A row the engine rejects (say a custom GPU with a figure missing) is left out rather than failing the search.
    """
    rows = GpuProfile.objects.all()
    if slugs:
        rows = rows.filter(slug__in=slugs)
    specs: list[GpuSpec] = []
    for row in rows:
        try:
            specs.append(_cached_spec("gpu", row))  # type: ignore[arg-type]
        except SizingInputError:
            continue
    return specs


def model_profile_list() -> QuerySet[ModelProfile]:
    return ModelProfile.objects.all()


def gpu_profile_list() -> QuerySet[GpuProfile]:
    return GpuProfile.objects.all()


def scenario_list(
    *, model: str | None = None, gpu: str | None = None, owner: str | None = None, search: str | None = None
) -> QuerySet[Scenario]:
    """Scenarios newest first, with the rows every list item shows joined in (one query per page)."""
    scenarios = Scenario.objects.select_related("owner", "model", "gpu")
    if model:
        scenarios = scenarios.filter(model__slug=model)
    if gpu:
        scenarios = scenarios.filter(gpu__slug=gpu)
    if owner:
        scenarios = scenarios.filter(owner__username=owner)
    if search:
        scenarios = scenarios.filter(name__icontains=search)
    return scenarios


def cached_model_spec(*, profile: ModelProfile) -> ModelSpec:
    """``profile.spec()``, parsed once per saved version of the row; raises SizingInputError."""
    return _cached_spec("model", profile)  # type: ignore[return-value]


def scenario_plan_result(*, scenario: Scenario) -> tuple[dict[str, Any] | None, dict[str, str] | None]:
    """(plan_to_dict of the recomputed plan, None), or (None, the engine's errors) when its inputs no longer plan."""
    try:
        return plan_to_dict(scenario_plan(scenario=scenario)), None
    except SizingInputError as exc:
        return None, exc.errors
