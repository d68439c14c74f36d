"""MiMo-V2-Flash (XiaomiMiMo/MiMo-V2-Flash, its real config.json) sized as vLLM 0.33.0 builds and caches it.

Every expected figure is derived by hand below from vLLM 0.33.0's source:

* ``model_executor/models/mimo_v2.py``: ``MiMoV2FlashDecoderLayer.is_compressed_softmax_layer`` makes layer i
  sliding when ``hybrid_layer_pattern[i] == 1``. The config's pattern has 0 at layers 0, 5, 11, 17, 23, 29, 35,
  41, 47: 9 full-attention layers (num_key_value_heads 4, head_dim 192 = K, v_head_dim 128 = V) and 39
  sliding-window layers (swa_num_key_value_heads 8, swa_head_dim 192, swa_v_head_dim 128, window
  sliding_window_size 128; cache_config.sliding_window is set to None). ``MiMoV2Attention``: KV heads per rank
  ``max(1, heads // tp)``.
* ``v1/kv_cache_interface.py`` ``AttentionSpec.state_content_size_bytes``: ``(head_size + head_size_v) x dtype``
  per KV head and token, bf16 = 2 bytes: full 4 / tp heads x (192 + 128) x 2, sliding 8 / tp x 320 x 2.
* ``model_executor/layers/attention/attention.py`` ``get_kv_cache_spec``: the sliding layers' block is the
  largest FA kernel block (MultipleOf(16)) whose page fits ``sw_per_token x block_size``: 16, as the full layers'.
* ``v1/core/kv_cache_planning.py``: ``unify_kv_cache_spec_page_size`` (a smaller page that divides the largest
  grows its block by the ratio), ``_get_kv_cache_groups_uniform_page_size`` (group size = the smallest layer
  count, 9, as 39 >= 1.5 x 9; sliding layers split into cdiv(39, 9) = 5 groups), ``_get_kv_cache_bytes_per_block``
  (the largest group's pages: 9 x page), ``num_blocks = available // bytes_per_block``.
* ``SlidingWindowSpec.max_admission_blocks_per_request``: cdiv(min(window - 1 + in_flight, max_len), block) + 1;
  in flight on an H200 (0.33, async scheduling, pp 1): 2 x 8,192 batched tokens = 16,384.
* ``v1/core/kv_cache_utils.py`` ``get_kv_cache_capacity``: reported tokens int(num_blocks / blocks per request
  x max_model_len).

40 GiB of KV memory per GPU (--kv-cache-memory-bytes) = 42,949,672,960 bytes; max_model_len 65,536.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.sizing import PlanInputs, SizingInputError, catalog_gpus, compute_plan, model_spec_from_hf_config
from planner.sizing.figures import kv_bytes_per_token
from planner.sizing.kv_cache import group_bytes_per_token

CONFIG = Path(__file__).parent / "data" / "hf_configs" / "XiaomiMiMo--MiMo-V2-Flash.json"
FULL_LAYERS = (0, 5, 11, 17, 23, 29, 35, 41, 47)


def config() -> dict:
    with CONFIG.open(encoding="utf-8") as handle:
        return json.load(handle)


def mimo():
    return model_spec_from_hf_config(config(), hf_id="XiaomiMiMo/MiMo-V2-Flash")


def plan(tp: int, **kwargs):
    inputs = PlanInputs(
        model=mimo(),
        gpu=catalog_gpus()["h200"],
        tensor_parallel_size=tp,
        kv_cache_memory_gib=40,
        max_model_len=65_536,
        **kwargs,
    )
    return compute_plan(inputs, advice=False)


def test_layers_follow_hybrid_layer_pattern_one_is_sliding():
    """Layer 0 is full, so the full group comes first; 1 marks the 39 sliding layers, window sliding_window_size
    (not chunked: vLLM deletes attention_chunk_size from MiMo-V2 configs, model_arch_config_convertor.py)."""
    model = mimo()
    full, sliding = model.layer_groups
    assert (full.kind, full.num_layers, full.window, full.num_kv_heads, full.head_size, full.head_size_v) == (
        "full",
        9,
        None,
        4,
        192,
        128,
    )
    assert (sliding.kind, sliding.num_layers, sliding.window) == ("sliding_window", 39, 128)
    assert (sliding.num_kv_heads, sliding.head_size, sliding.head_size_v) == (8, 192, 128)
    assert tuple(i for i, group in enumerate(model.layer_pattern) if group == 0) == FULL_LAYERS
    assert (model.num_kv_heads, model.head_size, model.num_mtp_layers, model.mtp_layer_kind) == (
        4,
        192,
        1,
        "sliding_window",
    )


def test_the_window_is_sliding_window_size_not_sliding_window():
    """mimo_v2.py passes config.sliding_window_size to the sliding layers and sets cache_config.sliding_window
    to None: the config's sliding_window does not size anything."""
    cfg = config()
    cfg["sliding_window"] = 4096
    cfg["sliding_window_size"] = 512
    windows = {group.kind: group.window for group in model_spec_from_hf_config(cfg).layer_groups}
    assert windows == {"full": None, "sliding_window": 512}


