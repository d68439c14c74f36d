"""Plotly figures for the planner pages, as plain ``{"data": [...], "layout": {...}}`` dicts.

Every number comes from the sizing engine (a ``Plan``, or the engine's KV functions for the hypothetical
variants); this module only converts units and lays the figures out. Templates pass the dicts to
plotly.js through ``json_script``.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Sequence
from typing import Any

from planner.models import GIB, Scenario
from planner.selectors import PlanOutcome, tokens_label
from planner.sizing import ModelSpec, Plan, context_curve
from planner.sizing.figures import kv_bytes_per_sequence_per_gpu

COLORS = {
    "weights": "#6b7a99",
    "activation": "#d08c2f",
    "non_torch": "#a35fb5",
    "kv": "#3559d6",
    "free": "#dde1ea",
    "budget": "#b42318",
    "ok": "#1a7f45",
}
SERIES_COLORS = ("#3559d6", "#d08c2f", "#1a7f45", "#a35fb5")
BASE_LAYOUT: dict[str, Any] = {
    "margin": {"l": 64, "r": 24, "t": 48, "b": 56},
    "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 13},
    "paper_bgcolor": "#ffffff",
    "plot_bgcolor": "#ffffff",
    "legend": {"orientation": "h", "y": -0.22},
    "height": 360,
}
# The context curves fall from top left to bottom right: the top right corner is free for the legend.
INSIDE_LEGEND = {"x": 0.99, "xanchor": "right", "y": 0.99, "bgcolor": "rgba(255,255,255,0.85)"}
LEGEND_BELOW = {"orientation": "h", "x": 0, "xanchor": "left", "y": -0.2, "yanchor": "top"}
# The hypothetical variants of chart 3: the seed article's picture of why GQA and MLA exist.
KV_DTYPES = (("bfloat16", "bf16", "solid"), ("fp8", "fp8", "dash"), ("int4", "int4", "dot"))
MLA_LATENT = (512, 64)  # DeepSeek-V2/V3's kv_lora_rank + qk_rope_head_dim
GQA_DEFAULT_KV_HEADS = 8
# An MLA model has no per-head K/V width of its own; 128 is the common head size of its peers.
MHA_HEAD_SIZE_FOR_MLA_MODELS = 128


def plot_text(text: str) -> str:
    """A user's text (a scenario or model name) as Plotly shows it, literally.

    Plotly reads names, titles and hover templates as its own small HTML (``<a href>`` is a live link, ``<b>``
    bold) and hover templates' ``%{...}`` as fields; it decodes character references, so escaping ``<``, ``>``,
    ``&``, quotes and ``%`` as references shows the text as typed and nothing more.
    """
    return html.escape(text, quote=True).replace("%", "&#37;")


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    return {**BASE_LAYOUT, "title": {"text": title, "x": 0, "xanchor": "left"}, **extra}


def _gib(num_bytes: float) -> float:
    return round(num_bytes / GIB, 6)


def memory_figure(*, plan: Plan) -> dict[str, Any]:
    """One GPU's memory as a stacked bar, with the CUDA-visible total and the utilisation line."""
    memory = plan.memory_per_gpu
    kv = max(memory.kv_cache_bytes, 0)
    used = memory.weights_bytes + memory.activation_bytes + memory.non_torch_bytes + kv
    free = max(memory.total_bytes - used, 0)
    parts = (
        ("Weights", memory.weights_bytes, COLORS["weights"]),
        ("Activation peak", memory.activation_bytes, COLORS["activation"]),
        ("Non-torch", memory.non_torch_bytes, COLORS["non_torch"]),
        ("KV cache", kv, COLORS["kv"]),
        ("Free", free, COLORS["free"]),
    )
    count = plan.inputs.gpu_count or plan.inputs.tensor_parallel_size * plan.inputs.pipeline_parallel_size
    label = "per GPU" if count == 1 else f"each of {count} GPUs"
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": name,
            "y": [label],
            "x": [_gib(value)],
            "marker": {"color": color},
            "hovertemplate": f"{name}: %{{x:.2f}} GiB<extra></extra>",
        }
        for name, value, color in parts
    ]
    total, requested = _gib(memory.total_bytes), _gib(memory.requested_bytes)
    utilization = plan.inputs.gpu_memory_utilization
    xmax = max(total, _gib(used)) * 1.04
    lines = [
        (total, f"total {total:.2f} GiB", "#1d2433", "solid"),
        (requested, f"utilisation {utilization} → {requested:.2f} GiB", COLORS["budget"], "dash"),
    ]
    shapes = [
        {"type": "line", "x0": x, "x1": x, "yref": "paper", "y0": 0, "y1": 1, "line": {"color": c, "dash": d}}
        for x, _, c, d in lines
    ]
    # Two rows of labels above the bar: the two lines are often a few GiB apart.
    annotations = [
        {"x": x, "yref": "paper", "y": 1.04 + 0.14 * i, "yanchor": "bottom", "text": text, "showarrow": False}
        for i, (x, text, _, _) in enumerate(lines)
    ]
    layout = _layout(
        "GPU memory",
        barmode="stack",
        height=280,
        xaxis={"title": {"text": "GiB"}, "range": [0, xmax]},
        yaxis={"automargin": True},
        shapes=shapes,
        annotations=annotations,
        legend={"orientation": "h", "traceorder": "normal", "y": -0.5},
        margin={"l": 110, "r": 24, "t": 84, "b": 64},
    )
    return {"data": data, "layout": layout}


