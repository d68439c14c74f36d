"""Benchmark of the sizing engine: plans per second, first-ask advice and a one-model catalog search.

Run from the repository root: ``.venv/bin/python bench/sizing.py``. Two baselines are measured in the
same run: one plan that fits (no advice, no table), which the targets are stated against so they hold
on any machine, and the plain formula (``tokens = (memory x util - weights / tp) / bytes_per_token``)
over the configuration grid the search walks, which says what the full vLLM rules cost on top.

Targets (issue 12): first-ask advice <= 2 ms and a whole-catalog search for one model (the API's default
ten answers) <= 5 ms, on a machine where a fitting plan takes 0.09 ms: <= 22 and <= 55 fitting plans.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.sizing import (
    PlanInputs,
    catalog_gpus,
    catalog_models,
    compute_plan,
    search_configurations,
)
from planner.sizing.compute import _advice_cached

PLAN_REFERENCE_S = 0.00009  # a fitting plan on the machine the targets were set on
ADVICE_TARGET_S = 0.002
SEARCH_TARGET_S = 0.005
ADVICE_TARGET_PLANS = ADVICE_TARGET_S / PLAN_REFERENCE_S
SEARCH_TARGET_PLANS = SEARCH_TARGET_S / PLAN_REFERENCE_S
PLAN_TARGET_MS = 0.3  # one plan of a 2026 hybrid / sparse / compressed-attention model (issue 14)


def _rate(label: str, inputs: PlanInputs, seconds: float = 1.0, *, fresh_advice: bool = True) -> float:
    """Plans per second; ``fresh_advice`` empties the engine's advice cache before each plan (a first ask)."""
    compute_plan(inputs)
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        if fresh_advice:
            _advice_cached.cache_clear()
        compute_plan(inputs)
        count += 1
    rate = count / (time.perf_counter() - start)
    print(f"{label:<58} {rate:10,.0f} plans/s")
    return rate


def _plan_rate(label: str, inputs: PlanInputs, baseline_s: float) -> float:
    """One plan's cost against the 2026 architectures' target (issue 14) and the baseline fitting plan."""
    rate = _rate(label, inputs)
    verdict = "OK" if 1e3 / rate < PLAN_TARGET_MS else "SLOWER THAN TARGET"
    print(
        f"{'':<58} {1e3 / rate:10.3f} ms per plan (target < {PLAN_TARGET_MS} ms: {verdict}; "
        f"{1 / rate / baseline_s:.2f}x the baseline plan)"
    )
    return 1 / rate


def _median_seconds(function, repeats: int) -> float:
    function()
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def _baseline(inputs: PlanInputs) -> int:
    """The naive formula over the search grid: GPU x count x tp x KV dtype."""
    model = inputs.model
    weights = 2 * model.num_params
    per_token = 2 * model.num_layers * model.num_kv_heads * model.head_size
    fitting = 0
    for gpu in catalog_gpus().values():
        for count in (1, 2, 4, 8):
            tp = 1
            while tp <= count:
                for element in (2, 1):
                    tokens = (gpu.memory_bytes * 0.92 - weights / tp) * tp / (per_token * element / 2)
                    fitting += tokens >= inputs.concurrency * (inputs.max_model_len or 1)
                tp *= 2
    return fitting


def _verdict(seconds: float, plan_s: float, target_plans: float, target_s: float) -> str:
    plans = seconds / plan_s
    ok = "OK" if plans <= target_plans else "SLOWER THAN TARGET"
    return (
        f"{seconds * 1e3:7.2f} ms = {plans:5.1f} fitting plans (target <= {target_plans:.0f}, "
        f"{target_s * 1e3:.0f} ms where a plan takes {PLAN_REFERENCE_S * 1e3:.2f} ms): {ok}"
    )


