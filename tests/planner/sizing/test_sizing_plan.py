"""A whole plan: fit, problems, allocation, estimates, advice, command, assumptions, JSON."""

from __future__ import annotations

import json
import math

import pytest

from planner.sizing import (
    PlanInputs,
    catalog_gpus,
    catalog_models,
    compute_plan,
    plan_to_dict,
    step_time_seconds,
)

MODELS = catalog_models()
GPUS = catalog_gpus()


def _plan(**changes):
    fields = {"model": MODELS["llama-3.1-8b"], "gpu": GPUS["h100-sxm"], **changes}
    return compute_plan(PlanInputs(**fields))


def test_plan_to_dict_is_json_ready_with_the_documented_keys():
    data = plan_to_dict(_plan(concurrency=3))
    text = json.dumps(data)
    assert json.loads(text) == data
    for key in (
        "inputs",
        "kv_bytes_per_token",
        "kv_bytes_per_token_per_gpu",
        "page_size_bytes",
        "weights_bytes",
        "weights_bytes_per_gpu",
        "memory_per_gpu",
        "kv_budget_bytes_per_gpu",
        "num_gpu_blocks",
        "block_size",
        "kv_capacity_tokens",
        "worst_case_blocks_per_request",
        "max_concurrency",
        "max_context_len",
        "fits",
        "problems",
        "concurrency_table",
        "allocation",
        "estimates",
        "advice",
        "vllm_command",
        "assumptions",
    ):
        assert key in data
    assert set(data["memory_per_gpu"]) == {
        "total_bytes",
        "requested_bytes",
        "weights_bytes",
        "activation_bytes",
        "non_torch_bytes",
        "kv_cache_bytes",
        "unrequested_bytes",
    }
    assert set(data["concurrency_table"][0]) == {
        "concurrency",
        "max_context_len",
        "kv_limited_context_len",
        "limited_by",
    }
    assert [row["concurrency"] for row in data["concurrency_table"]] == [1, 2, 3, 4, 8, 16, 32, 64, 128, 256]
    assert "speed_model" not in data


def test_defaults_are_resolved_and_every_assumption_has_a_source():
    plan = _plan()
    assert plan.inputs.gpu_count == 1
    assert plan.inputs.block_size == 16
    assert plan.inputs.max_model_len == 131072
    assert plan.inputs.max_num_seqs == 1024
    names = {a.name for a in plan.assumptions}
    assert {"gpu_memory_utilization", "block_size", "max_num_batched_tokens", "max_model_len"} <= names
    assert {"activation_peak", "non_torch_memory", "weights", "gpu_memory_total"} <= names
    assert all(a.source for a in plan.assumptions)


def test_vllm_command():
    plan = _plan(tensor_parallel_size=2, kv_cache_dtype="fp8", max_model_len=32768, concurrency=8)
    assert plan.vllm_command == (
        "vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 2 --pipeline-parallel-size 1 "
        "--max-model-len 32768 --max-num-seqs 1024 --gpu-memory-utilization 0.92 --kv-cache-dtype fp8 "
        "--block-size 16 --max-num-batched-tokens 8192"
    )
    override = _plan(kv_cache_memory_gib=10)
    assert f"--kv-cache-memory-bytes {10 * 2**30}" in override.vllm_command
    assert "--gpu-memory-utilization" not in override.vllm_command
    replicas = _plan(gpu_count=4, tensor_parallel_size=2)
    assert "--data-parallel-size 2" in replicas.vllm_command


def test_fit_and_refusal_message_when_one_request_does_not_fit():
    plan = _plan(gpu=GPUS["rtx-4090"], max_model_len=131072)
    assert not plan.fits
    assert plan.max_concurrency < 1
    refusal = next(p for p in plan.problems if "vLLM refuses to start" in p)
    assert f"estimated maximum model length is {plan.concurrency_table[0].kv_limited_context_len}" in refusal
    kinds = {row.kind for row in plan.advice}
    assert {"kv_cache_dtype", "max_model_len", "gpu", "search"} <= kinds
    shorter = next(row for row in plan.advice if row.kind == "max_model_len")
    assert shorter.changes["max_model_len"] == plan.max_context_len