@pytest.mark.parametrize(
    ("tp", "full", "sliding", "per_gpu"),
    [
        # tp 1: 4 x (192 + 128) x 2 = 2,560; 8 x 320 x 2 = 5,120; 9 x 2,560 + 39 x 5,120 = 23,040 + 199,680.
        (1, 2_560, 5_120, 222_720),
        # tp 4: 4 // 4 = 1 head x 320 x 2 = 640; 8 // 4 = 2 x 320 x 2 = 1,280; 9 x 640 + 39 x 1,280 = 5,760 + 49,920.
        (4, 640, 1_280, 55_680),
        # tp 8: full max(1, 4 // 8) = 1 replicated head -> 640; sliding 8 // 8 = 1 -> 640; 48 x 640.
        (8, 640, 640, 30_720),
    ],
)
def test_bytes_per_token_per_gpu_count_k_and_v_heads_apart(tp, full, sliding, per_gpu):
    """Per token per layer per GPU: kv_heads / tp x (head_size + head_size_v) x 2 bytes, not 2 x heads x 192."""
    assert group_bytes_per_token(mimo(), tp, 2.0, "auto") == (full, sliding)
    assert plan(tp).kv_bytes_per_token_per_gpu == per_gpu


def test_the_shape_figure_counts_each_group_at_its_own_width():
    """The API's kv_bytes_per_token_bf16 (figures.kv_bytes_per_token, tp 1): 23,040 + 199,680 = 222,720,
    where the model-wide shape (48 x 2 x 4 x 192 x 2 = 147,456) would undercount."""
    assert kv_bytes_per_token(mimo()) == 222_720


def test_tp4_on_h200_at_40_gib_and_64k():
    """tp 4: pages of 16 tokens are 640 x 16 = 10,240 (full) and 1,280 x 16 = 20,480 (sliding). 20,480 % 10,240 ==
    0: the full block grows to 16 x 2 = 32 tokens (unify_kv_cache_spec_page_size); every page is 20,480 bytes.
    Groups: 1 full (9 layers) + 5 sliding (cdiv(39, 9)), group size 9: bytes per block 9 x 20,480 = 184,320;
    num_blocks = 42,949,672,960 // 184,320 = 233,016 (184,320 x 233,016 = 42,949,509,120, 163,840 left).
    Per request of 65,536 tokens: full cdiv(65,536, 32) = 2,048; sliding cdiv(min(127 + 16,384, 65,536), 16) + 1 =
    cdiv(16,511, 16) + 1 = 1,032 + 1 = 1,033, x 5 groups = 5,165; total 7,213.
    Max concurrency 233,016 / 7,213 = 32.305; reported int(32.305... x 65,536) = 2,117,140
    (233,016 x 65,536 = 15,270,936,576 = 7,213 x 2,117,140 + 5,756)."""
    result = plan(4)
    assert result.block_size == 16
    assert result.group_block_sizes == (32, 16)
    assert result.page_size_bytes == 20_480
    assert result.group_size == 9
    assert result.num_gpu_blocks == 233_016
    assert result.worst_case_blocks_per_request == 7_213
    assert [(g.kind, g.num_layers, g.num_groups, g.block_size, g.worst_case_blocks) for g in result.kv_groups] == [
        ("full", 9, 1, 32, 2_048),
        ("sliding_window", 39, 5, 16, 5_165),
    ]
    assert result.max_concurrency == pytest.approx(32.305, abs=1e-3)
    assert result.reported_kv_cache_tokens == 2_117_140
    assert result.kv_bytes_per_token == 4 * 55_680  # the replica: 4 ranks of 55,680
    assert result.starts and result.fits


