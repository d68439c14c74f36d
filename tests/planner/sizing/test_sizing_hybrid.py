"""Hybrid (attention + Mamba / gated delta net) models, DeepSeek V3.2's indexer, and configs as they are.

Every expected figure is derived by hand from vLLM 0.33.0's source (paths in the comments, and in
planner/sizing/state_cache.py); the configs are the models' real config.json files
(tests/planner/sizing/data/hf_configs/SOURCES.md). 40 GiB of KV memory per GPU (--kv-cache-memory-bytes)
keeps the figures independent of the memory estimates: 40 GiB = 42,949,672,960 bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.sizing import (
    PlanInputs,
    SizingInputError,
    catalog_gpus,
    catalog_models,
    compute_plan,
    custom_gpu,
    model_spec_from_hf_config,
)
from planner.sizing.advice import valid_tensor_parallel

CONFIGS = Path(__file__).parent / "data" / "hf_configs"
KV_40_GIB = 42_949_672_960


def config(name: str) -> dict:
    with (CONFIGS / f"{name}.json").open(encoding="utf-8") as handle:
        return json.load(handle)


def plan_for(name: str, *, gpu: str = "h100-sxm", **kwargs):
    model = model_spec_from_hf_config(config(name), hf_id=name.replace("--", "/"))
    inputs = PlanInputs(model=model, gpu=catalog_gpus()[gpu], kv_cache_memory_gib=40, **kwargs)
    return compute_plan(inputs, advice=False)


QWEN3_NEXT = "Qwen--Qwen3-Next-80B-A3B-Thinking"
QWEN35_27B = "Qwen--Qwen3.5-27B"
QWEN35_35B = "Qwen--Qwen3.5-35B-A3B"
NEMOTRON_NANO = "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"
NEMOTRON_SUPER = "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8"
NEMOTRON_H_56B = "nvidia--Nemotron-H-56B-Base-8K"
DEEPSEEK_V32 = "deepseek-ai--DeepSeek-V3.2"


def test_qwen3_next_reads_gated_delta_net_layers_from_full_attention_interval():
    model = model_spec_from_hf_config(config(QWEN3_NEXT))
    # full_attention_interval 4 over 48 layers: layers 3, 7, ..., 47 full (12), the other 36 GDN.
    assert {group.kind: group.num_layers for group in model.layer_groups} == {"state": 36, "full": 12}
    assert model.layer_pattern[:4] == (0, 0, 0, 1)
    assert model.state is not None and model.state.kind == "gdn"


def test_qwen3_next_tp2_prefix_caching_on_h100():
    """Qwen3-Next-80B-A3B at tp 2, vLLM 0.33 defaults (prefix caching on for hybrids: align mode).

    Attention per token per layer per rank: 2 KV heads / tp 2 = 1 head x 256 x (K, V) x 2 bytes = 1,024.
    GDN state per rank: conv (kernel 4 - 1, (2 x 16 x 128 + 32 x 128) / 2 = 4,096) bf16 = 24,576 B;
    recurrent (32 / 2 = 16, 128, 128) bf16 (no mamba_ssm_dtype: auto = model dtype) = 524,288 B;
    page 548,864 B. H100: FlashInfer GDN prefill -> checkpoint grid 64, so k = lcm(16, 64) = 64 and
    block = 64 x cdiv(548,864, 64 x 1,024) = 64 x 9 = 576 (_align_hybrid_block_size).
    Groups: 12 full, 36 GDN; 36 >= 1.5 x 12 so group size 12: 1 attention group, 3 state groups;
    bytes per block 12 x 576 x 1,024 = 7,077,888; blocks = 42,949,672,960 // 7,077,888 = 6,068.
    Per request at 262,144 tokens: cdiv(262,144, 576) = 456 + 3 groups x (2 + 0 spec + 1 checkpoint) = 465.
    Concurrency 6,068 / 465 = 13.0495; reported tokens int(13.0495 x 262,144) = 3,420,838.
    """
    plan = plan_for(QWEN3_NEXT, tensor_parallel_size=2)
    assert plan.block_size == 576
    assert plan.state_page_bytes == 548_864
    assert plan.group_size == 12
    assert plan.num_gpu_blocks == 6_068
    assert plan.worst_case_blocks_per_request == 465
    assert plan.state_blocks_per_request == 3
    assert plan.max_concurrency == pytest.approx(6_068 / 465)
    assert plan.reported_kv_cache_tokens == 3_420_838
    # Physical: blocks x block size, which 0.33 no longer prints for multi-group models.
    assert plan.kv_capacity_tokens == 6_068 * 576
    assert plan.inputs.enable_prefix_caching is True
    # The command asks for the default block and lets vLLM grow it (older releases refuse a --block-size 576).
    assert "--block-size 16 " in plan.vllm_command
    # Only the 12 attention layers hold per-token KV: 1,024 x 12 = 12,288 bytes per token per GPU.
    assert plan.kv_bytes_per_token_per_gpu == 12_288


def test_qwen3_next_prefix_caching_off():
    """Prefix caching off: mamba_cache_mode none, no checkpoint grid: k = 16, block = 16 x cdiv(548,864,
    16 x 1,024) = 16 x 34 = 544; bytes per block 12 x 544 x 1,024 = 6,684,672; blocks 42,949,672,960 //
    6,684,672 = 6,425; per request cdiv(262,144, 544) = 482 + 3 x 1 = 485; tokens int(6,425 x 262,144 /
    485) = 3,472,732."""
    plan = plan_for(QWEN3_NEXT, tensor_parallel_size=2, enable_prefix_caching=False)
    assert (plan.block_size, plan.num_gpu_blocks, plan.worst_case_blocks_per_request) == (544, 6_425, 485)
    assert plan.reported_kv_cache_tokens == 3_472_732
    assert "--no-enable-prefix-caching" in plan.vllm_command


def test_gdn_on_a100_has_no_checkpoint_block():
    """A100: Triton GDN prefill (no FlashInfer), so align mode has no checkpoint block or 64-token grid:
    block 544 as with caching off, state blocks 2 per request: 482 + 3 x 2 = 488."""
    plan = plan_for(QWEN3_NEXT, gpu="a100-80gb", tensor_parallel_size=2)
    assert plan.block_size == 544
    assert plan.state_blocks_per_request == 2
    assert plan.worst_case_blocks_per_request == 488


def test_engine_0_19_reports_blocks_over_groups_with_prefix_caching_off():
    """vLLM 0.19: hybrid prefix caching off by default (on from 0.28), and the log's token figure was
    num_blocks // groups x block size: 6,425 // 4 x 544 = 1,606 x 544 = 873,664."""
    plan = plan_for(QWEN3_NEXT, tensor_parallel_size=2, engine_version="0.19")
    assert plan.inputs.enable_prefix_caching is False
    assert plan.num_gpu_blocks == 6_425
    assert plan.reported_kv_cache_tokens == 873_664


