"""Chart data: every figure is built from the engine's numbers, and the attention variants are right."""

from __future__ import annotations

import dataclasses
import json

import pytest

from planner.charts import (
    allocation_figure,
    attention_variants,
    context_concurrency_figure,
    detail_figures,
    kv_bytes_per_sequence_per_gpu,
    kv_variants_figure,
    memory_figure,
)
from planner.models import GIB
from planner.sizing import PlanInputs, catalog_gpus, catalog_models, compute_plan


def plan_for(model: str = "qwen3-8b", gpu: str = "rtx-4090", **inputs):
    return compute_plan(PlanInputs(model=catalog_models()[model], gpu=catalog_gpus()[gpu], **inputs))


def test_memory_bar_stacks_to_the_gpu_total_with_the_utilisation_line():
    plan = plan_for(max_model_len=16384)
    figure = memory_figure(plan=plan)
    parts = {trace["name"]: trace["x"][0] for trace in figure["data"]}
    assert list(parts) == ["Weights", "Activation peak", "Non-torch", "KV cache", "Free"]
    assert sum(parts.values()) == pytest.approx(plan.memory_per_gpu.total_bytes / GIB, abs=0.01)
    assert parts["KV cache"] == pytest.approx(plan.memory_per_gpu.kv_cache_bytes / GIB, abs=0.001)
    lines = sorted(shape["x0"] for shape in figure["layout"]["shapes"])
    assert lines == pytest.approx(
        sorted([plan.memory_per_gpu.requested_bytes / GIB, plan.memory_per_gpu.total_bytes / GIB]), abs=0.001
    )


def test_context_curve_follows_the_concurrency_table_and_marks_the_sla_point():
    plan = plan_for(max_model_len=32768, concurrency=4)
    figure = context_concurrency_figure(plan=plan)
    curve, _limit, sla = figure["data"]
    at = dict(zip(curve["x"], curve["y"], strict=True))
    assert {row.concurrency: row.max_context_len for row in plan.concurrency_table} == {
        c: at[c] for c in (row.concurrency for row in plan.concurrency_table)
    }
    assert (sla["x"], sla["y"]) == ([4], [32768])
    assert sla["marker"]["symbol"] == "x"  # missed


def test_context_curve_is_the_real_limit_between_table_points_not_a_step():
    # Issue 12, item 3: the step line held the value of 4 sequences up to 8. The article's case: 6 GiB of KV,
    # 147,456 B per token -> 2,730 blocks of 16; 6 sequences get 2,730 // 6 = 455 blocks = 7,280 tokens.
    plan = plan_for(kv_cache_memory_gib=6, max_model_len=32768)
    curve, limit, _sla = context_concurrency_figure(plan=plan)["data"]
    at = dict(zip(curve["x"], curve["y"], strict=True))
    assert at[6] == 7_280
    assert at[3] == 910 * 16  # 2,730 // 3 = 910 blocks: 14,560 tokens
    assert at[1] == 32_768  # one request: capped at max_model_len (the cache would hold 43,680)
    assert dict(zip(limit["x"], limit["y"], strict=True))[1] == 43_680
    assert "shape" not in curve["line"]  # a line through the points, not a step holding the higher value
    assert all(a > b or a == b == 32_768 for a, b in zip(curve["y"], curve["y"][1:], strict=False))


def test_kv_variants_reproduce_the_seed_article_per_token_sizes():
    plan = plan_for(max_model_len=16384)
    figure = kv_variants_figure(plan=plan)
    at_1k = {trace["name"]: trace["y"][0] * GIB / 1024 for trace in figure["data"] if trace["x"][0] == 1024}
    # Qwen3 8B: 36 layers × 8 KV heads × 128 × 2 (K and V) × 2 bytes = 147,456 B per token (bf16).
    assert at_1k["GQA (8 KV heads) (own), bf16"] == pytest.approx(147_456, rel=1e-3)
    assert at_1k["GQA (8 KV heads) (own), fp8"] == pytest.approx(73_728, rel=1e-3)
    assert at_1k["GQA (8 KV heads) (own), int4"] == pytest.approx(36_864, rel=1e-3)
    assert at_1k["MHA, bf16"] == pytest.approx(4 * 147_456, rel=1e-3)  # 32 KV heads
    assert at_1k["MLA (512+64), bf16"] == pytest.approx(36 * 576 * 2, rel=1e-3)  # one latent, no K/V factor
    budget = figure["data"][-1]
    assert budget["y"] == [pytest.approx(plan.kv_budget_bytes_per_gpu / GIB, abs=0.001)] * 2
    assert len(figure["data"]) == 3 * 3 + 1


