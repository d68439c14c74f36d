"""Figures beside a plan, computed by the engine (not by charts, selectors or serializers)."""

from __future__ import annotations

from planner.sizing import PlanInputs, catalog_gpus, catalog_models, compute_plan
from planner.sizing.figures import (
    kv_bytes_per_sequence_per_gpu,
    kv_bytes_per_token,
    replica_concurrency,
    spare_kv_bytes_per_gpu,
)

MODELS = catalog_models()
GPUS = catalog_gpus()


def test_kv_bytes_per_token_at_bf16():
    # Qwen3 8B: 36 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes.
    assert kv_bytes_per_token(MODELS["qwen3-8b"]) == 147_456
    assert kv_bytes_per_token(MODELS["qwen3-8b"], "fp8") == 73_728
    # tp 2 splits the 8 KV heads: half per rank.
    assert kv_bytes_per_token(MODELS["qwen3-8b"], tensor_parallel_size=2) == 73_728


def test_replica_concurrency_rounds_up():
    plan = compute_plan(
        PlanInputs(model=MODELS["llama-3.1-8b"], gpu=GPUS["h100-sxm"], gpu_count=3, concurrency=8, max_model_len=8192)
    )
    assert plan.data_parallel_size == 3
    assert replica_concurrency(plan) == 3  # ceil(8 / 3)


def test_spare_kv_is_the_budget_the_asked_requests_leave():
    # 6 GiB of KV, 2,730 blocks; 8K requests need 512 blocks each: 2 of them use 1,024 / 2,730 of the budget.
    plan = compute_plan(
        PlanInputs(
            model=MODELS["qwen3-8b"], gpu=GPUS["rtx-4090"], kv_cache_memory_gib=6, max_model_len=8192, concurrency=2
        )
    )
    assert plan.max_concurrency == 2730 / 512
    assert spare_kv_bytes_per_gpu(plan) == 6 * 2**30 * (1 - 2 / (2730 / 512))


def test_one_sequence_holds_whole_blocks():
    plan = compute_plan(PlanInputs(model=MODELS["qwen3-8b"], gpu=GPUS["rtx-4090"], max_model_len=8192))
    # 1,000 tokens -> 63 blocks of 16 (1,008 tokens) x 147,456 bytes.
    one = kv_bytes_per_sequence_per_gpu(model=MODELS["qwen3-8b"], plan=plan, kv_cache_dtype="auto", context_tokens=1000)
    assert one == 63 * 16 * 147_456


def test_a_sequence_of_a_model_with_per_group_shapes_holds_unified_pages():
    """MiMo-V2-Flash at tp 4 on an H200, 65,536 tokens (test_sizing_mimo_v2.py's derivation): one page size for
    every layer slot once vLLM unifies them, 20,480 bytes (the full layers' block grown to 32); 9 slots a block;
    7,213 blocks a request: 7,213 x 9 x 20,480 = 1,329,500,160 bytes on each GPU. Counting every layer at the
    model-wide head shape (4 KV heads, 192) got this wrong."""
    import json
    from pathlib import Path

    from planner.sizing import model_spec_from_hf_config

    path = Path(__file__).parent / "data" / "hf_configs" / "XiaomiMiMo--MiMo-V2-Flash.json"
    model = model_spec_from_hf_config(json.loads(path.read_text(encoding="utf-8")))
    plan = compute_plan(
        PlanInputs(model=model, gpu=GPUS["h200"], tensor_parallel_size=4, kv_cache_memory_gib=40, max_model_len=65_536),
        advice=False,
    )
    assert (plan.page_size_bytes, plan.group_size, plan.worst_case_blocks_per_request) == (20_480, 9, 7_213)
    held = kv_bytes_per_sequence_per_gpu(model=model, plan=plan, kv_cache_dtype="auto", context_tokens=65_536)
    assert held == 1_329_500_160