def test_nemotron_3_nano_mamba2_state():
    """Nemotron 3 Nano 30B-A3B at tp 1 (hybrid_override_pattern: 23 M, 6 *, 23 E).

    Attention: 2 KV heads x 128 x 2 x 2 bytes = 1,024 B per token per layer.
    Mamba2 state: conv (3, 64 x 64 + 2 x 8 x 128 = 6,144) bf16 = 36,864 B; ssm (64, 64, 128) float32
    (mamba_ssm_cache_dtype) = 2,097,152 B; page 2,134,016. Mamba2's checkpoint alignment is 1, so
    k = 16 and block = 16 x cdiv(2,134,016, 16,384) = 16 x 131 = 2,096.
    Group size 6 (23 >= 9): 1 attention group, cdiv(23, 6) = 4 state groups; bytes per block
    6 x 2,096 x 1,024 = 12,877,824; blocks 42,949,672,960 // 12,877,824 = 3,335.
    Per request: cdiv(262,144, 2,096) = 126 + 4 x (2 + 1 checkpoint) = 138; tokens int(3,335 x 262,144
    / 138) = 6,335,146 (the issue's ~6.3M; counting Mamba layers as attention gave ~0.8M).
    """
    plan = plan_for(NEMOTRON_NANO)
    assert plan.block_size == 2_096
    assert plan.state_page_bytes == 2_134_016
    assert plan.num_gpu_blocks == 3_335
    assert plan.worst_case_blocks_per_request == 138
    assert plan.reported_kv_cache_tokens == 6_335_146
    kinds = {group.kind: (group.num_layers, group.num_groups) for group in plan.kv_groups}
    assert kinds == {"state": (23, 4), "full": (6, 1)}