def curve_concurrencies(plan: Plan) -> list[int]:
    """Every concurrency up to 16, then eight steps per doubling up to 256 (or the scenario's concurrency)."""
    top = max(256, plan.inputs.concurrency)
    grid = set(range(1, 17)) | {round(2 ** (k / 8)) for k in range(32, 8 * top.bit_length() + 1)}
    grid |= {row.concurrency for row in plan.concurrency_table}
    return sorted(n for n in grid if n <= top)


def context_concurrency_figure(*, plan: Plan) -> dict[str, Any]:
    """Longest context that fits at each concurrency, with this scenario's SLA point marked."""
    concurrencies = curve_concurrencies(plan)
    points = context_curve(plan, concurrencies)
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "max context (capped at max_model_len)",
            "x": concurrencies,
            "y": [capped for capped, _ in points],
            "line": {"color": COLORS["kv"]},
            "hovertemplate": "%{x} sequences: %{y:,} tokens<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "KV-cache limit",
            "x": concurrencies,
            "y": [kv for _, kv in points],
            "line": {"color": COLORS["kv"], "dash": "dot", "width": 1},
            "hovertemplate": "%{x} sequences: %{y:,} tokens of KV cache<extra></extra>",
        },
        _sla_point(plan),
    ]
    layout = _layout(
        "Max context vs concurrency",
        xaxis={"title": {"text": "concurrent sequences"}, "type": "log", "dtick": math.log10(2)},
        yaxis={"title": {"text": "tokens per sequence"}, "type": "log", "tickformat": "~s"},
        legend=INSIDE_LEGEND,
    )
    return {"data": data, "layout": layout}


def _sla_point(plan: Plan, *, name: str = "SLA", color: str | None = None) -> dict[str, Any]:
    fits = plan.fits
    return {
        "type": "scatter",
        "mode": "markers",
        "name": f"{name}: {plan.inputs.concurrency} × {tokens_label(plan.inputs.max_model_len or 0)}",
        "x": [plan.inputs.concurrency],
        "y": [plan.inputs.max_model_len],
        "marker": {
            "size": 13,
            "symbol": "star" if fits else "x",
            "color": color or (COLORS["ok"] if fits else COLORS["budget"]),
            "line": {"width": 1, "color": "#1d2433"},
        },
        "hovertemplate": "asked: %{x} × %{y:,} tokens<extra></extra>",
    }