def main() -> None:
    models, gpus = catalog_models(), catalog_gpus()
    print(f"Python {sys.version.split()[0]}")
    fitting = PlanInputs(model=models["llama-3.1-8b"], gpu=gpus["h100-sxm"], max_model_len=8192)
    plan_s = _median_seconds(lambda: compute_plan(fitting, advice=False), repeats=201)
    print(f"baseline: one fitting plan {plan_s * 1e3:.3f} ms")
    missing = PlanInputs(model=models["llama-3.1-70b"], gpu=gpus["rtx-4090"], concurrency=8, max_model_len=32768)

    def first_ask() -> None:
        _advice_cached.cache_clear()
        compute_plan(missing)

    advice_s = _median_seconds(first_ask, repeats=31)
    verdict = _verdict(advice_s, plan_s, ADVICE_TARGET_PLANS, ADVICE_TARGET_S)
    print(f"first-ask advice (70B on an RTX 4090, misses) {verdict}")
    print("single plans (compute_plan, concurrency table included):")
    _rate("llama-3.1-8b on h100-sxm (fits, no advice)", PlanInputs(model=models["llama-3.1-8b"], gpu=gpus["h100-sxm"]))
    _rate(
        "gemma-3-27b on h100-sxm (hybrid sliding window)",
        PlanInputs(model=models["gemma-3-27b"], gpu=gpus["h100-sxm"], max_model_len=32768),
    )
    _rate(
        "llama-3.1-70b on rtx-4090 (misses: advice + search)",
        PlanInputs(model=models["llama-3.1-70b"], gpu=gpus["rtx-4090"], concurrency=8, max_model_len=32768),
        seconds=2.0,
    )
    _rate(
        "the same, asked again (advice from the engine's cache)",
        PlanInputs(model=models["llama-3.1-70b"], gpu=gpus["rtx-4090"], concurrency=8, max_model_len=32768),
        fresh_advice=False,
    )
    slowest = 0.0
    for slug, tp in (
        ("qwen3-next-80b-a3b", 2),
        ("qwen3.5-35b-a3b", 1),
        ("nemotron-3-nano-30b-a3b", 1),
        ("nemotron-3-super-120b-a12b-fp8", 4),
        ("deepseek-v3.2", 8),
        ("mimo-v2-flash", 4),
        ("llama-3.3-nemotron-super-49b", 2),
    ):
        inputs = PlanInputs(model=models[slug], gpu=gpus["h200"], tensor_parallel_size=tp, max_model_len=32768)
        slowest = max(slowest, _plan_rate(f"{slug} tp {tp} on h200 (2026 layouts)", inputs, plan_s))
    for max_len in (65_536, 1_048_576):
        inputs = PlanInputs(
            model=models["deepseek-v4-flash"], gpu=gpus["h200"], tensor_parallel_size=8, max_model_len=max_len
        )
        slowest = max(
            slowest, _plan_rate(f"deepseek-v4-flash tp 8 on h200 at {max_len:,} (compressed)", inputs, plan_s)
        )
    print(
        f"2026 layouts: slowest plan {slowest * 1e3:.3f} ms (target < {PLAN_TARGET_MS} ms), "
        f"{slowest / plan_s:.2f}x the baseline fitting plan ({plan_s * 1e3:.3f} ms)"
    )

    print(f"one-model search over the catalog ({len(gpus)} GPUs x 1,2,4,8 GPUs x tp x 2 KV dtypes):")
    for slug, inputs in (
        (
            "llama-3.1-70b",
            PlanInputs(
                model=models["llama-3.1-70b"],
                gpu=gpus["h100-sxm"],
                concurrency=16,
                max_model_len=32768,
                target_tpot_ms=60,
                target_ttft_ms=5000,
                prompt_tokens=4000,
                output_tokens=500,
            ),
        ),
        (
            "gemma-3-27b",
            PlanInputs(model=models["gemma-3-27b"], gpu=gpus["h100-sxm"], concurrency=32, max_model_len=32768),
        ),
    ):
        found = search_configurations(inputs)
        top_s = _median_seconds(lambda inputs=inputs: search_configurations(inputs, limit=10), repeats=15)
        all_s = _median_seconds(lambda inputs=inputs: search_configurations(inputs), repeats=7)
        unpruned_s = _median_seconds(lambda inputs=inputs: search_configurations(inputs, prune=False), repeats=7)
        baseline_s = _median_seconds(lambda inputs=inputs: _baseline(inputs), repeats=15)
        print(f"{slug:<16} cheapest 10 {_verdict(top_s, plan_s, SEARCH_TARGET_PLANS, SEARCH_TARGET_S)}")
        print(
            f"{'':<16} all {len(found)} candidates {all_s * 1e3:7.1f} ms (without pruning {unpruned_s * 1e3:7.1f} ms); "
            f"baseline formula {baseline_s * 1e3:6.3f} ms; ratio {top_s / baseline_s:,.0f}x"
        )


if __name__ == "__main__":
    main()