def test_nemotron_h_56b_at_tp4_splits_groups_and_heads():
    """Nemotron-H 56B at tp 4, max_model_len 8,192: Mamba2 256 heads x 64 = 16,384 channels, 8 groups,
    state 256. Per rank: conv (3, (16,384 + 2 x 8 x 256) / 4 = 5,120) bf16 = 30,720 B; ssm (256 / 4 = 64,
    64, 256) float32 = 4,194,304 B; page 4,225,024. Attention: 8 KV heads / 4 = 2 x 128 x 2 x 2 = 1,024 B.
    block = 16 x cdiv(4,225,024, 16,384) = 16 x 258 = 4,128. Layers: 10 attention, 54 Mamba: group 10,
    cdiv(54, 10) = 6 state groups; bytes per block 10 x 4,128 x 1,024 = 42,270,720; blocks
    42,949,672,960 // 42,270,720 = 1,016. Per request: cdiv(8,192, 4,128) = 2 + 6 x 3 = 20."""
    plan = plan_for(NEMOTRON_H_56B, tensor_parallel_size=4)
    assert plan.state_page_bytes == 4_225_024
    assert plan.block_size == 4_128
    assert plan.num_gpu_blocks == 1_016
    assert plan.worst_case_blocks_per_request == 20


def test_qwen35_mtp_speculative_tokens_add_state_blocks_and_an_attention_layer():
    """Qwen3.5-27B, tp 1, one MTP speculative token. Attention: 4 KV heads x 256 x 2 x 2 = 4,096 B.
    GDN state with 1 speculative token: conv (3 + 1, 2 x 16 x 128 + 48 x 128 = 10,240) bf16 = 81,920 B;
    ssm (48, 128, 128) float32 (mamba_ssm_dtype) = 3,145,728 B; page 3,227,648.
    block = 64 x cdiv(3,227,648, 64 x 4,096) = 64 x 13 = 832.
    Layers: 16 full + 1 MTP draft layer = 17, 48 GDN: group 17, cdiv(48, 17) = 3 state groups; bytes per
    block 17 x 832 x 4,096 = 57,933,824; blocks 42,949,672,960 // 57,933,824 = 741.
    Per request: cdiv(262,144, 832) = 316 + 3 x (2 + 1 speculative + 1 checkpoint) = 328;
    tokens int(741 x 262,144 / 328) = 592,221."""
    plan = plan_for(QWEN35_27B, num_speculative_tokens=1)
    assert plan.state_page_bytes == 3_227_648
    assert plan.block_size == 832
    assert plan.group_size == 17
    assert plan.num_gpu_blocks == 741
    assert plan.state_blocks_per_request == 4
    assert plan.worst_case_blocks_per_request == 328
    assert plan.reported_kv_cache_tokens == 592_221
    assert '"num_speculative_tokens": 1' in plan.vllm_command