def attention_variants(model: ModelSpec) -> list[tuple[str, ModelSpec]]:
    """MHA, GQA and MLA counterparts of ``model`` (its own kind labelled), same layers and layer kinds."""
    # DeepSeek-V4's own caches are its compressed ones; its counterparts cache plain per-layer KV.
    own = "Compressed" if model.compressed_attention is not None else model.attention_kind
    mha_head = MHA_HEAD_SIZE_FOR_MLA_MODELS if model.attention_kind == "MLA" else model.head_size
    common = {"kv_lora_rank": None, "qk_rope_head_dim": None, "head_size": mha_head, "compressed_attention": None}
    # Counterparts take one shape on every layer: layer groups' own shapes (Gemma 4's global layers, MiMo-V2's V
    # heads, Nemotron-NAS's per-layer KV heads) are the model's own kind only.
    plain_groups = tuple(
        dataclasses.replace(group, head_size=None, num_kv_heads=None, head_size_v=None) for group in model.layer_groups
    )
    common["layer_groups"] = plain_groups
    heads = model.num_attention_heads
    if own == "GQA":
        gqa_heads = model.num_kv_heads
    else:
        # The largest divisor of the head count up to 8 keeps the variant a valid GQA layout.
        gqa_heads = max(d for d in range(1, min(GQA_DEFAULT_KV_HEADS, heads) + 1) if heads % d == 0)
    variants = [
        ("MHA", dataclasses.replace(model, attention_kind="MHA", num_kv_heads=heads, **common)),
        (
            f"GQA ({gqa_heads} KV heads)",
            dataclasses.replace(model, attention_kind="GQA", num_kv_heads=gqa_heads, **common),
        ),
        (
            f"MLA ({MLA_LATENT[0]}+{MLA_LATENT[1]})",
            dataclasses.replace(
                model,
                attention_kind="MLA",
                num_kv_heads=1,
                head_size=sum(MLA_LATENT),
                kv_lora_rank=MLA_LATENT[0],
                qk_rope_head_dim=MLA_LATENT[1],
                compressed_attention=None,
            ),
        ),
    ]
    if own == "MQA":
        variants.insert(2, ("MQA", model))
    # The model's own kind is the model itself, its layer groups' shapes included.
    variants = [(label, model if label.split(" ")[0] == own else spec) for label, spec in variants]
    if own == "Compressed":
        variants.append(("Compressed (DeepSeek-V4, fp8_ds_mla)", model))
    return [(f"{label} (own)" if label.split(" ")[0] == own else label, spec) for label, spec in variants]


def context_grid(plan: Plan) -> list[int]:
    """Powers of two from 1K to the model's longest context (at least 32K, at most 1M), plus the asked one."""
    longest = min(max(plan.inputs.model.max_position_embeddings, plan.inputs.max_model_len or 0, 32768), 2**20)
    grid = [2**k for k in range(10, 21) if 2**k <= longest]
    if plan.inputs.max_model_len and plan.inputs.max_model_len not in grid:
        grid.append(plan.inputs.max_model_len)
    return sorted(grid)


def kv_variants_figure(*, plan: Plan) -> dict[str, Any]:
    """KV per sequence vs context for MHA/GQA/MLA × bf16/fp8/int4 KV, against this GPU's KV budget."""
    grid = context_grid(plan)
    data = []
    for color, (label, spec) in zip(SERIES_COLORS, attention_variants(plan.inputs.model), strict=False):
        for dtype, dtype_label, dash in KV_DTYPES:
            sizes = [
                _gib(kv_bytes_per_sequence_per_gpu(model=spec, plan=plan, kv_cache_dtype=dtype, context_tokens=c))
                for c in grid
            ]
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": f"{label}, {dtype_label}",
                    "legendgroup": label,
                    "x": grid,
                    "y": sizes,
                    "line": {"color": color, "dash": dash},
                    "hovertemplate": f"{label} {dtype_label}: %{{y:.2f}} GiB at %{{x:,}} tokens<extra></extra>",
                }
            )
    budget = _gib(max(plan.kv_budget_bytes_per_gpu, 0))
    data.append(
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"KV budget per GPU ({budget:.1f} GiB)",
            "x": [grid[0], grid[-1]],
            "y": [budget, budget],
            "line": {"color": COLORS["budget"], "dash": "dash", "width": 2},
            "hoverinfo": "skip",
        }
    )
    layout = _layout(
        f"KV cache per sequence: {plot_text(plan.inputs.model.name)} and its attention variants",
        height=440,
        xaxis={
            "title": {"text": "context (tokens)"},
            "type": "log",
            "tickvals": grid,
            "ticktext": [tokens_label(c) for c in grid],
        },
        yaxis={"title": {"text": "GiB per sequence (per GPU)"}, "type": "log", "dtick": 1},
        legend={"orientation": "v", "x": 1.02, "y": 1},
        margin={"l": 64, "r": 24, "t": 48, "b": 56},
    )
    return {"data": data, "layout": layout}