def test_kv_per_sequence_counts_whole_blocks_and_tensor_parallel_shards():
    plan = plan_for(max_model_len=16384)
    model = plan.inputs.model
    one_token = kv_bytes_per_sequence_per_gpu(model=model, plan=plan, kv_cache_dtype="bfloat16", context_tokens=1)
    assert one_token == 16 * 147_456  # a whole block of 16 tokens
    tp2 = plan_for(max_model_len=16384, tensor_parallel_size=2, gpu_count=2)
    half = kv_bytes_per_sequence_per_gpu(model=model, plan=tp2, kv_cache_dtype="bfloat16", context_tokens=1024)
    assert half == 1024 * 147_456 // 2


def test_sliding_window_layers_stop_growing_past_their_window():
    plan = plan_for("gemma-2-9b", "h100-sxm", max_model_len=8192)
    model = plan.inputs.model
    assert model.is_hybrid
    short = kv_bytes_per_sequence_per_gpu(model=model, plan=plan, kv_cache_dtype="bfloat16", context_tokens=4096)
    long = kv_bytes_per_sequence_per_gpu(model=model, plan=plan, kv_cache_dtype="bfloat16", context_tokens=8192)
    assert short < long < 2 * short


def test_variants_of_an_mla_model_and_an_mqa_model():
    deepseek = catalog_models()["deepseek-v3"]
    labels = [label for label, _spec in attention_variants(deepseek)]
    assert labels == ["MHA", "GQA (8 KV heads)", "MLA (512+64) (own)"]
    mla = dict(attention_variants(deepseek))["MLA (512+64) (own)"]
    assert (mla.num_kv_heads, mla.head_size) == (1, 576)
    mqa = dataclasses.replace(catalog_models()["qwen3-8b"], attention_kind="MQA", num_kv_heads=1)
    variants = dict(attention_variants(mqa))
    assert list(variants) == ["MHA", "GQA (8 KV heads)", "MQA (own)", "MLA (512+64)"]
    assert variants["MHA"].num_kv_heads == 32


def test_counterparts_of_models_with_per_group_shapes_take_one_shape_on_every_layer():
    """MiMo-V2-Flash (sliding layers with 8 KV heads, V heads 128 wide): its own kind keeps every group's shape,
    222,720 bytes a token at tp 1 (test_sizing_mimo_v2.py); its MHA counterpart caches 64 heads x 192 for K and V
    on all 48 layers, 48 x 2 x 64 x 192 x 2 = 2,359,296, not the groups' own heads."""
    from planner.sizing.figures import kv_bytes_per_token

    mimo = catalog_models()["mimo-v2-flash"]
    variants = dict(attention_variants(mimo))
    assert variants["GQA (4 KV heads) (own)"] is mimo
    assert kv_bytes_per_token(variants["GQA (4 KV heads) (own)"]) == 222_720
    assert kv_bytes_per_token(variants["MHA"]) == 2_359_296
    assert all(group.num_kv_heads is None and group.head_size_v is None for group in variants["MHA"].layer_groups)


def test_variants_of_deepseek_v4_compare_its_compressed_caches_with_plain_kv():
    v4 = catalog_models()["deepseek-v4-flash"]
    variants = dict(attention_variants(v4))
    assert list(variants) == ["MHA", "GQA (8 KV heads)", "MLA (512+64)", "Compressed (DeepSeek-V4, fp8_ds_mla) (own)"]
    assert variants["MLA (512+64)"].compressed_attention is None
    assert variants["Compressed (DeepSeek-V4, fp8_ds_mla) (own)"] is v4


def test_allocation_bars_are_the_plans_naive_and_paged_counts():
    plan = plan_for(max_model_len=40960)
    figure = allocation_figure(plan=plan)
    assert figure["data"][0]["y"] == [plan.allocation.naive_sequences, plan.allocation.paged_sequences]


@pytest.mark.parametrize(
    "model", ["qwen3-8b", "deepseek-v2-lite", "gemma-3-27b", "gpt-oss-20b", "llama-4-scout", "deepseek-v4-flash"]
)
def test_every_detail_figure_is_json_for_plotly(model):
    plan = plan_for(model, "h200")
    figures = detail_figures(plan=plan)
    text = json.dumps(figures)
    assert "NaN" not in text and "Infinity" not in text
    assert all(figure["data"] and figure["layout"]["title"]["text"] for figure in figures.values())


def test_a_model_name_reaches_the_chart_title_as_text():
    model = dataclasses.replace(catalog_models()["qwen3-8b"], name="<b>bold</b> & <a href='x'>link</a>")
    plan = compute_plan(PlanInputs(model=model, gpu=catalog_gpus()["rtx-4090"]))
    title = kv_variants_figure(plan=plan)["layout"]["title"]["text"]
    assert title == (
        "KV cache per sequence: &lt;b&gt;bold&lt;/b&gt; &amp; &lt;a href=&#x27;x&#x27;&gt;link&lt;/a&gt; "
        "and its attention variants"
    )
