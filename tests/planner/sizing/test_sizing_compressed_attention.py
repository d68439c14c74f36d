"""DeepSeek-V4's compressed attention (planner/sizing/compressed_attention.py) with its real config.

Every expected figure is worked out by hand from vLLM 0.33.0's source (paths inside the ``vllm`` package),
never by the code under test. The config is deepseek-ai/DeepSeek-V4-Flash's config.json
(https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash/blob/main/config.json): 43 layers, compress_ratios
[0, 0, 4, 128, 4, ..., 128, 4, 0] (44 entries, the last the MTP layer's): layers 0 and 1 sliding-window only,
21 layers at ratio 4 (2, 4, ..., 42), 20 at ratio 128 (3, 5, ..., 41); sliding_window 128, head_dim 512,
qk_rope_head_dim 64, index_head_dim 128.

The caches per layer on an H200 (FlashMLA, so fp8_ds_mla whether --kv-cache-dtype is auto or fp8:
models/deepseek_v4/attention.py, _resolve_dsv4_kv_cache_dtype), each page padded to a multiple of 576 bytes
(v1/kv_cache_interface.py, _apply_alignment_padding):

* sliding latent, every layer (v1/attention/backends/mla/sparse_swa.py, DeepseekV4SWACache): block 64,
  584 bytes a token: 64 x 584 = 37,376 -> 37,440;
* C4 latent (attention.py, get_kv_cache_spec: tokens_per_state 4, block 256): 64 states x 584 = 37,376 -> 37,440;
  C128 latent: 2 x 584 = 1,168 -> 1,728;
* C4 indexer key (DeepseekV4IndexerCache: 128 fp8 + 128 / 128 x 4 scale bytes = 132 a state): 64 x 132 = 8,448
  -> 8,640;
* compressor states in fp32 (models/deepseek_v4/compressor.py, CompressorStateCache: 2 x coff x head_dim floats,
  coff 2 at ratio 4): C4 block 4, 4 x 2,048 x 4 = 32,768 -> 32,832, window 8; C128 block 8, 8 x 1,024 x 4 =
  32,768 -> 32,832, window 128; the indexer's (head_dim 128) block 4, 4 x 512 x 4 = 8,192 -> 8,640, window 8.

Grouping (v1/core/kv_cache_planning.py, _get_packed_kv_cache_groups; the indexer backend's BLHNC layout is
block-outermost): buckets by type and block size: sliding latents (43 x 37,440), the block-256 MLA specs
(21 x 37,440 + 20 x 1,728 + 21 x 8,640: unbalanced, kept whole), the window-8 states (21 x 32,832 + 21 x 8,640:
balanced, sets the floor of 21 repeats), the C128 states (20 x 32,832). _approximate_gcd over the balanced
buckets' 43, 21 and 20 from 21: 22 pads 1 + 1 + 2 = 4, the least (21 pads 20 + 0 + 1). So the sliding latents
split into cdiv(43, 22) = 2 groups, the others stay whole: five KV cache groups. Bytes per block = the widest
group: MLA 786,240 + 34,560 + 181,440 = 1,002,240 (sliding 22 x 37,440 = 823,680; window-8 states 870,912; C128
states 656,640), rounded to the lcm of alignments, 1 (the 256-token kernel block is the block).

Per request (v1/core/kv_cache_utils.py, get_max_concurrency_for_kv_cache_config), with 2 x 8,192 = 16,384
tokens in flight (config/vllm.py, max_in_flight_tokens: async scheduling at pp 1): MLA cdiv(L, 256); sliding
latents 2 x (cdiv(min(127 + 16,384, L), 64) + 1) = 2 x 259; window-8 states cdiv(16,391, 4) + 1 = 4,099;
C128 states cdiv(16,511, 8) + 1 = 2,065 (SlidingWindowSpec.max_admission_blocks_per_request).
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
    model_spec_from_hf_config,
)
from planner.sizing.compressed_attention import approximate_gcd, packed_cache
from planner.sizing.figures import kv_bytes_per_token

CONFIG = Path(__file__).parent / "data" / "hf_configs" / "deepseek-ai--DeepSeek-V4-Flash.json"


def v4_config() -> dict:
    with CONFIG.open(encoding="utf-8") as handle:
        return json.load(handle)


def v4_flash():
    return model_spec_from_hf_config(v4_config(), hf_id="deepseek-ai/DeepSeek-V4-Flash")


def plan(gpu: str = "h200", **kwargs):
    return compute_plan(PlanInputs(model=v4_flash(), gpu=catalog_gpus()[gpu], **kwargs), advice=False)


def test_reads_the_compress_ratios_without_the_mtp_layer():
    model = v4_flash()
    attention = model.compressed_attention
    assert attention is not None
    assert len(attention.compress_ratios) == 43
    assert attention.compress_ratios.count(1) == 2
    assert attention.compress_ratios.count(4) == 21
    assert attention.compress_ratios.count(128) == 20
    assert attention.sliding_window == 128
    assert model.num_mtp_layers == 1
    assert model.attention_kind == "MLA" and model.num_kv_heads == 1 and model.head_size == 512


def test_five_kv_cache_groups_of_1_002_240_byte_blocks():
    packed = packed_cache(v4_flash().compressed_attention)
    assert packed.repeats_per_group == 22
    assert packed.num_kv_cache_groups == 5
    assert packed.bytes_per_block == 1_002_240
    pages = {name: page for group in packed.groups for name, _, page in group.caches}
    assert pages == {
        "sliding latent": 37_440,
        "C4 latent": 37_440,
        "C128 latent": 1_728,
        "indexer key": 8_640,
        "C4 compressor state": 32_832,
        "C128 compressor state": 32_832,
        "indexer compressor state": 8_640,
    }
    assert {(g.kind, g.window, g.block_size): g.num_groups for g in packed.groups} == {
        ("sliding_window", 128, 64): 2,
        ("full", None, 256): 1,
        ("sliding_window", 8, 4): 1,
        ("sliding_window", 128, 8): 1,
    }


def test_approximate_gcd_prefers_the_least_padding_then_the_larger():
    assert approximate_gcd([43, 21, 20], 21) == 22
    assert approximate_gcd([4, 8], 2) == 4  # 2 and 4 both pad nothing: the larger


def test_v4_flash_tp4_64k_on_h200():
    """40 GiB = 42,949,672,960 bytes // 1,002,240 = 42,853 blocks (42,948,990,720; 682,240 left).
    Per request at 65,536: 256 + 518 + 4,099 + 2,065 = 6,938 blocks; concurrency 42,853 / 6,938 = 6.1766;
    "GPU KV cache size" int(6.17656... x 65,536) = 404,787 tokens (0.33: concurrency x max_model_len)."""
    result = plan(tensor_parallel_size=4, max_model_len=65_536, kv_cache_memory_gib=40)
    assert result.block_size == 256
    assert result.page_size_bytes == 1_002_240
    assert result.num_gpu_blocks == 42_853
    assert result.worst_case_blocks_per_request == 6_938
    assert result.max_concurrency == pytest.approx(42_853 / 6_938)
    assert result.reported_kv_cache_tokens == 404_787
    assert result.kv_capacity_tokens == 42_853 * 256
    assert sum(group.num_groups for group in result.kv_groups) == 5
    assert result.fits


def test_v4_flash_tp8_1m_on_h200_with_fp8():
    """100 GiB = 107,374,182,400 bytes // 1,002,240 = 107,134 blocks. Per request at 1,048,576: 4,096 + 518 +
    4,099 + 2,065 = 10,778; concurrency 107,134 / 10,778 = 9.9401; reported int(9.94006... x 1,048,576) =
    10,422,911 tokens. --kv-cache-dtype fp8 is the same fp8_ds_mla layout as auto."""
    auto = plan(tensor_parallel_size=8, max_model_len=1_048_576, kv_cache_memory_gib=100)
    fp8 = plan(tensor_parallel_size=8, max_model_len=1_048_576, kv_cache_memory_gib=100, kv_cache_dtype="fp8")
    for result in (auto, fp8):
        assert result.num_gpu_blocks == 107_134
        assert result.worst_case_blocks_per_request == 10_778
        assert result.reported_kv_cache_tokens == 10_422_911
    assert [group.worst_case_blocks for group in auto.kv_groups] == [518, 4_096, 4_099, 2_065]


def test_fewer_batched_tokens_shrink_the_sliding_and_state_blocks():
    """max_num_batched_tokens 2,048: 4,096 in flight. Sliding latents 2 x (cdiv(4,223, 64) + 1) = 2 x 67;
    window-8 states cdiv(4,103, 4) + 1 = 1,027; C128 states cdiv(4,223, 8) + 1 = 529; at 65,536 with the MLA's
    256: 256 + 134 + 1,027 + 529 = 1,946 blocks."""
    result = plan(tensor_parallel_size=4, max_model_len=65_536, kv_cache_memory_gib=40, max_num_batched_tokens=2048)
    assert result.worst_case_blocks_per_request == 1_946
    assert result.reported_kv_cache_tokens == int(42_853 / 1_946 * 65_536)


def test_bytes_per_token_are_the_compressed_caches():
    """Per 256 tokens the MLA group's 1,002,240 bytes: 3,915 bytes per token per rank, on every tp rank."""
    assert kv_bytes_per_token(v4_flash()) == 3_915
    result = plan(tensor_parallel_size=8, max_model_len=65_536, kv_cache_memory_gib=40)
    assert result.kv_bytes_per_token_per_gpu == 3_915
    assert result.kv_bytes_per_token == 8 * 3_915