def test_deepseek_v32_indexer_and_fp8_ds_mla():
    """DeepSeek V3.2 at tp 8: per token per layer the 576-wide latent (bf16: 1,152 B) plus the indexer key
    (128 fp8 + 128 / 128 x 4 scale bytes = 132); block 64; 61 layers in one group.
    bf16: 61 x 64 x 1,284 = 5,012,736 B per block -> 42,949,672,960 // 5,012,736 = 8,568 blocks.
    fp8 (fp8_ds_mla, 656 B): 61 x 64 x (656 + 132) = 3,076,352 -> 13,961 blocks.
    Without the indexer (DeepSeek V3, 1,152 B): 4,497,408 -> 9,549 blocks."""
    bf16 = plan_for(DEEPSEEK_V32, tensor_parallel_size=8)
    fp8 = plan_for(DEEPSEEK_V32, tensor_parallel_size=8, kv_cache_dtype="fp8")
    assert bf16.num_gpu_blocks == 8_568
    assert fp8.num_gpu_blocks == 13_961
    assert bf16.kv_bytes_per_token_per_gpu == 61 * 1_284
    assert fp8.kv_bytes_per_token_per_gpu == 61 * 788
    v3 = compute_plan(
        PlanInputs(
            model=catalog_models()["deepseek-v3"],
            gpu=catalog_gpus()["h100-sxm"],
            tensor_parallel_size=8,
            kv_cache_memory_gib=40,
        ),
        advice=False,
    )
    assert v3.num_gpu_blocks == 9_549


GEMMA4 = "google--gemma-4-26B-A4B"


def test_gemma4_full_layers_use_global_head_dim_and_page_unification():
    """Gemma 4 26B-A4B at tp 1 (vLLM 0.33 gemma4.py: full layers with global_head_dim 512 and
    num_global_key_value_heads 2; sliding layers head_dim 256, 8 KV heads, window 1024).
    Sliding: 2 x 8 x 256 x 2 = 8,192 B per token per layer; full: 2 x 2 x 512 x 2 = 4,096.
    unify_kv_cache_spec_page_size: the full layers' page (4,096 x 16) divides the largest (8,192 x 16), so
    their block grows to 32 tokens. 25 sliding, 5 full: group size 5, 5 sliding groups + 1 full;
    bytes per block 5 x 8,192 x 16 = 655,360 -> 42,949,672,960 // 655,360 = 65,536 blocks.
    Per request of 262,144 tokens: full cdiv(262,144, 32) = 8,192; sliding (in flight 2 x 8,192 on an H100):
    cdiv(min(1,023 + 16,384, 262,144), 16) + 1 = 1,089, x 5 = 5,445; total 13,637.
    Reported tokens int(65,536 x 262,144 / 13,637) = 1,259,798. KV per token 25 x 8,192 + 5 x 4,096 = 225,280."""
    plan = plan_for(GEMMA4)
    assert plan.block_size == 16
    assert plan.num_gpu_blocks == 65_536
    assert plan.worst_case_blocks_per_request == 13_637
    assert plan.reported_kv_cache_tokens == 1_259_798
    assert plan.kv_bytes_per_token_per_gpu == 225_280


def test_gemma4_at_tp8_grows_the_sliding_block_instead():
    """tp 8: sliding 8 / 8 = 1 head x 256 x 2 x 2 = 1,024 B; full max(1, 2 // 8) = 1 replicated head x 512 x
    2 x 2 = 2,048 B, now the larger page: sliding blocks grow to 32. Bytes per block 5 x 2,048 x 16 = 163,840
    -> 262,144 blocks. Per request: full cdiv(262,144, 16) = 16,384; sliding (cdiv(17,407, 32) = 544) + 1 =
    545, x 5 = 2,725; total 19,109; reported int(262,144 x 262,144 / 19,109) = 3,596,183."""
    plan = plan_for(GEMMA4, tensor_parallel_size=8)
    assert plan.num_gpu_blocks == 262_144
    assert plan.worst_case_blocks_per_request == 19_109
    assert plan.reported_kv_cache_tokens == 3_596_183


def test_infinity_in_a_real_config_is_accepted():
    """Nemotron 3 Super's time_step_limit is [0.0, Infinity] (a JSON extension Python reads)."""
    raw = (CONFIGS / f"{NEMOTRON_SUPER}.json").read_text(encoding="utf-8")
    assert "Infinity" in raw
    model = model_spec_from_hf_config(json.loads(raw))
    # 88 layers: 40 M, 8 *, 40 E; MTP pattern "*E" gives one draft attention layer.
    assert {group.kind: group.num_layers for group in model.layer_groups} == {"state": 40, "none": 40, "full": 8}
    assert model.num_mtp_layers == 1


