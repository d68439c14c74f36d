"""KV bytes per token, blocks and worst cases: the seed article's table and vLLM's rules."""

from __future__ import annotations

import math

import pytest

from planner.sizing import GIB, PlanInputs, catalog_gpus, catalog_models, compute_plan, model_spec_from_hf_config
from planner.sizing.kv_cache import pipeline_stages

MODELS = catalog_models()
GPUS = catalog_gpus()

LLAMA_3_8B_MHA = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}


def _plan(model, **kwargs):
    kwargs.setdefault("gpu", GPUS["h200"])
    return compute_plan(PlanInputs(model=model, **kwargs))


# The seed article's table: bytes/token (BF16) and GiB at 8K/32K/128K tokens.
ARTICLE_TABLE = [
    ("llama-3-8b MHA", 524_288, (4.0, 16.0, 64.0)),
    ("llama-3-8b", 131_072, (1.0, 4.0, 16.0)),
    ("llama-3-70b", 327_680, (2.5, 10.0, 40.0)),
    ("qwen3-8b", 147_456, (1.125, 4.5, 18.0)),
    ("mistral-7b", 131_072, (1.0, 4.0, 16.0)),
]


@pytest.mark.parametrize(("slug", "bytes_per_token", "gib"), ARTICLE_TABLE)
def test_article_table_bytes_per_token_and_gib_per_context(slug, bytes_per_token, gib):
    if slug.endswith("MHA"):
        model = model_spec_from_hf_config(LLAMA_3_8B_MHA, name="Llama 3 8B (hypothetical MHA)")
        assert model.attention_kind == "MHA"
    else:
        model = MODELS[slug]
    plan = _plan(model, tensor_parallel_size=1, max_model_len=min(8192, model.max_position_embeddings))
    assert plan.kv_bytes_per_token == bytes_per_token
    assert plan.kv_bytes_per_token_per_gpu == bytes_per_token
    for tokens, expected in zip((8192, 32768, 131072), gib, strict=True):
        assert plan.kv_bytes_per_token * tokens / GIB == pytest.approx(expected)


def test_page_size_is_one_layers_block():
    plan = _plan(MODELS["llama-3-8b"])
    assert plan.page_size_bytes == 16 * 131_072 // 32
    assert plan.num_gpu_blocks == plan.memory_per_gpu.kv_cache_bytes // (plan.page_size_bytes * 32)
    assert plan.kv_capacity_tokens == plan.num_gpu_blocks * 16
    assert plan.usable_blocks == plan.num_gpu_blocks - 1  # block 0 is the null block


@pytest.mark.parametrize("tp", [1, 2, 8, 16])
def test_mla_latent_is_not_split_by_tensor_parallelism(tp):
    model = MODELS["deepseek-v3"]
    assert model.attention_kind == "MLA"
    assert model.head_size == 576
    plan = _plan(model, tensor_parallel_size=tp, kv_cache_memory_gib=10)
    assert plan.kv_bytes_per_token_per_gpu == 70_272
    assert plan.kv_bytes_per_token == 70_272 * tp  # every rank stores the whole latent
    assert plan.block_size == 64
    fp8 = _plan(model, tensor_parallel_size=tp, kv_cache_memory_gib=10, kv_cache_dtype="fp8")
    assert fp8.kv_bytes_per_token_per_gpu == 35_136


def test_tensor_parallel_beyond_kv_heads_replicates_heads():
    plan = _plan(MODELS["llama-3-70b"], tensor_parallel_size=16, gpu_count=16, kv_cache_memory_gib=10)
    assert plan.kv_bytes_per_token_per_gpu == 2 * 1 * 128 * 2 * 80  # one head per rank
    assert plan.kv_bytes_per_token == 16 * 40_960
    assert plan.kv_bytes_per_token > 327_680
    assert any("replicated" in warning for warning in plan.warnings)


def test_tensor_parallel_within_kv_heads_shards_them():
    plan = _plan(MODELS["llama-3-70b"], tensor_parallel_size=8, kv_cache_memory_gib=10)
    assert plan.kv_bytes_per_token_per_gpu == 327_680 // 8
    assert plan.kv_bytes_per_token == 327_680


