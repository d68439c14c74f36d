"""Several KV cache groups in the simulator (monitor/simulator/kv_layout.py): a request draws blocks from the shared
pool in every group, as vLLM's per-group managers do, so a hybrid plan's concurrency holds in simulation too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.simulator.engine import Engine
from monitor.simulator.kv_layout import KvGroup, KvLayout, layout_from_plan
from monitor.simulator.request import SimRequest
from monitor.simulator.simulation import Simulation
from monitor.simulator.spec import ServerSpec
from planner.sizing import GIB, PlanInputs, catalog_gpus, catalog_models, compute_plan, model_spec_from_hf_config

CONFIGS = Path(__file__).parents[2] / "planner" / "sizing" / "data" / "hf_configs"
QWEN3_NEXT = json.loads((CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Thinking.json").read_text(encoding="utf-8"))
# Qwen3-Next tp 2, prefix caching off, on an H100 (tests/planner/sizing/test_sizing_hybrid.py): block 544 tokens,
# 6,684,672 bytes a block (12 x 544 x 1,024), one attention group and three GDN groups holding one state block each.
BYTES_PER_BLOCK = 6_684_672


def test_a_request_holds_blocks_in_every_group():
    """Qwen3-Next at 32,768 tokens: cdiv(32,768, 544) = 61 attention blocks + 3 state groups x 1 = 64, the plan's
    worst case; a dense layout would have counted 61."""
    layout = KvLayout((KvGroup("full", None, 1, 544), KvGroup("state", None, 3, 544)), state_blocks=1)
    assert layout.held(32_768, 32_767) == 64
    assert layout.held(1, 0) == 4


def test_a_sliding_window_gives_back_what_slid_out():
    """gpt-oss-20b's groups (block 16, window 128): 1,000 tokens with 900 computed hold cdiv(1,000, 16) = 63 blocks
    in a full group; the sliding group frees the (900 - 127) // 16 = 48 blocks before its window: 15."""
    layout = KvLayout((KvGroup("full", None, 1, 16), KvGroup("sliding_window", 128, 1, 16)))
    assert layout.held(1_000, 900) == 63 + 15


def test_a_dense_plan_keeps_the_plain_path():
    plan = compute_plan(
        PlanInputs(model=catalog_models()["llama-3.1-8b"], gpu=catalog_gpus()["h100-sxm"], kv_cache_memory_gib=1),
        advice=False,
    )
    assert layout_from_plan(plan) is None


@pytest.fixture(scope="module")
def hybrid_plan():
    """312 blocks: the plan says 312 / 64 = 4.875 requests of 32K fit. Counting attention blocks only (61 a request),
    5 x 61 = 305 would have fitted the 311 usable blocks."""
    plan = compute_plan(
        PlanInputs(
            model=model_spec_from_hf_config(QWEN3_NEXT),
            gpu=catalog_gpus()["h100-sxm"],
            tensor_parallel_size=2,
            gpu_count=2,
            enable_prefix_caching=False,
            max_model_len=32_768,
            kv_cache_memory_gib=312 * BYTES_PER_BLOCK / GIB,
        ),
        advice=False,
    )
    assert (plan.num_gpu_blocks, plan.block_size, plan.worst_case_blocks_per_request) == (312, 544, 64)
    return plan


def _run(plan, count: int) -> Simulation:
    simulation = Simulation([Engine(ServerSpec(plan=plan).engine_config())])
    for i in range(count):
        simulation.submit(SimRequest(request_id=i, arrival_time=0.0, prompt_tokens=16_384, output_tokens=16_384))
    simulation.run_to_completion()
    simulation.engines[0].check()
    return simulation


def test_four_hybrid_requests_fit_as_planned(hybrid_plan):
    simulation = _run(hybrid_plan, 4)
    assert simulation.num_preemptions == 0
    assert simulation.engines[0].stats.request_success["stop"] == 4


def test_the_fifth_hybrid_request_preempts_as_planned(hybrid_plan):
    simulation = _run(hybrid_plan, 5)
    assert simulation.num_preemptions > 0
    assert simulation.engines[0].stats.request_success == {"stop": 5, "length": 0, "abort": 0}