def test_weights_fp8_blocks_with_mxfp4_experts():
    """expert_dtype fp4 (models/deepseek_v4/quant_config.py): the 277,025,390,592 routed-expert parameters
    (43 x 256 x 3 x 4,096 x 2,048) at 0.53125 bytes; the rest FP8 with one ue8m0 byte per 128 x 128 block,
    the embeddings and LM head (2 x 129,280 x 4,096 = 1,059,061,760) and the compressors' 309,592,064 weights (built
    without a quant config: 21 x (4,096 x 2,048 + 4,096 x 512 + 4,096 x 64) + 20 x 4,096 x 1,024) at 2 bytes."""
    model = v4_flash()
    assert model.quantization == "fp8_block_mxfp4"
    assert model.num_expert_params == 277_025_390_592
    assert model.unquantized_params == 309_592_064
    result = plan(tensor_parallel_size=8, max_model_len=65_536, kv_cache_memory_gib=40)
    experts = 277_025_390_592 * 0.53125
    sixteen_bit = 2 * (1_059_061_760 + 309_592_064)
    rest = (model.num_params - 277_025_390_592 - 1_059_061_760 - 309_592_064) * (1 + 1 / 16_384)
    assert result.weights_bytes == pytest.approx(experts + sixteen_bit + rest, abs=1)


