"""The planner and the simulator agree: a plan that says "4 x 32K fits" runs 4 concurrent 32K requests without
preemption and preempts at 5."""

from __future__ import annotations

import math

import pytest

from monitor.simulator.engine import Engine
from monitor.simulator.request import SimRequest
from monitor.simulator.simulation import Simulation
from monitor.simulator.spec import ServerSpec
from planner.sizing import GIB, PlanInputs, catalog_gpus, catalog_models, compute_plan

MAX_MODEL_LEN = 32768


@pytest.fixture(scope="module")
def four_by_32k_plan():
    model = catalog_models()["llama-3.1-8b"]
    gpu = catalog_gpus()["h100-sxm"]
    probe = compute_plan(PlanInputs(model=model, gpu=gpu, max_model_len=MAX_MODEL_LEN, kv_cache_memory_gib=1.0))
    bytes_per_block = probe.page_size_bytes * probe.layers_per_gpu
    per_request = math.ceil(MAX_MODEL_LEN / probe.block_size)
    # Four worst-case requests, the null block, and a little slack.
    wanted_blocks = 4 * per_request + 1 + 8
    plan = compute_plan(
        PlanInputs(
            model=model,
            gpu=gpu,
            max_model_len=MAX_MODEL_LEN,
            kv_cache_memory_gib=wanted_blocks * bytes_per_block / GIB,
        )
    )
    assert plan.num_gpu_blocks == wanted_blocks
    assert plan.worst_case_blocks_per_request == per_request
    assert 4 <= plan.max_concurrency < 5
    return plan


def _run_concurrent(plan, count: int) -> Simulation:
    engine = Engine(ServerSpec(plan=plan).engine_config())
    simulation = Simulation([engine])
    # Prompt + output reach exactly 32K; short enough prompts that all of them are admitted at once.
    for i in range(count):
        half = MAX_MODEL_LEN // 2
        simulation.submit(SimRequest(request_id=i, arrival_time=0.0, prompt_tokens=half, output_tokens=half))
    simulation.run_to_completion()
    engine.check()
    return simulation


def test_four_concurrent_32k_requests_fit_as_planned(four_by_32k_plan):
    simulation = _run_concurrent(four_by_32k_plan, 4)
    engine = simulation.engines[0]
    assert simulation.num_preemptions == 0
    assert simulation.finished_requests == 4
    assert engine.stats.request_success["stop"] == 4
    assert engine.stats.generation_tokens == 4 * MAX_MODEL_LEN // 2


def test_five_concurrent_32k_requests_preempt(four_by_32k_plan):
    simulation = _run_concurrent(four_by_32k_plan, 5)
    assert simulation.num_preemptions > 0
    # Preempted, recomputed, and still finished normally (none gave up waiting).
    assert simulation.engines[0].stats.request_success == {"stop": 5, "length": 0, "abort": 0}


def test_step_time_comes_from_the_sizing_engine(four_by_32k_plan):
    from planner.sizing import step_time_seconds

    config = ServerSpec(plan=four_by_32k_plan).engine_config()
    expected = step_time_seconds(four_by_32k_plan, num_decode_seqs=4, context_tokens=40000, prefill_tokens=0)
    assert config.step_time(4, 40000, 0) == expected
    assert config.num_gpu_blocks == four_by_32k_plan.num_gpu_blocks
    assert config.max_model_len == MAX_MODEL_LEN
