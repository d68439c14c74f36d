"""The search plans only what can enter its answer: pruning and a limit change how much it plans, never what
it answers. Counted in plans (not seconds) so the checks hold on any machine; bench/sizing.py times them."""

from __future__ import annotations

import pytest

import planner.sizing.compute as compute_module
import planner.sizing.search as search_module
from planner.sizing import PlanInputs, catalog_gpus, catalog_models, compute_plan, search_configurations
from planner.sizing.compute import _advice_cached

MODELS = catalog_models()
GPUS = catalog_gpus()
CASES = {
    "dense 70B with SLA": PlanInputs(
        model=MODELS["llama-3.1-70b"],
        gpu=GPUS["h100-sxm"],
        concurrency=16,
        max_model_len=32768,
        target_tpot_ms=60,
        target_ttft_ms=5000,
        prompt_tokens=4000,
        output_tokens=500,
    ),
    "hybrid sliding window": PlanInputs(
        model=MODELS["gemma-3-27b"], gpu=GPUS["h100-sxm"], concurrency=32, max_model_len=32768
    ),
    "MLA": PlanInputs(model=MODELS["deepseek-v2-lite"], gpu=GPUS["h100-sxm"], concurrency=64, max_model_len=32768),
    "MoE mxfp4": PlanInputs(model=MODELS["gpt-oss-120b"], gpu=GPUS["h100-sxm"], concurrency=8, max_model_len=65536),
    "hybrid state (Qwen3.5)": PlanInputs(
        model=MODELS["qwen3.5-27b"], gpu=GPUS["h100-sxm"], concurrency=16, max_model_len=65536
    ),
    "page-size unification (Gemma 4)": PlanInputs(
        model=MODELS["gemma-4-26b-a4b"], gpu=GPUS["h100-sxm"], concurrency=16, max_model_len=65536
    ),
    "sparse attention indexer (DeepSeek V3.2)": PlanInputs(
        model=MODELS["deepseek-v3.2"], gpu=GPUS["h200"], concurrency=8, max_model_len=32768, weight_dtype="fp8"
    ),
    "chunked local": PlanInputs(
        model=MODELS["llama-4-scout"], gpu=GPUS["h100-sxm"], concurrency=4, max_model_len=131072
    ),
}


def _key(candidates):
    return [(c.gpu.slug, c.gpu_count, c.tensor_parallel_size, c.kv_cache_dtype) for c in candidates]


@pytest.mark.parametrize("case", list(CASES))
def test_pruning_and_limits_never_change_the_answer(case):
    inputs = CASES[case]
    full = search_configurations(inputs, prune=False)
    assert _key(search_configurations(inputs)) == _key(full)
    for limit in (1, 3, 10):
        assert _key(search_configurations(inputs, limit=limit)) == _key(full[:limit])


@pytest.fixture
def plans_built(monkeypatch):
    counter = {"plans": 0}
    original = compute_module.build_plan

    def counting(inputs, *, table=True):
        counter["plans"] += 1
        return original(inputs, table=table)

    monkeypatch.setattr(compute_module, "build_plan", counting)
    monkeypatch.setattr(search_module, "build_plan", counting)
    return counter


def test_the_cheapest_ten_plan_a_fraction_of_the_grid(plans_built):
    inputs = CASES["hybrid sliding window"]
    search_configurations(inputs, prune=False)
    everything = plans_built["plans"]
    plans_built["plans"] = 0
    search_configurations(inputs, limit=10)
    # 13 GPUs x (1 + 2 + 3 + 4 tensor-parallel choices) x 2 KV dtypes, less those the weights rule out.
    assert everything > 100
    assert plans_built["plans"] <= 30


def test_first_ask_advice_plans_a_handful_not_the_catalog(plans_built):
    _advice_cached.cache_clear()
    missing = PlanInputs(model=MODELS["llama-3.1-70b"], gpu=GPUS["rtx-4090"], concurrency=8, max_model_len=32768)
    plan = compute_plan(missing)
    assert {row.kind for row in plan.advice} >= {"kv_cache_dtype", "weight_dtype", "gpu", "search"}
    # The plan itself, fp8 and int4 weights, fp8 KV, tp 2, the bigger GPUs the weights leave room on, and
    # the cheapest catalog configuration: never the whole grid the search walks (~130 plans).
    assert plans_built["plans"] <= 12


def test_a_negative_limit_is_refused():
    from planner.sizing import SizingInputError

    with pytest.raises(SizingInputError):
        search_configurations(CASES["MLA"], limit=0)


@pytest.mark.parametrize("slug", ["gemma-3-27b", "gemma-2-9b", "phi-3-mini-4k", "llama-4-scout", "gpt-oss-20b"])
def test_the_windowed_shortcut_answers_what_the_binary_search_answers(slug):
    import random

    from planner.sizing.kv_cache import max_length_for_blocks, pipeline_stages, stage_groups
    from planner.sizing.plan import _kv_limited_length

    model = MODELS[slug]
    rng = random.Random(12)
    for _ in range(300):
        block_size = rng.choice((16, 32, 64))
        inputs = PlanInputs(model=model, gpu=GPUS["h100-sxm"], block_size=block_size)
        stage = stage_groups(model, pipeline_stages(model.num_layers, 1)[0])
        blocks, concurrency = rng.randint(0, 200_000), rng.randint(1, 300)
        in_flight, upper = rng.choice((0, 2048, 8192, 16384)), rng.randint(1, 1 << 21)
        expected = max_length_for_blocks(model, stage, blocks, concurrency, block_size, in_flight, upper)
        assert _kv_limited_length(inputs, stage, blocks, concurrency, in_flight, upper) == expected