def test_the_parameter_count_is_the_model_cards():
    """The model card's 284B total and 13B activated; the count from the shapes is 284.33B and 13.80B."""
    model = v4_flash()
    assert model.params_estimated
    assert model.num_params == pytest.approx(284e9, rel=0.002)
    assert model.num_active_params == pytest.approx(13e9, rel=0.07)


def test_the_catalog_entry_plans():
    model = catalog_models()["deepseek-v4-flash"]
    assert model.hf_id == "deepseek-ai/DeepSeek-V4-Flash"
    assert model.compressed_attention == v4_flash().compressed_attention
    result = compute_plan(
        PlanInputs(model=model, gpu=catalog_gpus()["h200"], tensor_parallel_size=8, max_model_len=1_048_576),
        advice=False,
    )
    assert result.starts and result.num_gpu_blocks > 10_778


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"kv_cache_dtype": "bfloat16"}, "kv_cache_dtype"),
        ({"kv_cache_dtype": "fp8_e5m2"}, "kv_cache_dtype"),
        ({"block_size": 64}, "block_size"),
        ({"pipeline_parallel_size": 2}, "pipeline_parallel_size"),
        ({"engine_version": "0.26"}, "engine_version"),
        ({"tensor_parallel_size": 16, "gpu_count": 16}, "tensor_parallel_size"),
    ],
)
def test_settings_not_sized_exactly_are_a_400_naming_the_field(options, field):
    with pytest.raises(SizingInputError) as error:
        plan(kv_cache_memory_gib=40, **options)
    assert field in error.value.errors


