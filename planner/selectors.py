"""Reads for the planner, pages and API alike: scenario queries, each scenario's plan (or why there is none),
catalog specs by slug (cached), and the figures and sentences the templates show. Templates only print what
these return."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db.models import Q, QuerySet
from django.db.models.signals import post_delete, post_save

from planner.models import GIB, SCENARIO_INPUT_FIELDS, GpuProfile, ModelProfile, Scenario
from planner.plan_inputs import scenario_plan_inputs
from planner.sizing import GpuSpec, ModelSpec, Plan, SizingInputError, compute_plan, plan_to_dict
from planner.sizing.figures import replica_concurrency, spare_kv_bytes_per_gpu

if TYPE_CHECKING:
    from datetime import datetime

EXPORT_FORMAT = "kvdash-scenario"
EXPORT_VERSION = 1
SCENARIOS_PER_PAGE = 50
COMPARE_MIN, COMPARE_MAX = 2, 4
SCENARIO_SORTS = {
    "-updated": ("-updated", "-pk"),
    "updated": ("updated", "pk"),
    "name": ("name", "pk"),
}


@dataclass(frozen=True)
class PlanOutcome:
    """A scenario's plan, or the engine's reasons for refusing its stored inputs (never an exception)."""

    plan: Plan | None
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return self.plan is not None and self.plan.fits


@dataclass(frozen=True)
class ScenarioRow:
    scenario: Scenario
    outcome: PlanOutcome
    headline: Headline | None
    gpus: str


@dataclass(frozen=True)
class Headline:
    """The answer first: does it fit, and with how much to spare or what is missing."""

    fits: bool
    text: str
    details: tuple[str, ...] = ()


def scenario_queryset() -> QuerySet[Scenario]:
    # Every page shows the model, the GPU and the owner of each scenario: one join, not N queries.
    return Scenario.objects.select_related("model", "gpu", "owner")


def scenario_list(
    *, search: str = "", model_slug: str = "", gpu_slug: str = "", owner: str = "", sort: str = "-updated"
) -> QuerySet[Scenario]:
    """Scenarios matching the filters (search: name, notes, model or GPU name), with their rows joined in."""
    scenarios = scenario_queryset()
    if owner:
        scenarios = scenarios.filter(owner__username=owner)
    if search:
        scenarios = scenarios.filter(
            Q(name__icontains=search)
            | Q(notes__icontains=search)
            | Q(model__name__icontains=search)
            | Q(gpu__name__icontains=search)
        )
    if model_slug:
        scenarios = scenarios.filter(model__slug=model_slug)
    if gpu_slug:
        scenarios = scenarios.filter(gpu__slug=gpu_slug)
    return scenarios.order_by(*SCENARIO_SORTS.get(sort, SCENARIO_SORTS["-updated"]))


def scenarios_by_ids(*, ids: Sequence[int]) -> list[Scenario]:
    """The scenarios in the order asked for; unknown ids are dropped."""
    found = {s.pk: s for s in scenario_queryset().filter(pk__in=ids)}
    return [found[pk] for pk in dict.fromkeys(ids) if pk in found]


def model_choices() -> QuerySet[ModelProfile]:
    return ModelProfile.objects.only("slug", "name", "is_catalog").order_by("name")


def gpu_choices() -> QuerySet[GpuProfile]:
    return GpuProfile.objects.only("slug", "name").order_by("name")


def model_profiles() -> QuerySet[ModelProfile]:
    return ModelProfile.objects.select_related("created_by").order_by("-is_catalog", "name")


def scenario_outcome(
    *,
    scenario: Scenario,
    specs: dict[int, ModelSpec | SizingInputError] | None = None,
    advice: bool = True,
) -> PlanOutcome:
    """The plan from the stored inputs; ``specs`` caches parsed model configs across a page of rows."""
    specs = {} if specs is None else specs
    spec = specs.get(scenario.model_id)
    if spec is None:
        try:
            spec = scenario.model.spec()
        except SizingInputError as error:
            spec = error
        specs[scenario.model_id] = spec
    if isinstance(spec, SizingInputError):
        return PlanOutcome(plan=None, errors={"model": f"{scenario.model}: {spec}"})
    try:
        return PlanOutcome(plan=compute_plan(scenario_plan_inputs(scenario=scenario, model=spec), advice=advice))
    except SizingInputError as error:
        return PlanOutcome(plan=None, errors=dict(error.errors))


def scenario_rows(*, scenarios: Iterable[Scenario]) -> list[ScenarioRow]:
    """Each scenario with its plan (without advice), headline and GPUs, for the list and compare pages."""
    specs: dict[int, ModelSpec | SizingInputError] = {}
    rows = []
    for scenario in scenarios:
        outcome = scenario_outcome(scenario=scenario, specs=specs, advice=False)
        headline = plan_headline(plan=outcome.plan) if outcome.plan else None
        gpus = _gpus_label(outcome.plan) if outcome.plan else scenario_gpus_label(scenario=scenario)
        rows.append(ScenarioRow(scenario=scenario, outcome=outcome, headline=headline, gpus=gpus))
    return rows


def tokens_label(tokens: int) -> str:
    """Contexts as people quote them: 32768 -> "32K", 131072 -> "128K", 1000 -> "1,000"."""
    if tokens >= 1024 and tokens % 1024 == 0:
        return f"{tokens // 1024:,}K"
    return f"{tokens:,}"


def gib_label(num_bytes: float) -> str:
    return f"{num_bytes / GIB:,.1f} GiB"


def _sequences(n: int) -> str:
    return f"{n:,} sequence" if n == 1 else f"{n:,} sequences"


def _short_gpu_name(name: str) -> str:
    for prefix in ("NVIDIA GeForce ", "NVIDIA "):
        name = name.removeprefix(prefix)
    return name


def _gpus_label(plan: Plan) -> str:
    count = plan.inputs.gpu_count or plan.inputs.tensor_parallel_size * plan.inputs.pipeline_parallel_size
    return f"{count}× {_short_gpu_name(plan.inputs.gpu.name)}"


def scenario_gpus_label(*, scenario: Scenario) -> str:
    """The GPUs a scenario asks for, without a plan (tp × pp when the count is left blank)."""
    count = scenario.gpu_count or scenario.tensor_parallel_size * scenario.pipeline_parallel_size
    return f"{count}× {_short_gpu_name(scenario.gpu.name)}"


LIMIT_LABELS = {
    "max_model_len": "the scenario's max_model_len",
    "max_position_embeddings": "the model's positions",
    "kv_cache": "the KV cache",
}


def plan_headline(*, plan: Plan) -> Headline:
    inputs = plan.inputs
    ask = f"{_sequences(inputs.concurrency)} × {tokens_label(inputs.max_model_len or 0)} on {_gpus_label(plan)}"
    if plan.fits:
        return Headline(fits=True, text=f"fits: {ask}, {gib_label(spare_kv_bytes_per_gpu(plan))} spare")
    if not plan.starts:
        short = gib_label(plan.shortfall_bytes_per_gpu)
        return Headline(fits=False, text=f"vLLM would not start: {ask}, {short} short per GPU", details=plan.problems)
    return Headline(fits=False, text=f"does not fit: {ask}", details=tuple(plan.problems))


def plan_key_figures(*, plan: Plan) -> list[tuple[str, str]]:
    """The numbers under the headline (the live preview and the detail page)."""
    memory = plan.memory_per_gpu
    estimates = plan.estimates
    row = next(r for r in plan.concurrency_table if r.concurrency == replica_concurrency(plan))
    figures = [
        ("KV budget per GPU", gib_label(plan.kv_budget_bytes_per_gpu)),
        ("KV capacity (physical: blocks × block size)", f"{plan.kv_capacity_tokens:,} tokens"),
        (
            f"vLLM {plan.inputs.engine_version} logs \u201cGPU KV cache size\u201d",
            f"{plan.reported_kv_cache_tokens:,} tokens",
        ),
        ("GPU blocks", f"{plan.num_gpu_blocks:,} × {plan.block_size} tokens"),
        (f"Max concurrency at {tokens_label(plan.inputs.max_model_len or 0)}", f"{plan.max_concurrency:,.2f}"),
        (
            f"Max context at concurrency {plan.inputs.concurrency:,}",
            f"{plan.max_context_len:,} tokens (limited by {LIMIT_LABELS[row.limited_by]})",
        ),
        ("Longest max_model_len that starts", f"{plan.longest_max_model_len:,} tokens"),
        ("KV per token (per GPU)", f"{plan.kv_bytes_per_token_per_gpu:,} B"),
        ("Weights per GPU", gib_label(plan.weights_bytes_per_gpu)),
        ("Activation + non-torch", gib_label(memory.activation_bytes + memory.non_torch_bytes)),
    ]
    if plan.state_blocks_per_request:
        caching = "on" if plan.inputs.enable_prefix_caching else "off"
        figures.insert(
            6,
            (
                "Recurrent state per request (per GPU)",
                f"{plan.state_blocks_per_request} blocks per state group (prefix caching {caching}); "
                f"{plan.state_page_bytes:,} B per layer",
            ),
        )
    if estimates is None:
        return [*figures, ("Short per GPU", gib_label(plan.shortfall_bytes_per_gpu))]
    return [
        *figures,
        ("Decode (estimate)", f"{estimates.tokens_per_s_per_seq:,.0f} tok/s per sequence"),
        ("TPOT / TTFT (estimate)", f"{estimates.tpot_ms:,.1f} ms / {estimates.prefill_ttft_ms:,.0f} ms"),
    ]


def plan_memory_rows(*, plan: Plan) -> list[tuple[str, str]]:
    memory = plan.memory_per_gpu
    return [
        ("Total (CUDA-visible)", gib_label(memory.total_bytes)),
        (f"Requested (× {plan.inputs.gpu_memory_utilization})", gib_label(memory.requested_bytes)),
        ("Weights", gib_label(memory.weights_bytes)),
        ("Activation peak", gib_label(memory.activation_bytes)),
        ("Non-torch", gib_label(memory.non_torch_bytes)),
        ("KV cache", gib_label(memory.kv_cache_bytes)),
        ("Not requested", gib_label(memory.unrequested_bytes)),
    ]


def compare_rows(*, outcomes: Sequence[PlanOutcome]) -> list[tuple[str, list[str]]]:
    """The compare table: one row per figure, one column per scenario ("—" where there is no plan)."""

    def column(getter: Any) -> list[str]:
        return [getter(o.plan) if o.plan else "—" for o in outcomes]

    return [
        ("Fits", column(lambda p: "yes" if p.fits else ("no" if p.starts else "no: vLLM would not start"))),
        ("GPUs", column(_gpus_label)),
        ("tp × pp", column(lambda p: f"{p.inputs.tensor_parallel_size} × {p.inputs.pipeline_parallel_size}")),
        ("KV cache dtype", column(lambda p: p.inputs.kv_cache_dtype)),
        ("max_model_len", column(lambda p: f"{p.inputs.max_model_len:,}")),
        ("Concurrency", column(lambda p: f"{p.inputs.concurrency:,}")),
        ("KV budget per GPU", column(lambda p: gib_label(p.kv_budget_bytes_per_gpu))),
        ("KV capacity (tokens)", column(lambda p: f"{p.kv_capacity_tokens:,}")),
        ("Max concurrency at max_model_len", column(lambda p: f"{p.max_concurrency:,.2f}")),
        ("Max context at concurrency", column(lambda p: f"{p.max_context_len:,}")),
        (
            "Decode tok/s total (estimate)",
            column(lambda p: f"{p.estimates.tokens_per_s_total:,.0f}" if p.estimates else "—"),
        ),
        ("TPOT (estimate)", column(lambda p: f"{p.estimates.tpot_ms:,.1f} ms" if p.estimates else "—")),
        ("Price per hour", column(_price_label)),
    ]


def _price_label(plan: Plan) -> str:
    price = plan.inputs.gpu.price_per_hour
    if price is None:
        return "no price"
    count = plan.inputs.gpu_count or plan.inputs.tensor_parallel_size * plan.inputs.pipeline_parallel_size
    return f"${price * count:,.2f}"


def model_shape(*, spec: ModelSpec) -> list[tuple[str, str]]:
    """The derived shape shown back after a config.json is pasted: what the engine understood."""
    groups = ", ".join(
        f"{g.num_layers} {g.kind}" + (f" (window {g.window:,})" if g.window else "") for g in spec.layer_groups
    )
    rows = [
        ("Attention", spec.attention_kind),
        ("Layers", f"{spec.num_layers:,}"),
        ("Layer groups", groups),
        ("Attention heads", f"{spec.num_attention_heads:,}"),
        ("KV heads (cached)", f"{spec.num_kv_heads:,}"),
        ("Head size (cached)", f"{spec.head_size:,}"),
        ("Hidden size", f"{spec.hidden_size:,}"),
        ("dtype", spec.dtype),
        ("Parameters", f"{spec.num_params / 1e9:,.2f} B" + (" (estimated)" if spec.params_estimated else "")),
        ("Max position embeddings", f"{spec.max_position_embeddings:,}"),
        ("Vocabulary", f"{spec.vocab_size:,}"),
    ]
    if spec.is_moe:
        rows.append(("Active parameters", f"{spec.num_active_params / 1e9:,.2f} B"))
    if spec.attention_kind == "MLA":
        rows.append(("MLA latent", f"{spec.kv_lora_rank} + {spec.qk_rope_head_dim}"))
    return rows


def scenario_duplicates(*, data: dict[str, Any]) -> QuerySet[Scenario]:
    """Saved scenarios with the same name, model, GPU and inputs as ``data`` (a scenario form's values)."""
    match = {name: data.get(name) for name in ("name", "model", "gpu", *SCENARIO_INPUT_FIELDS)}
    return scenario_queryset().filter(**match).order_by("pk")


def scenario_export_document(*, scenario: Scenario) -> dict[str, Any]:
    """What export writes and import reads back: model and GPU by slug, inputs, name and notes."""
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "name": scenario.name,
        "notes": scenario.notes,
        "model": scenario.model.slug,
        "gpu": scenario.gpu.slug,
        "inputs": {name: getattr(scenario, name) for name in SCENARIO_INPUT_FIELDS},
    }


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


def cached_model_spec(*, profile: ModelProfile) -> ModelSpec:
    """``profile.spec()``, parsed once per saved version of the row; raises SizingInputError."""
    return _cached_spec("model", profile)  # type: ignore[return-value]


def scenario_plan_result(*, scenario: Scenario) -> tuple[dict[str, Any] | None, dict[str, str] | None]:
    """(plan_to_dict of the recomputed plan, None), or (None, the engine's errors) when its inputs no longer plan."""
    try:
        return plan_to_dict(compute_plan(scenario_plan_inputs(scenario=scenario))), None
    except SizingInputError as exc:
        return None, exc.errors