def test_tp8_replicates_the_full_heads_and_needs_no_unification():
    """tp 8: both kinds cache 640 bytes per token, pages 640 x 16 = 10,240, blocks of 16 for every group.
    Bytes per block 9 x 10,240 = 92,160 -> 42,949,672,960 // 92,160 = 466,033 (92,160 x 466,033 =
    42,949,601,280, 71,680 left). Per request: full cdiv(65,536, 16) = 4,096; sliding 5 x 1,033 = 5,165; total
    9,261. Reported int(466,033 / 9,261 x 65,536) = 3,297,909 (30,541,938,688 = 9,261 x 3,297,909 + 3,439)."""
    result = plan(8)
    assert result.group_block_sizes == ()
    assert result.page_size_bytes == 10_240
    assert result.num_gpu_blocks == 466_033
    assert result.worst_case_blocks_per_request == 9_261
    assert result.reported_kv_cache_tokens == 3_297_909
    assert any("replicated head" in warning for warning in result.warnings)


def test_tp1_pages_and_blocks():
    """tp 1: full page 2,560 x 16 = 40,960 divides the sliding 5,120 x 16 = 81,920: full block 32. Bytes per block
    9 x 81,920 = 737,280 -> 42,949,672,960 // 737,280 = 58,254 (737,280 x 58,254 = 42,949,509,120). Per request
    the same 2,048 + 5,165 = 7,213 blocks as at tp 4. The weights (about 289 GiB) do not fit one H200."""
    result = plan(1)
    assert result.group_block_sizes == (32, 16)
    assert result.page_size_bytes == 81_920
    assert result.num_gpu_blocks == 58_254
    assert result.worst_case_blocks_per_request == 7_213
    assert not result.starts