def test_mtp_speculation_adds_the_draft_layers_sliding_latents():
    """--speculative-config method mtp: V4-Flash's one MTP layer (num_nextn_predict_layers 1) registers after the 43
    decoder layers with compress ratio 1 (models/deepseek_v4/attention.py): a sliding latent only. The sliding
    latents' bucket grows to 44 layers; _approximate_gcd over 44, 21 and 20 from 21: 22 pads 0 + 1 + 2 = 3 (21
    pads 19 + 0 + 1), so still two groups of 22, now without padding: the same 1,002,240-byte block, 42,853 blocks
    in 40 GiB, 6,938 a request (one MTP module reads one token ahead: no extra retained tokens, kv_cache_planning.py).
    The plan is the one without speculation; the command names the mtp method."""
    plain = plan(tensor_parallel_size=4, max_model_len=65_536, kv_cache_memory_gib=40)
    drafted = plan(tensor_parallel_size=4, max_model_len=65_536, kv_cache_memory_gib=40, num_speculative_tokens=2)
    sliding = drafted.kv_groups[0]
    assert (sliding.kind, sliding.num_layers, sliding.num_groups, sliding.block_size) == ("sliding_window", 44, 2, 64)
    assert plain.kv_groups[0].num_layers == 43
    assert (drafted.num_gpu_blocks, drafted.worst_case_blocks_per_request) == (42_853, 6_938)
    assert drafted.reported_kv_cache_tokens == plain.reported_kv_cache_tokens == 404_787
    assert '"method": "mtp", "num_speculative_tokens": 2' in drafted.vllm_command


def test_speculation_without_an_mtp_layer_or_with_several_is_a_400():
    config = v4_config()
    config["num_nextn_predict_layers"] = 0
    config["compress_ratios"] = config["compress_ratios"][:43]
    model = model_spec_from_hf_config(config)
    with pytest.raises(SizingInputError) as error:
        compute_plan(PlanInputs(model=model, gpu=catalog_gpus()["h200"], num_speculative_tokens=1), advice=False)
    assert "no MTP layer" in error.value.errors["num_speculative_tokens"]
    config = v4_config()
    config["num_nextn_predict_layers"] = 2
    config["compress_ratios"] = [*config["compress_ratios"], 0]
    model = model_spec_from_hf_config(config)
    with pytest.raises(SizingInputError) as error:
        compute_plan(PlanInputs(model=model, gpu=catalog_gpus()["h200"], num_speculative_tokens=2), advice=False)
    assert "multi-module MTP" in error.value.errors["num_speculative_tokens"]


@pytest.mark.parametrize("gpu", ["a100-80gb", "rtx-4090", "mi300x"])
def test_gpus_without_flashmla_are_a_400_naming_the_gpu(gpu):
    with pytest.raises(SizingInputError) as error:
        plan(gpu=gpu, kv_cache_memory_gib=10)
    assert "gpu" in error.value.errors


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"compress_ratios": [0, 0, 16] + [4] * 41}, "compress_ratios"),
        ({"compress_ratios": [0, 0] + [128] * 42}, "compress_ratios"),  # no indexer: another layout
        ({"head_dim": 576}, "head_dim"),
        ({"index_head_dim": 64}, "index_head_dim"),
        ({"expert_dtype": "fp6"}, "expert_dtype"),
        ({"vision_n_layers": 24}, "vision_n_layers"),
        ({"model_type": "deepseek_v41", "architectures": ["DeepseekV41ForCausalLM"]}, "model_type"),
    ],
)
def test_config_variants_not_sized_exactly_name_the_field(change, field):
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config({**v4_config(), **change})
    assert field in error.value.errors
    assert error.value.errors[field]