def _lightning(cfg: dict) -> dict:
    """MiniMax-Text-01 / M1's layout: 0 marks a lightning (linear) attention layer (vLLM dropped these in 0.23)."""
    return {**cfg, "attn_type_list": [0 if i % 8 else 1 for i in range(len(cfg["attn_type_list"]))]}


@pytest.mark.parametrize(
    ("name", "change", "field"),
    [
        ("MiniMaxAI--MiniMax-M2.7", _lightning, "attn_type_list"),
        ("deepseek-ai--DeepSeek-V4-Flash", lambda cfg: {**cfg, "model_type": "deepseek_v41"}, "model_type"),
    ],
)
def test_unsupported_architectures_name_the_field(name, change, field):
    """Every test config of tests/planner/sizing/data/hf_configs now plans; these variants still would not be
    vLLM 0.33's answer, so they are refused by name."""
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(change(config(name)), num_params=10**10)
    assert field in error.value.errors


def test_state_signals_without_a_layout_are_refused_not_sized_as_attention():
    cfg = config(NEMOTRON_NANO)
    del cfg["hybrid_override_pattern"]
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(cfg)
    assert "ssm_state_size" in error.value.errors or "mamba_num_heads" in error.value.errors


def test_unknown_layer_type_names_the_value():
    cfg = config(QWEN35_27B)
    cfg["text_config"]["layer_types"][0] = "indexed_attention"
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(cfg)
    assert "indexed_attention" in error.value.errors["layer_types"]


@pytest.mark.parametrize("name", sorted(path.stem for path in CONFIGS.glob("*.json") if "hf_quant" not in path.stem))
def test_every_test_config_plans_or_names_what_is_unsupported(name):
    """A plan, or a SizingInputError naming a field; never a plan that counts state layers as attention."""
    try:
        model = model_spec_from_hf_config(config(name))
    except SizingInputError as error:
        assert error.errors and all(isinstance(message, str) and message for message in error.errors.values())
        return
    tp = 8 if model.num_params > 200e9 else 4 if model.num_params > 60e9 else 1
    plan = compute_plan(
        PlanInputs(model=model, gpu=catalog_gpus()["h200"], tensor_parallel_size=tp, kv_cache_memory_gib=40),
        advice=False,
    )
    raw = config(name)
    fields = {**raw, **raw.get("text_config", {})}
    state_keys = ("linear_num_value_heads", "hybrid_override_pattern", "mamba_num_heads", "linear_attn_config")
    if any(key in fields for key in state_keys):
        assert model.num_state_layers > 0
        assert any(group.kind == "state" for group in plan.kv_groups)
        assert plan.state_blocks_per_request > 0
        assert plan.kv_bytes_per_token_per_gpu < plan.state_page_bytes  # per token: attention layers only
    else:
        assert model.num_state_layers == 0


@pytest.mark.parametrize("slug", sorted(catalog_models()))
def test_every_catalog_model_plans_without_state_counted_as_attention(slug):
    model = catalog_models()[slug]
    tp = next(tp for tp in (8, 4, 2, 1) if valid_tensor_parallel(model, tp))
    plan = compute_plan(
        PlanInputs(model=model, gpu=catalog_gpus()["h200"], gpu_count=8, tensor_parallel_size=tp), advice=False
    )
    assert plan.num_gpu_blocks > 0
    if model.compressed_attention is not None:
        # DeepSeek-V4: the groups hold caches, several per decoder layer (test_sizing_compressed_attention.py).
        assert {group.kind for group in plan.kv_groups} == {"full", "sliding_window"}
        return
    assert sum(group.num_layers for group in plan.kv_groups if group.kind != "state") == model.num_attention_layers


# --- public vLLM start-up logs --------------------------------------------------------------------------