def allocation_figure(*, plan: Plan) -> dict[str, Any]:
    """Sequences that fit when each reserves max_model_len contiguously, against paged blocks."""
    allocation = plan.allocation
    top = max(allocation.naive_sequences, allocation.paged_sequences)
    small_count_ticks = {"dtick": 1, "range": [0, top + 1]} if top <= 8 else {}
    data = [
        {
            "type": "bar",
            "x": ["naive (contiguous max_model_len)", "paged (vLLM blocks)"],
            "y": [allocation.naive_sequences, allocation.paged_sequences],
            "marker": {"color": [COLORS["weights"], COLORS["kv"]]},
            "text": [f"{allocation.naive_sequences:,}", f"{allocation.paged_sequences:,}"],
            "textposition": "outside",
            "hovertemplate": "%{x}: %{y:,} sequences<extra></extra>",
        }
    ]
    layout = _layout(
        f"Sequences of {tokens_label(allocation.sequence_tokens)} tokens that fit",
        showlegend=False,
        # Whole sequences: with a handful, plotly would otherwise tick at halves.
        yaxis={"title": {"text": "sequences"}, "rangemode": "tozero", "tickformat": ",d", **small_count_ticks},
    )
    return {"data": data, "layout": layout}


def detail_figures(*, plan: Plan) -> dict[str, dict[str, Any]]:
    """The detail page's charts, keyed by the id of the element each is drawn into."""
    return {
        "chart-memory": memory_figure(plan=plan),
        "chart-context": context_concurrency_figure(plan=plan),
        "chart-kv-variants": kv_variants_figure(plan=plan),
        "chart-allocation": allocation_figure(plan=plan),
    }


def chart_slots(*, plan: Plan) -> list[dict[str, Any]]:
    """The detail page's chart containers: id, full width or not, and the accessible name screen readers say."""
    inputs = plan.inputs
    asked = f"{inputs.concurrency} × {tokens_label(inputs.max_model_len or 0)}"
    row = plan.concurrency_table[0] if plan.concurrency_table else None
    return [
        {
            "id": "chart-memory",
            "wide": True,
            "label": f"GPU memory per GPU: weights, activation peak, non-torch, KV cache "
            f"{plan.memory_per_gpu.kv_cache_bytes / GIB:.1f} GiB of {plan.memory_per_gpu.total_bytes / GIB:.1f} GiB",
        },
        {
            "id": "chart-context",
            "wide": False,
            "label": f"Max context vs concurrency: {row.max_context_len if row else 0:,} tokens for one sequence, "
            f"{plan.max_context_len:,} at the asked {asked}",
        },
        {
            "id": "chart-allocation",
            "wide": False,
            "label": f"Sequences of {plan.allocation.sequence_tokens:,} tokens that fit: "
            f"{plan.allocation.naive_sequences:,} contiguous, {plan.allocation.paged_sequences:,} paged",
        },
        {
            "id": "chart-kv-variants",
            "wide": True,
            "label": f"KV cache per sequence against context for {inputs.model.name} and its MHA, GQA and MLA "
            "variants in bf16, fp8 and int4, against the KV budget per GPU",
        },
    ]


def compare_figures(*, scenarios: Sequence[Scenario], outcomes: Sequence[PlanOutcome]) -> dict[str, dict[str, Any]]:
    """Max context vs concurrency for each scenario, overlaid, each with its SLA point."""
    data = []
    for color, scenario, outcome in zip(SERIES_COLORS, scenarios, outcomes, strict=False):
        plan = outcome.plan
        if plan is None:
            continue
        concurrencies = curve_concurrencies(plan)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": plot_text(scenario.name),
                "legendgroup": str(scenario.pk),
                "x": concurrencies,
                "y": [capped for capped, _ in context_curve(plan, concurrencies)],
                "line": {"color": color},
                "hovertemplate": f"{plot_text(scenario.name)}: %{{x}} × %{{y:,}} tokens<extra></extra>",
            }
        )
        point = _sla_point(plan, name=plot_text(scenario.name), color=color)
        point["legendgroup"] = str(scenario.pk)
        point["showlegend"] = False
        data.append(point)
    layout = _layout(
        "Max context vs concurrency",
        height=420,
        xaxis={"title": {"text": "concurrent sequences"}, "type": "log", "dtick": math.log10(2)},
        yaxis={"title": {"text": "tokens per sequence"}, "type": "log", "tickformat": "~s"},
        # Below the plot: the overlaid curves may reach any corner, so a legend inside would cover one.
        legend=LEGEND_BELOW,
        margin={"l": 64, "r": 24, "t": 48, "b": 96},
    )
    return {"chart-compare": {"data": data, "layout": layout}}