def nvfp4_config(name: str = "nvidia--DeepSeek-V4-Flash-NVFP4") -> dict:
    return json.loads((CONFIG.parent / f"{name}.json").read_text(encoding="utf-8"))


def test_an_hf_quant_config_alone_is_a_400_naming_it():
    """Without a quantization_config in config.json vLLM would read hf_quant_config.json (weight_utils.py,
    get_quant_config) and leave DeepseekV4FP8Config's path: not modelled, so refused by name."""
    config = v4_config()
    del config["quantization_config"]
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(config, hf_quant_config={"quantization": {"quant_algo": "NVFP4"}})
    assert "hf_quant_config" in error.value.errors


def test_modelopt_nvfp4_experts_with_fp8_blocks_elsewhere():
    """nvidia/DeepSeek-V4-Flash-NVFP4: config.json's quantization_config says quant_method fp8, 128 x 128 blocks,
    moe_quant_algo NVFP4 (its hf_quant_config.json is not read: config.json's comes first). vLLM 0.33
    (models/deepseek_v4/quant_config.py, DeepseekV4FP8Config.get_quant_method): routed experts ModelOptNvFp4FusedMoE,
    4-bit values with an fp8 scale per 16 = 0.5625 bytes; Fp8Config reads ignored_layers / modules_to_not_convert,
    not ModelOpt's "ignore", so every other linear stays FP8 with ue8m0 block scales, as in DeepSeek's checkpoint.
    The same 277,025,390,592 routed-expert parameters as V4-Flash: 155,826,782,208 bytes, 8,657,043,456 more than at
    MXFP4's 0.53125; every other term as in test_weights_fp8_blocks_with_mxfp4_experts."""
    hf_quant = nvfp4_config("nvidia--DeepSeek-V4-Flash-NVFP4.hf_quant_config")
    model = model_spec_from_hf_config(nvfp4_config(), hf_quant_config=hf_quant)
    assert model.quantization == "fp8_block_nvfp4"
    assert model.num_expert_params == 277_025_390_592
    assert model.unquantized_params == 309_592_064
    assert any("hf_quant_config.json not read" in note for note in model.notes)
    inputs = {"tensor_parallel_size": 8, "max_model_len": 65_536, "kv_cache_memory_gib": 40}
    nvfp4 = compute_plan(PlanInputs(model=model, gpu=catalog_gpus()["h200"], **inputs), advice=False)
    mxfp4 = plan(**inputs)
    sixteen_bit = 2 * (1_059_061_760 + 309_592_064)
    rest = (model.num_params - 277_025_390_592 - 1_059_061_760 - 309_592_064) * (1 + 1 / 16_384)
    assert nvfp4.weights_bytes == pytest.approx(155_826_782_208 + sixteen_bit + rest, abs=1)
    assert nvfp4.weights_bytes - mxfp4.weights_bytes == pytest.approx(8_657_043_456, abs=2)
    # The caches do not change: the same 42,853 blocks of 1,002,240 bytes in 40 GiB.
    assert nvfp4.num_gpu_blocks == mxfp4.num_gpu_blocks == 42_853


def test_v4_pro_nvfp4_plans_on_eight_h200s():
    """nvidia/DeepSeek-V4-Pro-NVFP4 (61 layers, 384 experts of 3 x 7,168 x 3,072, NVFP4): 61 x 384 x 66,060,288 =
    1,547,396,186,112 routed-expert parameters at 0.5625 bytes = 870,410,354,688 bytes, 101.3 GiB per GPU at tp 8
    before the rest: the plan starts and its weights per GPU exceed that."""
    model = model_spec_from_hf_config(nvfp4_config("nvidia--DeepSeek-V4-Pro-NVFP4"))
    assert model.quantization == "fp8_block_nvfp4"
    assert model.num_expert_params == 1_547_396_186_112
    result = compute_plan(
        PlanInputs(model=model, gpu=catalog_gpus()["h200"], tensor_parallel_size=8, max_model_len=65_536),
        advice=False,
    )
    assert result.starts
    assert result.weights_bytes_per_gpu > 870_410_354_688 / 8