def test_vllm_0_22_log_qwen36_27b_with_mtp_on_two_rtx_3090s():
    """noonghunna/club-3090 issue #487 (vLLM 0.22.0, 2 x RTX 3090, Qwen3.6-27B AutoRound INT4, tp 2, --kv-cache-dtype
    fp8_e5m2, --enable-prefix-caching, MTP with num_speculative_tokens 3, max_model_len 262,144): "Available KV cache
    memory: 10.85 GiB", "GPU KV cache size: 612,157 tokens", "Maximum concurrency for 262,144 tokens per request:
    2.34x"; its sibling logs print "Add 3 padding layers, may waste at most 6.25% KV cache memory". Qwen3.6-27B has
    Qwen3.5-27B's layout (Qwen3_5ForConditionalGeneration), whose config is used here.
    By vLLM's rules: attention 4 KV heads / 2 x 256 x 2 x 1 byte = 1,024 B a token a layer; the MTP draft adds a 17th
    full layer. GDN state per rank with 3 speculative tokens: conv (3 + 3, (2 x 16 x 128 + 48 x 128) / 2 = 5,120)
    fp16 = 61,440 B + recurrent (24, 128, 128) float32 (mamba_ssm_dtype) = 1,572,864 B: 1,634,304. No checkpoint
    block before 0.33: block 16 x cdiv(1,634,304, 16 x 1,024) = 16 x 100 = 1,600. 17 full, 48 GDN: group size 17
    (48 >= 1.5 x 17), cdiv(48, 17) = 3 GDN groups, 51 - 48 = 3 padding layers (6.25%); bytes per block 17 x 1,600 x
    1,024 = 27,852,800; 10.85 GiB = 11,650,098,790 bytes -> 418 blocks. Per request: cdiv(262,144, 1,600) = 164 + 3
    groups x (2 + 3 speculative) = 179: 418 / 179 = 2.335x and int(418 x 262,144 / 179) = 612,157 tokens, as
    logged."""
    model = model_spec_from_hf_config(config(QWEN35_27B))
    plan = compute_plan(
        PlanInputs(
            model=model,
            gpu=custom_gpu(memory_gib=24, name="RTX 3090"),
            tensor_parallel_size=2,
            gpu_count=2,
            weight_dtype="float16",
            kv_cache_memory_gib=10.85,
            kv_cache_dtype="fp8_e5m2",
            enable_prefix_caching=True,
            max_model_len=262_144,
            num_speculative_tokens=3,
            engine_version="0.22",
        ),
        advice=False,
    )
    assert plan.block_size == 1_600
    assert plan.state_page_bytes == 1_634_304
    assert plan.group_size == 17
    assert [(group.kind, group.num_layers, group.num_groups) for group in plan.kv_groups] == [
        ("state", 48, 3),
        ("full", 17, 1),
    ]
    assert plan.num_gpu_blocks == 418
    assert plan.worst_case_blocks_per_request == 179
    assert round(plan.max_concurrency, 2) == 2.34
    assert plan.reported_kv_cache_tokens == 612_157


def test_vllm_0_24_log_qwen36_35b_a3b_nvfp4_on_an_rtx_5090():
    """noonghunna/club-3090 issue #612 (vLLM v0.24.0, RTX 5090, Qwen3.6-35B-A3B NVFP4, --kv-cache-dtype fp8,
    --enable-prefix-caching, max_model_len 131,072, max_num_seqs 1): "Available KV cache memory: 5.98 GiB",
    "GPU KV cache size: 567,978 tokens", "Maximum concurrency for 131,072 tokens per request: 4.33x".
    By vLLM's rules: attention 2 KV heads x 256 x 2 x 1 byte (fp8) = 1,024 B per token per layer; GDN state
    conv (3, 8,192) in the model dtype (bf16) = 49,152 B + recurrent (32, 128, 128) float32 = 2,097,152 B:
    2,146,304. Align mode without 0.33's checkpoint grid: block 16 x cdiv(2,146,304, 16,384) = 2,096.
    10 full, 30 GDN: group 10; bytes per block 10 x 2,096 x 1,024 = 21,463,040; 5.98 GiB -> 299 blocks.
    Per request cdiv(131,072, 2,096) = 63 + 3 groups x 2 state blocks = 69: 299 / 69 = 4.33x and
    int(299 x 131,072 / 69) = 567,978 tokens, as logged."""
    model = model_spec_from_hf_config(config("nvidia--Qwen3.6-35B-A3B-NVFP4"))
    plan = compute_plan(
        PlanInputs(
            model=model,
            gpu=custom_gpu(memory_gib=31.36, name="RTX 5090"),
            kv_cache_memory_gib=5.98,
            kv_cache_dtype="fp8",
            enable_prefix_caching=True,
            max_model_len=131_072,
            max_num_seqs=1,
            max_num_batched_tokens=8192,
            engine_version="0.24",
        ),
        advice=False,
    )
    assert plan.block_size == 2_096
    assert plan.num_gpu_blocks == 299
    assert round(plan.reported_max_concurrency, 2) == 4.33
    assert plan.reported_kv_cache_tokens == 567_978


