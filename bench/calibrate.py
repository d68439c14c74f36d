"""Refit the activation, CUDA-graph and non-torch coefficients of planner/sizing/memory.py from the measured
vLLM start-ups (tests/planner/sizing/data/vllm_startups.json), and report the fit on held-out start-ups.

Run from the repository root: ``.venv/bin/python bench/calibrate.py``. One start-up in four (chosen by a
hash of its id, so the split is stable as points are added) is held out; every coefficient is fitted by
least squares on the others, then the script prints, per coefficient, the value in memory.py beside the
refit, and the errors of both on the training and the held-out start-ups. Nothing is written: a refit
that is better on the held-out rows is copied into memory.py by hand, with its evidence in the comment.

The model is memory.py's (comments there cite the sources):
    activation = max(2 t (mlp + B h), rows v S + 2 t h) + MoE workspace [+ CUDA-graph reserve from 0.21]
    cuda graph = C0 + C1 layers          non-torch = N0 at tp 1, N0 + N1 + N2 tp above
with t batched tokens, h hidden size, mlp the dense MLP width per rank, rows the sampled rows, v the
vocabulary; S (bytes per logit) is fitted separately for the lean sampler (0.17+) and the older one.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.sizing import GIB, ModelSpec, catalog_models
from planner.sizing import memory as mem
from planner.sizing import model_spec_from_hf_config as spec_from_config
from planner.sizing.engine import EngineRules, engine_rules

DATA_PATH = Path(__file__).resolve().parent.parent / "tests" / "planner" / "sizing" / "data" / "vllm_startups.json"
HOLD_OUT_ONE_IN = 4


@dataclass(frozen=True)
class Point:
    id: str
    model: ModelSpec
    rules: EngineRules
    tp: int
    tokens: int
    seqs: int
    logged: dict[str, Any]
    vision: bool
    held_out: bool

    @property
    def rows(self) -> int:
        rows = min(self.seqs, self.tokens)
        return rows if self.rules.v1_engine else min(rows, mem.V0_SAMPLER_ROWS)

    @property
    def forward_fixed(self) -> float:  # 2 t mlp: the part of the forward term without B
        mlp = 0.0 if self.model.is_moe else 3 * self.model.intermediate_size / self.tp
        return 2.0 * self.tokens * mlp

    @property
    def forward_per_buffer(self) -> float:  # 2 t h: what one hidden-size buffer adds
        return 2.0 * self.tokens * self.model.hidden_size

    @property
    def logits(self) -> float:
        return float(self.rows * self.model.vocab_size)

    @property
    def moe(self) -> float:
        return mem._moe_workspace(self.model, self.tp, self.tokens)


def held_out(point_id: str) -> bool:
    return int(hashlib.sha256(point_id.encode()).hexdigest(), 16) % HOLD_OUT_ONE_IN == 0


def load_points() -> list[Point]:
    data = json.loads(DATA_PATH.read_text(encoding="utf-8"))
    models = catalog_models()
    points = []
    for raw in data["points"]:
        slug = raw.get("catalog_slug")
        model = models[slug] if slug else spec_from_config(raw["config"], name=raw["model"])
        points.append(
            Point(
                id=raw["id"],
                model=model,
                rules=engine_rules(raw["engine_version"]),
                tp=raw["tp"],
                tokens=raw["max_num_batched_tokens"],
                seqs=raw["max_num_seqs"],
                logged=raw["logged"],
                vision=bool(raw.get("vision")),
                held_out=held_out(raw["id"]),
            )
        )
    return points


def _ratio_fit(pairs: Sequence[tuple[float, float]]) -> float:
    """Least squares for y = k x through the origin."""
    denominator = sum(x * x for x, _ in pairs)
    return sum(x * y for x, y in pairs) / denominator if denominator else 0.0


def _line_fit(pairs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least squares for y = a + b x."""
    if len(pairs) < 2:
        return (pairs[0][1] if pairs else 0.0), 0.0
    mean_x = statistics.fmean(x for x, _ in pairs)
    mean_y = statistics.fmean(y for _, y in pairs)
    spread = sum((x - mean_x) ** 2 for x, _ in pairs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in pairs) / spread if spread else 0.0
    return mean_y - slope * mean_x, slope


@dataclass(frozen=True)
class Coefficients:
    sampler_lean: float
    sampler_older: float
    forward_buffers: float
    graph_base_gib: float
    graph_per_layer_gib: float
    non_torch_tp1_gib: float
    non_torch_comm_gib: float
    non_torch_per_rank_gib: float

    def activation_gib(self, point: Point) -> float:
        per_logit = self.sampler_lean if point.rules.lean_activation else self.sampler_older
        forward = point.forward_fixed + self.forward_buffers * point.forward_per_buffer
        sampler = point.logits * per_logit + point.forward_per_buffer
        return (max(forward, sampler) + point.moe) / GIB

    def graph_gib(self, point: Point) -> float:
        return self.graph_base_gib + self.graph_per_layer_gib * point.model.num_layers

    def non_torch_gib(self, point: Point) -> float:
        if point.tp == 1:
            return self.non_torch_tp1_gib
        return self.non_torch_tp1_gib + self.non_torch_comm_gib + self.non_torch_per_rank_gib * point.tp


def current() -> Coefficients:
    """memory.py's coefficients (the releases from 0.18 for non-torch memory)."""
    return Coefficients(
        sampler_lean=mem.SAMPLER_BYTES_PER_LOGIT,
        sampler_older=mem.SAMPLER_BYTES_PER_LOGIT_OLDER,
        forward_buffers=mem.FORWARD_HIDDEN_BUFFERS,
        graph_base_gib=mem.CUDA_GRAPH_BASE_BYTES / GIB,
        graph_per_layer_gib=mem.CUDA_GRAPH_PER_LAYER_BYTES / GIB,
        non_torch_tp1_gib=mem.NON_TORCH_BASE_BYTES / GIB,
        non_torch_comm_gib=mem.NON_TORCH_COMM_BYTES / GIB,
        non_torch_per_rank_gib=mem.NON_TORCH_COMM_PER_RANK_BYTES / GIB,
    )