@pytest.mark.parametrize("algo", ["MXFP8", "W4A16", 4])
def test_other_moe_quant_algos_name_it(algo):
    config = nvfp4_config()
    config["quantization_config"]["moe_quant_algo"] = algo
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(config)
    assert "moe_quant_algo" in error.value.errors["quantization_config"]


def test_v4_pro_packs_into_five_groups_too():
    """DeepSeek-V4-Pro's layout (nvidia/DeepSeek-V4-Pro-NVFP4's config.json, in aiconfigurator's
    model_configs, commit 7b35965; data/hf_configs): 61 layers, ratios 128, 128, then 4 and 128 alternating (30 at
    4, 31 at 128,
    no window-only layer). Balanced buckets: sliding latents 61, window-8 states 30 + 30 (floor 30), C128
    states 31; _approximate_gcd from 30: 31 pads 1 + 1 + 0 = 2 (30 pads 29 + 0 + 29): the sliding latents
    split in cdiv(61, 31) = 2. Widest group: the MLA one, 30 x 37,440 + 31 x 1,728 + 30 x 8,640 = 1,123,200 +
    53,568 + 259,200 = 1,435,968 bytes a block (window-8 states 1,244,160; sliding 31 x 37,440 = 1,160,640)."""
    config = json.loads((CONFIG.parent / "nvidia--DeepSeek-V4-Pro-NVFP4.json").read_text(encoding="utf-8"))
    model = model_spec_from_hf_config(config)
    assert model.compressed_attention is not None
    assert model.compressed_attention.compress_ratios == (128, 128) + (4, 128) * 29 + (4,)
    packed = packed_cache(model.compressed_attention)
    assert packed.repeats_per_group == 31
    assert packed.num_kv_cache_groups == 5
    assert packed.bytes_per_block == 1_435_968


def test_advice_and_search_do_not_offer_fp8_as_a_change():
    """auto and fp8 are the same fp8_ds_mla cache: no "FP8 KV cache" advice, one search candidate per shape."""
    from planner.sizing import search_configurations

    model = catalog_models()["deepseek-v4-flash"]
    missing = PlanInputs(
        model=model, gpu=catalog_gpus()["h200"], tensor_parallel_size=8, concurrency=64, max_model_len=1_048_576
    )
    result = compute_plan(missing)
    assert not result.fits
    assert all(row.kind != "kv_cache_dtype" for row in result.advice)
    found = search_configurations(
        PlanInputs(model=model, gpu=catalog_gpus()["h200"], concurrency=16, max_model_len=262_144)
    )
    assert found and {candidate.kv_cache_dtype for candidate in found} == {"auto"}


def test_on_a_b200_vllm_0_33_batches_16384_tokens():
    """vLLM 0.33 (engine/arg_utils.py, get_batch_defaults): GPUs with >= 160 GiB, as the B200, default to 16,384
    batched tokens, so 32,768 in flight. Per request at 65,536: 256 + 2 x (cdiv(32,895, 64) + 1 = 515) +
    (cdiv(32,775, 4) + 1 = 8,195) + (cdiv(32,895, 8) + 1 = 4,113) = 13,594 blocks; with 40 GiB (42,853 blocks)
    int(42,853 / 13,594 x 65,536) = 206,592 tokens reported."""
    result = plan(gpu="b200", tensor_parallel_size=4, max_model_len=65_536, kv_cache_memory_gib=40)
    assert result.inputs.max_num_batched_tokens == 16_384
    assert result.in_flight_tokens == 32_768
    assert result.worst_case_blocks_per_request == 13_594
    assert result.reported_kv_cache_tokens == 206_592


@pytest.mark.parametrize("value", [[4], {"ratio": 4}, "4", None, float("nan"), True])
def test_a_compress_ratio_that_is_not_a_number_is_a_400(value):
    """Found by fuzzing the real config: a list or object in compress_ratios raised TypeError (unhashable)."""
    config = v4_config()
    config["compress_ratios"][2] = value
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(config)
    assert "compress_ratios" in error.value.errors