def test_vllm_0_19_log_qwen35_27b_reports_blocks_over_groups():
    """vLLM issue #40691 (v0.19.0, H20, Qwen3.5-27B, --max-model-len 32768, --max-num-batched-tokens 16384):
    "GPU KV cache size: 290,864 tokens", "Maximum concurrency for 32,768 tokens per request: 33.04x".
    0.19: prefix caching off for hybrids, so block = 16 x cdiv(3,207,168, 16 x 4,096) = 16 x 49 = 784
    (state page: conv (3, 10,240) bf16 61,440 + recurrent (48, 128, 128) float32 3,145,728); 4 groups
    (16 full, 48 GDN in 3). Per request cdiv(32,768, 784) = 42 + 3 x 1 = 45. The two logged figures pin
    num_blocks: 1,487 // 4 x 784 = 290,864 and 1,487 / 45 = 33.04. 1,487 blocks x 16 x 784 x 4,096 bytes
    = 76,402,393,088 bytes (71.156 GiB) of KV memory, which the log does not print; 71.16 GiB gives them."""
    model = model_spec_from_hf_config(config(QWEN35_27B))
    plan = compute_plan(
        PlanInputs(
            model=model,
            gpu=custom_gpu(memory_gib=95.0, name="H20"),
            kv_cache_memory_gib=71.16,
            max_model_len=32_768,
            max_num_seqs=16,
            max_num_batched_tokens=16_384,
            engine_version="0.19",
        ),
        advice=False,
    )
    assert plan.block_size == 784
    assert plan.num_gpu_blocks == 1_487
    assert plan.reported_kv_cache_tokens == 290_864
    assert round(plan.reported_max_concurrency, 2) == 33.04


@pytest.mark.parametrize(
    "slug", ["gemma-3-27b", "gpt-oss-120b", "llama-4-scout", "gemma-4-26b-a4b", "qwen3-next-80b-a3b", "llama-3.1-8b"]
)
def test_concurrency_table_equals_vllms_binary_search(slug):
    """The table solves the longest context directly where windows and states have saturated; it must give
    what vLLM's estimate_max_model_len (a binary search over lengths) gives."""
    from planner.sizing.kv_cache import max_length_for_blocks, pipeline_stages, stage_groups

    model = catalog_models()[slug]
    for batched in (512, 8192):
        plan = compute_plan(
            PlanInputs(
                model=model,
                gpu=catalog_gpus()["h200"],
                # Gemma 4 at tp 1: its full layers' blocks are twice the sliding ones (see above).
                tensor_parallel_size=1 if slug == "gemma-4-26b-a4b" else 2,
                max_model_len=32768,
                max_num_batched_tokens=batched,
            ),
            advice=False,
        )
        stage = stage_groups(plan.inputs.model, pipeline_stages(model.num_layers, 1)[0])
        upper = max(model.max_position_embeddings, plan.kv_capacity_tokens)
        sizes = tuple(
            plan.block_size * 2 if group.kind == "full" and group.head_size else plan.block_size
            for group in model.layer_groups
        )
        for row in plan.concurrency_table:
            expected = max_length_for_blocks(
                model,
                stage,
                plan.num_gpu_blocks,
                row.concurrency,
                plan.block_size,
                plan.in_flight_tokens,
                upper,
                plan.state_blocks_per_request or 1,
                sizes if slug == "gemma-4-26b-a4b" else (),
            )
            assert row.kv_limited_context_len == expected