def _activation_points(points: Sequence[Point]) -> list[Point]:
    # Multimodal profiles also run the vision encoder, which memory.py does not model: kept out of the fit.
    return [p for p in points if p.logged.get("activation_gib") is not None and not p.vision]


def fit(points: Sequence[Point], start: Coefficients) -> Coefficients:
    """Refit on ``points``: each start-up's binding term (sampler or forward) decided by the current fit."""
    coefficients = start
    active = _activation_points(points)
    for _ in range(5):  # the binding term can change as the coefficients move; a few rounds settle it
        lean, older, forward = [], [], []
        for p in active:
            measured = p.logged["activation_gib"] * GIB - p.moe
            per_logit = coefficients.sampler_lean if p.rules.lean_activation else coefficients.sampler_older
            sampler = p.logits * per_logit + p.forward_per_buffer
            forward_total = p.forward_fixed + coefficients.forward_buffers * p.forward_per_buffer
            if sampler >= forward_total:
                (lean if p.rules.lean_activation else older).append((p.logits, measured - p.forward_per_buffer))
            else:
                forward.append((p.forward_per_buffer, measured - p.forward_fixed))
        coefficients = Coefficients(
            sampler_lean=_ratio_fit(lean) if lean else coefficients.sampler_lean,
            sampler_older=_ratio_fit(older) if older else coefficients.sampler_older,
            forward_buffers=_ratio_fit(forward) if forward else coefficients.forward_buffers,
            graph_base_gib=coefficients.graph_base_gib,
            graph_per_layer_gib=coefficients.graph_per_layer_gib,
            non_torch_tp1_gib=coefficients.non_torch_tp1_gib,
            non_torch_comm_gib=coefficients.non_torch_comm_gib,
            non_torch_per_rank_gib=coefficients.non_torch_per_rank_gib,
        )
    graphs = [
        (float(p.model.num_layers), p.logged["cuda_graph_estimate_gib"])
        for p in points
        if p.logged.get("cuda_graph_estimate_gib") is not None
    ]
    graph_base, graph_per_layer = _line_fit(graphs) if graphs else (start.graph_base_gib, start.graph_per_layer_gib)
    recent = [p for p in points if p.rules.non_torch_025 and p.logged.get("non_torch_gib") is not None]
    tp1 = [p.logged["non_torch_gib"] for p in recent if p.tp == 1]
    base = statistics.median(tp1) if tp1 else start.non_torch_tp1_gib
    comm_pairs = [(float(p.tp), p.logged["non_torch_gib"] - base) for p in recent if p.tp > 1]
    comm, per_rank = _line_fit(comm_pairs) if comm_pairs else (start.non_torch_comm_gib, start.non_torch_per_rank_gib)
    return Coefficients(
        sampler_lean=coefficients.sampler_lean,
        sampler_older=coefficients.sampler_older,
        forward_buffers=coefficients.forward_buffers,
        graph_base_gib=graph_base,
        graph_per_layer_gib=graph_per_layer,
        non_torch_tp1_gib=base,
        non_torch_comm_gib=comm,
        non_torch_per_rank_gib=per_rank,
    )


def errors_gib(
    points: Sequence[Point], estimate: Callable[[Point], float], logged_key: str, *, activation: bool = False
) -> list[float]:
    chosen = _activation_points(points) if activation else points
    return [estimate(p) - p.logged[logged_key] for p in chosen if p.logged.get(logged_key) is not None]


def _summary(errors: Sequence[float]) -> str:
    if not errors:
        return "no points"
    absolute = sorted(abs(e) for e in errors)
    return f"median |error| {statistics.median(absolute):.3f} GiB, max {absolute[-1]:.3f} GiB over {len(errors)}"


def report(points: Sequence[Point]) -> dict[str, dict[str, list[float]]]:
    train = [p for p in points if not p.held_out]
    test = [p for p in points if p.held_out]
    before, after = current(), fit(train, current())
    print(f"{len(points)} start-ups: {len(train)} to fit, {len(test)} held out (sha256(id) % {HOLD_OUT_ONE_IN} == 0)")
    print(f"\n{'coefficient':<28} {'memory.py':>12} {'refit':>12}")
    for name in Coefficients.__dataclass_fields__:
        print(f"{name:<28} {getattr(before, name):>12.4f} {getattr(after, name):>12.4f}")
    checks = (
        ("activation", lambda c: c.activation_gib, "activation_gib", True),
        ("CUDA-graph estimate", lambda c: c.graph_gib, "cuda_graph_estimate_gib", False),
        ("non-torch (0.18+)", lambda c: c.non_torch_gib, "non_torch_gib", False),
    )
    results: dict[str, dict[str, list[float]]] = {}
    for label, getter, key, activation in checks:
        pool_train = [p for p in train if key != "non_torch_gib" or p.rules.non_torch_025]
        pool_test = [p for p in test if key != "non_torch_gib" or p.rules.non_torch_025]
        results[label] = {}
        print(f"\n{label}")
        for name, coefficients in (("memory.py", before), ("refit", after)):
            fitted = errors_gib(pool_train, getter(coefficients), key, activation=activation)
            held = errors_gib(pool_test, getter(coefficients), key, activation=activation)
            results[label][name] = held
            print(f"  {name:<10} train: {_summary(fitted)}")
            print(f"  {name:<10} held out: {_summary(held)}")
    return results


if __name__ == "__main__":
    report(load_points())
