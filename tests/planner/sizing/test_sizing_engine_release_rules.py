"""The release each engine rule starts at (planner/sizing/engine.py), read in that release's own wheel.

Each cut-over is checked on both sides: the release before it and the release that brought it. Sources, inside the
``vllm`` package of each wheel (``pip download --no-deps vllm==X``):

* reported tokens: 0.20's ``v1/core/kv_cache_utils.py`` logs ``num_blocks // len(groups) * min_block_size``,
  0.21's ``_report_kv_cache_config`` ``int(max_concurrency * max_model_len)``;
* Mamba2's prefill checkpoint block: ``MambaSpec.num_prefill_checkpoint_blocks`` exists from 0.29, and 0.32's
  ``model_executor/layers/mamba/mamba_mixer2.py`` is the first mixer to set it (``get_kv_cache_spec``);
* the gated delta net's (FlashInfer prefill only) and its 64-token grid: 0.33's ``qwen_gdn_linear_attn.py``;
* sliding-window admission: ``VllmConfig.max_in_flight_tokens`` (``config/vllm.py``) from 0.26; 0.25's
  ``SlidingWindowSpec.max_memory_usage_bytes`` adds one ``max_num_batched_tokens``.

Figures reuse the hand derivations of test_sizing_hybrid.py (40 GiB of KV memory per GPU).
"""

from __future__ import annotations

import json
from pathlib import Path

from planner.sizing import PlanInputs, catalog_gpus, catalog_models, compute_plan, model_spec_from_hf_config

CONFIGS = Path(__file__).parent / "data" / "hf_configs"
QWEN3_NEXT = "Qwen--Qwen3-Next-80B-A3B-Thinking"
NEMOTRON_NANO = "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"


def plan_for(name: str, **kwargs):
    model = model_spec_from_hf_config(json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8")))
    inputs = PlanInputs(model=model, gpu=catalog_gpus()["h100-sxm"], kv_cache_memory_gib=40, **kwargs)
    return compute_plan(inputs, advice=False)


def test_reported_tokens_are_blocks_over_groups_until_0_20():
    """Qwen3-Next tp 2, prefix caching off (the default before 0.28): 6,425 blocks of 544 tokens in 4 groups (1
    attention, 3 GDN); 0.20 logs 6,425 // 4 x 544 = 1,606 x 544 = 873,664 tokens."""
    plan = plan_for(QWEN3_NEXT, tensor_parallel_size=2, engine_version="0.20")
    assert plan.inputs.enable_prefix_caching is False
    assert plan.num_gpu_blocks == 6_425
    assert plan.reported_kv_cache_tokens == 873_664


def test_reported_tokens_are_concurrency_times_length_from_0_21():
    """The same plan on 0.21: 485 blocks a request (cdiv(262,144, 544) = 482 + 3 state groups x 1), int(6,425 /
    485 x 262,144) = 3,472,732 tokens."""
    plan = plan_for(QWEN3_NEXT, tensor_parallel_size=2, engine_version="0.21")
    assert plan.num_gpu_blocks == 6_425
    assert plan.worst_case_blocks_per_request == 485
    assert plan.reported_kv_cache_tokens == 3_472_732


def test_gdn_checkpoint_block_and_grid_start_at_0_33():
    """Qwen3-Next tp 2 on an H100 (FlashInfer GDN prefill) with prefix caching on. 0.32: no checkpoint, no 64-token
    grid: block 16 x cdiv(548,864, 16 x 1,024) = 544, 482 + 3 x 2 = 488 blocks a request. 0.33: block 576,
    456 + 3 x 3 = 465 (test_qwen3_next_tp2_prefix_caching_on_h100)."""
    older = plan_for(QWEN3_NEXT, tensor_parallel_size=2, engine_version="0.32", enable_prefix_caching=True)
    assert (older.block_size, older.state_blocks_per_request, older.worst_case_blocks_per_request) == (544, 2, 488)
    newer = plan_for(QWEN3_NEXT, tensor_parallel_size=2, engine_version="0.33", enable_prefix_caching=True)
    assert (newer.block_size, newer.state_blocks_per_request, newer.worst_case_blocks_per_request) == (576, 3, 465)


def test_mamba2_checkpoint_block_starts_at_0_32():
    """Nemotron 3 Nano with prefix caching on: block 2,096 either way (Mamba2's checkpoint alignment is 1), 3,335
    blocks. 0.31: 126 + 4 state groups x 2 = 134 a request; 0.32: 126 + 4 x 3 = 138."""
    older = plan_for(NEMOTRON_NANO, engine_version="0.31", enable_prefix_caching=True)
    assert (older.block_size, older.num_gpu_blocks) == (2_096, 3_335)
    assert older.worst_case_blocks_per_request == 134
    newer = plan_for(NEMOTRON_NANO, engine_version="0.32", enable_prefix_caching=True)
    assert newer.worst_case_blocks_per_request == 138


def _gpt_oss(engine_version: str):
    inputs = PlanInputs(
        model=catalog_models()["gpt-oss-20b"],
        gpu=catalog_gpus()["h100-sxm"],
        max_model_len=131_072,
        max_num_batched_tokens=8192,
        kv_cache_memory_gib=20,
        engine_version=engine_version,
    )
    return compute_plan(inputs, advice=False)


def test_sliding_windows_reserve_two_batches_from_0_26():
    """gpt-oss-20b (window 128, block 16), 8,192 batched tokens. 0.25: one batch, cdiv(127 + 8,192, 16) + 1 = 521
    blocks per sliding group; 0.26: two (async scheduling at pp 1), cdiv(127 + 16,384, 16) + 1 = 1,033."""
    older = _gpt_oss("0.25")
    assert older.in_flight_tokens == 8_192
    assert older.kv_groups[0].kind == "sliding_window"
    assert older.kv_groups[0].worst_case_blocks == 521
    newer = _gpt_oss("0.26")
    assert newer.in_flight_tokens == 16_384
    assert newer.kv_groups[0].worst_case_blocks == 1_033