def test_parameters_against_the_published_309b_total_and_15b_active():
    """The weights vLLM builds (mimo_v2.py), hidden 4,096:
    full attention q 4,096 x 64 x 192 = 50,331,648, k 4,096 x 4 x 192 = 3,145,728, v 4,096 x 4 x 128 = 2,097,152,
    o 64 x 128 x 4,096 = 33,554,432: 89,128,960, x 9 = 802,160,640;
    sliding q 50,331,648, k 4,096 x 8 x 192 = 6,291,456, v 4,096 x 8 x 128 = 4,194,304, o 33,554,432, sinks 64:
    94,371,904, x 39 = 3,680,504,256; norms 48 x 2 x 4,096 = 393,216;
    layer 0 (moe_layer_freq[0] = 0) dense MLP 3 x 4,096 x 16,384 = 201,326,592;
    47 MoE layers: 256 experts x 3 x 4,096 x 2,048 = 6,442,450,944, router 4,096 x 256 + 256 bias = 1,048,832:
    47 x 6,443,499,776 = 302,844,489,472; no shared expert (n_shared_experts null, MiMoV2MoE builds none);
    embeddings and the untied LM head 2 x 152,576 x 4,096 = 1,249,902,592, final norm 4,096.
    Total 308,778,780,864 against the model card's 309B (https://huggingface.co/XiaomiMiMo/MiMo-V2-Flash):
    -0.07%; MTP layers, not loaded without speculative decoding, are not counted.
    Active: 8 experts x 25,165,824 + 1,048,832 = 202,375,424 per MoE layer, x 47 = 9,511,644,928, plus attention,
    norms, dense MLP and embeddings 5,934,291,392: 15,445,936,320 against the card's 15B: +3.0%.
    Routed experts 47 x 6,442,450,944 = 302,795,194,368; the checkpoint is FP8 with 128 x 128 blocks."""
    model = mimo()
    assert model.num_params == 308_778_780_864
    assert model.num_params / 309e9 - 1 == pytest.approx(-0.000716, abs=1e-6)
    assert model.num_active_params == 15_445_936_320
    assert model.num_active_params / 15e9 - 1 == pytest.approx(0.0297, abs=1e-4)
    assert model.num_expert_params == 302_795_194_368
    assert (model.num_experts, model.num_experts_per_tok, model.expert_intermediate_size) == (256, 8, 2_048)
    assert model.quantization == "fp8_block"
    assert model.is_moe and model.params_estimated and not model.tie_word_embeddings


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        ([0, 1] * 23, "46"),  # 46 entries for 48 layers
        ([0, 1, 2] * 16, "2"),  # 2 is neither full (0) nor sliding (1)
        ([True, False] * 24, "True"),
        ("0111101111", "str"),
    ],
)
def test_a_malformed_hybrid_layer_pattern_names_the_field_and_the_value(pattern, said):
    cfg = config()
    cfg["hybrid_layer_pattern"] = pattern
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(cfg)
    assert said in error.value.errors["hybrid_layer_pattern"]


def test_a_malformed_moe_layer_freq_names_the_field():
    cfg = config()
    cfg["moe_layer_freq"] = [0, 1, 1]
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(cfg)
    assert "3" in error.value.errors["moe_layer_freq"]


def test_missing_sliding_shapes_are_named():
    cfg = config()
    del cfg["swa_num_key_value_heads"], cfg["sliding_window_size"]
    cfg["hybrid_layer_pattern"] = [0, 1] * 24
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(cfg)
    assert {"swa_num_key_value_heads", "sliding_window_size"} <= set(error.value.errors)


def test_other_mimo_v2_architectures_are_refused_by_name():
    """MiMoV2ForCausalLM / MiMoV2OmniForCausalLM load other checkpoints (fused QKV, a vision tower): not sized."""
    cfg = config()
    cfg["architectures"] = ["MiMoV2OmniForCausalLM"]
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(cfg)
    assert "MiMoV2OmniForCausalLM" in error.value.errors["architectures"]


def test_mtp_speculation_adds_one_sliding_draft_layer():
    """--speculative-config method mtp: vLLM loads one MiMo-V2-Flash draft layer (config/speculative.py,
    _MIMO_V2_FLASH_NUM_MTP_LAYERS = 1), a sliding-window layer of the SWA shapes (mimo_v2_mtp.py). At tp 4 it adds
    2 KV heads x (192 + 128) x 2 bytes = 1,280 bytes a token: 55,680 + 1,280 = 56,960 per GPU. The sliding layers
    become 40: group size still 9 (40 >= 1.5 x 9), cdiv(40, 9) = 5 sliding groups as before, so the same 233,016
    blocks and 7,213 a request at 40 GiB and 65,536 tokens."""
    drafted = plan(4, num_speculative_tokens=1)
    sliding = next(group for group in drafted.kv_groups if group.kind == "sliding_window")
    assert (sliding.num_layers, sliding.num_groups) == (40, 5)
    assert drafted.kv_bytes_per_token_per_gpu == 56_960
    assert (drafted.num_gpu_blocks, drafted.worst_case_blocks_per_request) == (233_016, 7_213)
    assert '"method": "mtp"' in drafted.vllm_command
