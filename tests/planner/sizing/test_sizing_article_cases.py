"""The seed article's two deployment cases, reproduced with vLLM's arithmetic."""

from __future__ import annotations

import pytest

from planner.sizing import GIB, PlanInputs, catalog_gpus, catalog_models, compute_plan

MODELS = catalog_models()
GPUS = catalog_gpus()


def _rtx_4090_qwen3(**kwargs):
    return compute_plan(
        PlanInputs(
            model=MODELS["qwen3-8b"], gpu=GPUS["rtx-4090"], kv_cache_memory_gib=6, context_rounding="pow2", **kwargs
        )
    )


def test_rtx_4090_qwen3_8b_holds_about_43k_tokens():
    plan = _rtx_4090_qwen3()
    assert 6 * GIB // 147_456 == 43_690
    assert plan.num_gpu_blocks == 6 * GIB // (16 * 147_456) == 2730
    assert plan.kv_capacity_tokens == pytest.approx(43_690, rel=0.001)


def test_rtx_4090_qwen3_8b_concurrency_table_matches_the_article():
    table = {row.concurrency: row for row in _rtx_4090_qwen3().concurrency_table}
    assert {c: table[c].max_context_len for c in (1, 4, 8, 16)} == {1: 32_768, 4: 8_192, 8: 4_096, 16: 2_048}
    assert table[1].limited_by == "max_position_embeddings"  # Qwen3's max_position_embeddings (40,960) binds first
    assert table[4].limited_by == "kv_cache"


def test_rtx_4090_qwen3_8b_fp8_kv_doubles_capacity():
    auto = _rtx_4090_qwen3()
    fp8 = _rtx_4090_qwen3(kv_cache_dtype="fp8")
    assert fp8.kv_bytes_per_token == 73_728
    assert fp8.num_gpu_blocks == 6 * 2**30 // (16 * 73_728) == 5461  # 2 x 2730.67 blocks, floored
    assert fp8.kv_capacity_tokens == pytest.approx(2 * auto.kv_capacity_tokens, abs=16)
    table = {row.concurrency: row.max_context_len for row in fp8.concurrency_table}
    assert table[4] == 16_384


@pytest.mark.parametrize("kv_bytes", [43e9, 43 * GIB], ids=["43GB", "43GiB"])
def test_four_h100_llama_70b_holds_about_537k_tokens(kv_bytes):
    plan = compute_plan(
        PlanInputs(
            model=MODELS["llama-3.1-70b"],
            gpu=GPUS["h100-sxm"],
            tensor_parallel_size=4,
            kv_cache_memory_gib=kv_bytes / GIB,
        )
    )
    assert plan.kv_bytes_per_token == 327_680
    assert plan.kv_bytes_per_token_per_gpu == 327_680 // 4
    assert plan.kv_capacity_tokens == pytest.approx(537_000, rel=0.05)
    assert "--kv-cache-memory-bytes" in plan.vllm_command


def test_four_h100_llama_70b_concurrency_table_matches_the_article():
    # The article counts in decimal units (43 GB, 320 KB/token); with 43 GiB the table runs 5% over.
    plan = compute_plan(
        PlanInputs(
            model=MODELS["llama-3.1-70b"], gpu=GPUS["h100-sxm"], tensor_parallel_size=4, kv_cache_memory_gib=43e9 / GIB
        )
    )
    table = {row.concurrency: row.max_context_len for row in plan.concurrency_table}
    for concurrency, article in ((4, 134_000), (16, 33_500), (64, 8_375)):
        assert table[concurrency] == pytest.approx(article, rel=0.05)
