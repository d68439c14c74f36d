"""What binds a context (max_model_len, the model's positions, the KV cache), and plans vLLM would refuse."""

from __future__ import annotations

import pytest

from planner.sizing import GIB, PlanInputs, catalog_gpus, catalog_models, compute_plan, plan_to_dict

MODELS = catalog_models()
GPUS = catalog_gpus()


def _qwen3_on_4090(**changes):
    # The KV-cache article's case: 6 GiB of KV on an RTX 4090, Qwen3 8B at 147,456 bytes per token
    # (36 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes) -> 6 GiB // (16 x 147,456) = 2,730 blocks.
    fields = {"model": MODELS["qwen3-8b"], "gpu": GPUS["rtx-4090"], "kv_cache_memory_gib": 6, **changes}
    return compute_plan(PlanInputs(**fields))


def test_max_context_never_exceeds_the_scenarios_max_model_len():
    plan = _qwen3_on_4090(max_model_len=32768)
    table = {row.concurrency: row for row in plan.concurrency_table}
    # One request: the cache holds 2,730 x 16 = 43,680 tokens, but the scenario allows 32,768.
    assert (table[1].max_context_len, table[1].kv_limited_context_len) == (32_768, 43_680)
    assert table[1].limited_by == "max_model_len"
    # Two: 2,730 // 2 = 1,365 blocks each = 21,840 tokens, below max_model_len: the cache binds.
    assert (table[2].max_context_len, table[2].limited_by) == (21_840, "kv_cache")
    assert plan.max_context_len == 32_768
    assert all(row.max_context_len <= 32_768 for row in plan.concurrency_table)


def test_the_longest_max_model_len_is_its_own_figure_capped_by_the_models_positions():
    # 43,680 tokens of cache for one request, but Qwen3 8B has 40,960 positions.
    assert _qwen3_on_4090(max_model_len=32768).longest_max_model_len == 40_960
    # 2 GiB: 2 GiB // (16 x 147,456) = 910 blocks = 14,560 tokens, the cache binds (vLLM's estimate_max_model_len).
    small = _qwen3_on_4090(max_model_len=8192, kv_cache_memory_gib=2)
    assert small.longest_max_model_len == 14_560
    assert plan_to_dict(small)["longest_max_model_len"] == 14_560


def test_the_model_positions_bind_when_max_model_len_is_left_at_them():
    plan = _qwen3_on_4090()
    assert plan.inputs.max_model_len == 40_960
    assert plan.concurrency_table[0].limited_by == "max_position_embeddings"
    assert plan.concurrency_table[0].max_context_len == 40_960


def test_70b_on_four_h100_at_8k_reports_8k_at_every_concurrency_the_cache_allows():
    plan = compute_plan(
        PlanInputs(model=MODELS["llama-3.1-70b"], gpu=GPUS["h100-sxm"], tensor_parallel_size=4, max_model_len=8192)
    )
    assert plan.max_context_len == 8192
    assert max(row.max_context_len for row in plan.concurrency_table) == 8192
    assert {row.limited_by for row in plan.concurrency_table if row.kv_limited_context_len >= 8192} == {"max_model_len"}


def _405b_bf16_on_8_h100(**changes):
    fields = {
        "model": MODELS["llama-3.1-405b"],
        "gpu": GPUS["h100-sxm"],
        "tensor_parallel_size": 8,
        "weight_dtype": "bfloat16",
        "max_model_len": 8192,
        **changes,
    }
    return compute_plan(PlanInputs(**fields))


def test_a_plan_vllm_would_refuse_says_by_how_much_and_gives_no_speed():
    plan = _405b_bf16_on_8_h100()
    # 405.853B parameters x 2 bytes / 8 GPUs = 101,463,250,000 bytes (94.50 GiB) per GPU, against
    # ceil(85,018,877,624 x 0.92) = 78,217,367,415 bytes (72.85 GiB) vLLM may use.
    assert plan.weights_bytes_per_gpu == 101_463_250_000
    assert plan.memory_per_gpu.requested_bytes == 78_217_367_415
    assert not plan.starts and not plan.fits
    assert plan.estimates is None
    assert plan.shortfall_bytes_per_gpu > 101_463_250_000 - 78_217_367_415
    assert "vLLM refuses to start" in plan.problems[0]
    assert f"{plan.shortfall_bytes_per_gpu / GIB:.2f} GiB short per GPU" in plan.problems[0]
    data = plan_to_dict(plan)
    assert data["estimates"] is None and data["starts"] is False


def test_a_plan_that_starts_has_speed_and_no_shortfall():
    plan = _qwen3_on_4090(max_model_len=8192)
    assert plan.starts and plan.shortfall_bytes_per_gpu == 0
    assert plan.estimates is not None


def test_advice_for_a_model_too_big_offers_fp8_weights_when_they_fit():
    plan = _405b_bf16_on_8_h100()
    rows = {row.kind: row for row in plan.advice}
    fp8 = rows["weight_dtype"]
    assert fp8.changes == {"weight_dtype": "fp8"}
    # fp8: 1 byte per parameter but the 2 x 128,256 x 16,384 embedding and LM-head parameters at 2 bytes:
    # (2 x 4,202,692,608 + 401,650,307,392) / 8 = 51,256,461,576 bytes = 47.74 GiB per GPU.
    assert "94.50 -> 47.74 GiB per GPU" in fp8.message
    assert "meets the targets" in fp8.message
    assert compute_plan(PlanInputs(**{**plan.inputs.__dict__, "weight_dtype": "fp8"})).starts


def test_advice_offers_more_gpus_across_nodes_when_a_node_is_full():
    plan = _405b_bf16_on_8_h100()
    more = next(row for row in plan.advice if row.kind == "pipeline_parallel_size")
    assert more.changes == {"pipeline_parallel_size": 2, "gpu_count": 16}
    assert "16 GPUs" in more.message


@pytest.mark.parametrize("kind", ["kv_cache_dtype", "search"])
def test_advice_still_offers_the_kv_dtype_and_the_search(kind):
    assert kind in {row.kind for row in _405b_bf16_on_8_h100().advice}