def test_nemotron_3_ultra_lists_its_layers_without_a_count():
    """Nemotron 3 Ultra's config gives layers_block_type (108 entries) and no num_hidden_layers: 48 Mamba,
    12 attention, 48 MoE layers; 550B total (model name), its time_step_limit holds 1e308."""
    model = model_spec_from_hf_config(config("nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16"))
    assert model.num_layers == 108
    assert {g.kind: g.num_layers for g in model.layer_groups} == {"state": 48, "none": 48, "full": 12}
    assert model.num_params / 1e9 == pytest.approx(550, rel=0.015)


def test_minimax_m2_is_all_softmax_attention():
    """MiniMax-M2.7's attn_type_list is 62 x 1 (softmax attention; 0 would be lightning attention)."""
    model = model_spec_from_hf_config(config("MiniMaxAI--MiniMax-M2.7"))
    assert [(g.kind, g.num_layers) for g in model.layer_groups] == [("full", 62)]
    cfg = config("MiniMaxAI--MiniMax-M2.7")
    cfg["attn_type_list"][0] = 0
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(cfg)
    assert "attn_type_list" in error.value.errors


def test_modelopt_config_without_quant_method_is_fp8():
    model = model_spec_from_hf_config(config("Qwen--Qwen3-32B-FP8-Static-PerTensor"))
    assert model.quantization == "fp8"


def test_glm5_deepseek_sparse_attention_layers_carry_the_indexer():
    """GLM-5.2 (glm_moe_dsa, vLLM's deepseek_v32 module): layer_types deepseek_sparse_attention are MLA layers
    with an indexer key of index_head_dim 128 + 128 / 128 x 4 = 132 bytes per token."""
    model = model_spec_from_hf_config(config("nvidia--GLM-5.2-NVFP4"))
    assert (model.attention_kind, model.num_layers, model.indexer_bytes_per_token) == ("MLA", 78, 132)


def test_gemma4_kv_shared_layers_hold_no_cache():
    """num_kv_shared_layers: the last N layers read earlier layers' KV (gemma4.py is_kv_shared_layer). With
    6 shared of 30 (layers 24-29: five sliding, one full) 20 sliding and 4 full layers keep a cache."""
    cfg = config(GEMMA4)
    cfg["text_config"]["num_kv_shared_layers"] = 6
    model = model_spec_from_hf_config(cfg)
    counts = {g.kind: g.num_layers for g in model.layer_groups}
    assert counts == {"sliding_window": 20, "full": 4, "none": 6}


def test_mtp_drafter_weights_come_off_the_kv_budget():
    """Qwen3.5-27B (catalog: 27,354,000,000 parameters, bf16, 64 layers, 1 MTP layer, untied 248,320 x 5,120
    embeddings) at tp 2 with one speculative token: vLLM loads the drafter before profiling, sharing the target's
    embeddings and LM head. The drafter's layer at the mean decoder layer's weights: (2 x 27,354,000,000 - 2 x 2 x
    248,320 x 5,120) / 64 = (54,708,000,000 - 5,085,593,600) / 64 = 775,350,100 bytes, 387,675,050 per GPU."""
    model = catalog_models()["qwen3.5-27b"]
    inputs = {"model": model, "gpu": catalog_gpus()["h100-sxm"], "tensor_parallel_size": 2, "max_model_len": 32_768}
    plain = compute_plan(PlanInputs(**inputs), advice=False)
    drafted = compute_plan(PlanInputs(**inputs, num_speculative_tokens=1), advice=False)
    assert drafted.weights_bytes_per_gpu - plain.weights_bytes_per_gpu == 387_675_050
    assert plain.kv_budget_bytes_per_gpu - drafted.kv_budget_bytes_per_gpu == 387_675_050
    assert any(note.name == "draft_weights" for note in drafted.assumptions)