def test_concurrency_shortfall_is_a_problem_with_the_length_that_fits():
    plan = _plan(max_model_len=131072, concurrency=8)
    assert not plan.fits
    assert plan.max_concurrency == pytest.approx(plan.num_gpu_blocks / (131072 // 16))
    assert plan.max_context_len == (plan.num_gpu_blocks // 8) * 16
    assert any(f"{plan.max_context_len:,}" in p for p in plan.problems)
    fp8 = next(row for row in plan.advice if row.kind == "kv_cache_dtype")
    assert fp8.changes == {"kv_cache_dtype": "fp8"}


def test_a_plan_that_meets_its_sla_has_no_advice():
    plan = _plan(max_model_len=8192, concurrency=4, target_tpot_ms=100)
    assert plan.fits and plan.meets_sla
    assert plan.advice == ()


def test_missing_tpot_target_gets_advice_but_still_fits():
    plan = _plan(max_model_len=8192, concurrency=4, target_tpot_ms=1)
    assert plan.fits and not plan.meets_sla
    assert any("TPOT" in p for p in plan.problems)
    assert plan.advice


def test_paged_allocation_holds_more_sequences_than_contiguous():
    plan = _plan(max_model_len=32768, prompt_tokens=1500, output_tokens=500)
    allocation = plan.allocation
    assert allocation.sequence_tokens == 2000
    assert allocation.naive_sequences == plan.kv_capacity_tokens // 32768
    assert allocation.paged_sequences == plan.usable_blocks // math.ceil(2000 / 16)
    assert allocation.paged_sequences > 10 * allocation.naive_sequences


def test_shared_prefix_blocks_are_counted_once():
    plain = _plan(max_model_len=32768, prompt_tokens=1500, output_tokens=500)
    shared = _plan(max_model_len=32768, prompt_tokens=1500, output_tokens=500, shared_prefix_tokens=1024)
    assert shared.allocation.paged_sequences > plain.allocation.paged_sequences
    assert shared.estimates.prefill_ttft_ms < plain.estimates.prefill_ttft_ms


def test_speed_estimates_are_labelled_and_consistent():
    plan = _plan(max_model_len=8192, concurrency=8, prompt_tokens=2000, output_tokens=200)
    estimates = plan.estimates
    assert "estimate" in estimates.label
    weights_s = plan.weights_bytes_per_gpu / GPUS["h100-sxm"].bandwidth_bytes_per_s
    assert estimates.decode_step_ms / 1e3 > weights_s
    assert estimates.tpot_ms == pytest.approx(estimates.decode_step_ms)
    assert estimates.tokens_per_s_per_seq == pytest.approx(1e3 / estimates.decode_step_ms)
    assert estimates.tokens_per_s_total == pytest.approx(8 * estimates.tokens_per_s_per_seq)
    linear = 2 * plan.inputs.model.num_active_params * 2000 / (989.4e12 * estimates.prefill_mfu)
    assert estimates.prefill_ttft_ms / 1e3 == pytest.approx(linear, rel=0.1)


def test_step_time_grows_with_decode_sequences_and_context():
    plan = _plan(max_model_len=8192)
    one = step_time_seconds(plan, num_decode_seqs=1, context_tokens=1000, prefill_tokens=0)
    assert step_time_seconds(plan, num_decode_seqs=64, context_tokens=64 * 4000, prefill_tokens=0) > one
    assert step_time_seconds(plan, num_decode_seqs=1, context_tokens=1000, prefill_tokens=8192) > one
    assert step_time_seconds(plan, num_decode_seqs=0, context_tokens=0, prefill_tokens=0) == 0


def test_more_tensor_parallelism_speeds_decode_and_frees_memory():
    tp1 = _plan(max_model_len=8192, concurrency=8)
    tp2 = _plan(max_model_len=8192, concurrency=8, tensor_parallel_size=2)
    assert tp2.estimates.tpot_ms < tp1.estimates.tpot_ms
    assert tp2.weights_bytes_per_gpu < tp1.weights_bytes_per_gpu


def test_data_parallel_replicas_split_the_concurrency():
    plan = _plan(gpu_count=4, concurrency=64, max_model_len=8192)
    assert plan.data_parallel_size == 4
    assert any(row.concurrency == 16 for row in plan.concurrency_table)
    single = _plan(concurrency=16, max_model_len=8192)
    assert plan.estimates.tokens_per_s_total == pytest.approx(4 * single.estimates.tokens_per_s_total)