def test_pipeline_stages_follow_vllm_pp_indices():
    assert [len(stage) for stage in pipeline_stages(80, 3)] == [27, 27, 26]
    assert [len(stage) for stage in pipeline_stages(61, 4)] == [15, 15, 16, 15]  # extras skip the last stage
    plan = _plan(MODELS["llama-3-70b"], tensor_parallel_size=1, pipeline_parallel_size=3, kv_cache_memory_gib=20)
    assert plan.layers_per_gpu == 27
    assert plan.kv_bytes_per_token_per_gpu == 4096 * 27
    assert plan.num_gpu_blocks == 20 * GIB // (16 * 4096 * 27)


def test_fp8_kv_cache_halves_bytes_and_int4_quarters_them():
    model = MODELS["llama-3-8b"]
    assert _plan(model, kv_cache_dtype="fp8").kv_bytes_per_token == 65_536
    plan = _plan(model, kv_cache_dtype="int4")
    assert plan.kv_bytes_per_token == 32_768
    assert any("not supported by every engine" in warning for warning in plan.warnings)


def test_sliding_window_worst_case_follows_vllm_admission_rule():
    model = MODELS["gpt-oss-20b"]  # 12 sliding (window 128) + 12 full layers
    plan = _plan(model, max_model_len=131072, max_num_batched_tokens=8192)
    assert plan.group_size == 12
    sliding, full = plan.kv_groups
    assert (sliding.kind, sliding.window, sliding.num_groups) == ("sliding_window", 128, 1)
    assert plan.in_flight_tokens == 2 * 8192  # async scheduling at pp 1
    assert sliding.worst_case_blocks == math.ceil((128 - 1 + 16384) / 16) + 1 == 1033
    assert full.worst_case_blocks == 131072 // 16
    assert plan.worst_case_blocks_per_request == 8192 + 1033
    assert plan.worst_case_blocks_per_request < 2 * (131072 // 16)  # not full attention on every layer
    assert plan.num_gpu_blocks == plan.memory_per_gpu.kv_cache_bytes // (plan.page_size_bytes * 12)
    assert plan.max_concurrency == pytest.approx(plan.num_gpu_blocks / 9225)


def test_older_engine_admits_sliding_windows_with_one_batch_in_flight():
    plan = _plan(MODELS["gpt-oss-20b"], max_model_len=131072, max_num_batched_tokens=8192, engine_version="0.10")
    assert plan.in_flight_tokens == 8192
    assert plan.kv_groups[0].worst_case_blocks == math.ceil((127 + 8192) / 16) + 1 == 521


def test_pipeline_parallel_in_flight_is_pp_plus_one_batches_on_0_33():
    """vLLM 0.33 (config/vllm.py, max_concurrent_batches): the V2 model runner, its default, keeps async scheduling
    at pp > 1 and runs pp + 1 batches: 3 x 4,096 at pp 2. 0.26-0.32 are planned with pp batches."""
    plan = _plan(MODELS["gpt-oss-20b"], pipeline_parallel_size=2, max_num_batched_tokens=4096, kv_cache_memory_gib=5)
    assert plan.in_flight_tokens == 3 * 4096
    older = _plan(
        MODELS["gpt-oss-20b"],
        pipeline_parallel_size=2,
        max_num_batched_tokens=4096,
        kv_cache_memory_gib=5,
        engine_version="0.32",
    )
    assert older.in_flight_tokens == 2 * 4096


def test_gemma3_hybrid_grouping_uses_the_smaller_layer_count():
    plan = _plan(MODELS["gemma-3-27b"], max_model_len=32768, max_num_batched_tokens=8192)
    assert plan.group_size == 10  # 10 full layers, 52 sliding: 52 >= 1.5 x 10
    sliding, full = plan.kv_groups
    assert (sliding.num_layers, sliding.num_groups) == (52, 6)
    assert (full.num_layers, full.num_groups) == (10, 1)
    per_sliding_group = math.ceil((1024 - 1 + 16384) / 16) + 1
    assert plan.worst_case_blocks_per_request == 6 * per_sliding_group + 32768 // 16
    assert plan.num_gpu_blocks == plan.memory_per_gpu.kv_cache_bytes // (plan.page_size_bytes * 10)


def test_near_equal_layer_counts_group_by_the_larger():
    # Gemma 2 on two stages: 11 sliding + 10 full on the first; 10 < 11 < 12.5, so groups of 11.
    plan = _plan(MODELS["gemma-2-9b"], pipeline_parallel_size=2, kv_cache_memory_gib=5)
    assert plan.group_size == 11


def test_llama4_chunked_local_worst_case():
    plan = _plan(MODELS["llama-4-scout"], tensor_parallel_size=8, max_model_len=65536, max_num_batched_tokens=8192)
    chunked, full = plan.kv_groups
    assert (chunked.kind, chunked.window, chunked.num_layers, chunked.num_groups) == ("chunked_local", 8192, 36, 3)
    assert chunked.worst_case_blocks == 3 * math.ceil((8192 + 16384) / 16)
    assert full.worst_case_blocks == 65536 // 16


def test_max_context_is_capped_by_the_model_and_rounded_down_to_a_power_of_two():
    plan = _plan(MODELS["qwen3-8b"], gpu=GPUS["rtx-4090"], kv_cache_memory_gib=6, context_rounding="pow2")
    first = plan.concurrency_table[0]
    assert first.concurrency == 1
    assert first.kv_limited_context_len == 2730 * 16
    assert first.limited_by == "max_position_embeddings"
    assert first.max_context_len == 32768  # 40,960 rounded down


def test_sliding_only_model_is_limited_by_the_model_not_the_cache():
    plan = _plan(MODELS["phi-3-mini-4k"], gpu=GPUS["l4"])
    assert plan.kv_groups[0].kind == "sliding_window"
    assert plan.concurrency_table[0].limited_by == "max_position_embeddings"


@pytest.mark.parametrize(
    ("slug", "tp"),
    [
        ("llama-3.1-8b", 1),
        ("gemma-3-27b", 1),
        ("qwen3-next-80b-a3b", 2),
        ("llama-4-scout", 8),
        ("deepseek-v4-flash", 8),
    ],
)
def test_each_rows_context_is_the_longest_whose_worst_case_fits(slug, tp):
    """Whatever shortcut finds it (direct solve, bracketed search), a row's KV-limited context is the longest
    length whose worst case, times the concurrency, fits the blocks: checked against request_blocks itself."""
    from planner.sizing.kv_cache import request_blocks

    model = catalog_models()[slug]
    for budget_gib in (6, 40):
        plan = compute_plan(
            PlanInputs(
                model=model, gpu=catalog_gpus()["h200"], tensor_parallel_size=tp, kv_cache_memory_gib=budget_gib
            ),
            advice=False,
        )
        stage, sizes = plan.binding_stage, plan.group_block_sizes
        state_blocks = plan.state_blocks_per_request or 1
        upper = max(model.max_position_embeddings, plan.kv_capacity_tokens)

        def needed(length, stage=stage, sizes=sizes, state_blocks=state_blocks, plan=plan):
            return request_blocks(model, stage, length, plan.block_size, plan.in_flight_tokens, state_blocks, sizes)

        for row in plan.concurrency_table:
            length, c = row.kv_limited_context_len, row.concurrency
            if length == 0:
                assert c * needed(1) > plan.num_gpu_blocks
                continue
            assert c * needed(length) <= plan.num_gpu_blocks
            assert length == upper or c * needed(length + 1) > plan.num_gpu_blocks


def test_the_replication_warning_compares_with_each_head_stored_once():
    """Llama 3.1 8B at tp 16 (8 KV heads): each rank keeps one head, 32 layers x 1 x 128 x 2 x 2 = 16,384 bytes a
    token, 262,144 over the 16 ranks; stored once the 8 heads take 32 x 8 x 128 x 2 x 2 = 131,072."""
    plan = _plan(MODELS["llama-3.1-8b"], tensor_parallel_size=16, gpu_count=16)
    assert any("stores 262,144 bytes per token instead of 131,072" in warning for warning in plan.warnings)
