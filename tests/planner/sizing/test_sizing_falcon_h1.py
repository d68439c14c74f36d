"""Falcon-H1: attention and a Mamba2 mixer side by side in every decoder layer (vLLM 0.33.0
``model_executor/models/falcon_h1.py``, ``FalconH1ParallelHybrid``; the mixer registers as layer
``num_hidden_layers + i``, so the KV cache has one attention and one state layer per decoder layer).

No full config.json of a Falcon-H1 checkpoint is in the test data; these dicts hold the fields sizing reads as
published for the checkpoints: Falcon-H1-7B-Instruct (mlx-community's Falcon-H1-7B-Instruct-4bit config.json, as
quoted in a public MLX sizing test suite) and Falcon-H1-Tiny-90M-Base (the same suite for the Mamba fields; the
model's published config for hidden, intermediate, vocabulary and tying). Every expected figure is derived by hand
from vLLM 0.33's rules (state_cache.py's sources); 40 GiB of KV memory = 42,949,672,960 bytes.
"""

from __future__ import annotations

import pytest

from planner.sizing import PlanInputs, SizingInputError, catalog_gpus, compute_plan, model_spec_from_hf_config

FALCON_H1_7B = {
    "architectures": ["FalconH1ForCausalLM"],
    "model_type": "falcon_h1",
    "max_position_embeddings": 262_144,
    "num_hidden_layers": 44,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "hidden_size": 3072,
    "attn_layer_indices": None,
    "mamba_d_conv": 4,
    "mamba_d_head": 128,
    "mamba_d_ssm": 3072,
    "mamba_d_state": 256,
    "mamba_expand": 2,
    "mamba_n_groups": 1,
    "mamba_n_heads": 24,
    "torch_dtype": "bfloat16",
}
FALCON_H1_TINY = {
    "architectures": ["FalconH1ForCausalLM"],
    "model_type": "falcon_h1",
    "max_position_embeddings": 262_144,
    "num_hidden_layers": 24,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "hidden_size": 512,
    "intermediate_size": 768,
    "vocab_size": 32_768,
    "tie_word_embeddings": True,
    "mamba_d_conv": 4,
    "mamba_d_head": 32,
    "mamba_d_ssm": 768,
    "mamba_d_state": 64,
    "mamba_expand": 2,
    "mamba_n_groups": 1,
    "mamba_n_heads": 24,
    "torch_dtype": "bfloat16",
}


def plan(config: dict | None = None, **options):
    # The parameter count only feeds the memory estimate, which a fixed KV memory bypasses.
    model = model_spec_from_hf_config(config or FALCON_H1_7B, num_params=7_000_000_000)
    inputs = PlanInputs(model=model, gpu=catalog_gpus()["h100-sxm"], kv_cache_memory_gib=40, **options)
    return compute_plan(inputs, advice=False)


def test_every_decoder_layer_keeps_an_attention_and_a_mamba_cache():
    model = model_spec_from_hf_config(FALCON_H1_7B, num_params=7_000_000_000)
    assert model.num_layers == 88
    assert {group.kind: group.num_layers for group in model.layer_groups} == {"full": 44, "state": 44}
    assert model.layer_pattern[:4] == (0, 1, 0, 1)
    assert model.state is not None
    assert (model.state.kind, model.state.intermediate_size, model.state.num_heads) == ("mamba2", 3072, 24)


def test_falcon_h1_7b_at_tp_1_with_prefix_caching_on():
    """vLLM 0.33 defaults (prefix caching on for hybrids: align mode), H100, max_model_len 262,144.

    Attention per token per layer: 2 KV heads x 128 x 2 (K, V) x 2 bytes = 1,024 B.
    Mamba2 state (mamba2_state_shape): conv dim 3,072 + 2 x 1 group x 256 = 3,584, conv (3, 3,584) = 10,752 values;
    ssm (24 heads, 128, 256) = 786,432 values; both bf16 (no Falcon-H1 default: the model dtype): 21,504 +
    1,572,864 = 1,594,368 B a page. Mamba2's checkpoint alignment is 1: k = 16, block = 16 x cdiv(1,594,368,
    16 x 1,024) = 16 x 98 = 1,568 (_align_hybrid_block_size).
    Groups: 44 attention and 44 Mamba layers, group size 44: one group each; bytes per block 44 x 1,568 x 1,024 =
    70,647,808; blocks 42,949,672,960 // 70,647,808 = 607.
    Per request: cdiv(262,144, 1,568) = 168 + 1 state group x (2 + 1 prefill checkpoint, mamba_mixer2.py) = 171;
    reported int(607 x 262,144 / 171) = 930,534 tokens."""
    result = plan()
    assert result.state_page_bytes == 1_594_368
    assert result.block_size == 1_568
    assert result.group_size == 44
    assert [(group.kind, group.num_groups) for group in result.kv_groups] == [("full", 1), ("state", 1)]
    assert result.num_gpu_blocks == 607
    assert result.worst_case_blocks_per_request == 171
    assert result.reported_kv_cache_tokens == 930_534
    # Per token only the attention layers: 44 x 1,024.
    assert result.kv_bytes_per_token_per_gpu == 45_056


def test_falcon_h1_7b_at_tp_2():
    """tp 2: 1 KV head per rank, 512 B a token a layer. n_groups 1 is replicated up to tp (mamba2_state_shape:
    1 + 2 - 1 = 2): conv dim 3,072 + 2 x 2 x 256 = 4,096, per rank 2,048 x 3 = 6,144 values = 12,288 B; ssm
    12 x 128 x 256 x 2 = 786,432 B; page 798,720. Block 16 x cdiv(798,720, 16 x 512) = 16 x 98 = 1,568; bytes per
    block 44 x 1,568 x 512 = 35,323,904; blocks 1,215; 171 a request; int(1,215 x 262,144 / 171) = 1,862,602."""
    result = plan(tensor_parallel_size=2, gpu_count=2)
    assert result.state_page_bytes == 798_720
    assert (result.block_size, result.num_gpu_blocks) == (1_568, 1_215)
    assert result.reported_kv_cache_tokens == 1_862_602


def test_prefix_caching_off_holds_one_state_block():
    """mamba_cache_mode none: 168 + 1 = 169 blocks a request; int(607 x 262,144 / 169) = 941,546."""
    result = plan(enable_prefix_caching=False)
    assert (result.block_size, result.worst_case_blocks_per_request) == (1_568, 169)
    assert result.reported_kv_cache_tokens == 941_546


def test_d_head_auto_and_expand_without_d_ssm():
    """transformers' FalconH1Config: mamba_d_head "auto" = mamba_d_ssm // mamba_n_heads (3,072 / 24 = 128); without
    mamba_d_ssm vLLM takes int(mamba_expand x hidden) = 6,144 channels."""
    auto = model_spec_from_hf_config({**FALCON_H1_7B, "mamba_d_head": "auto"}, num_params=7_000_000_000)
    assert auto.state is not None and auto.state.head_dim == 128
    wide = model_spec_from_hf_config({**FALCON_H1_7B, "mamba_d_ssm": None}, num_params=7_000_000_000)
    assert wide.state is not None and wide.state.intermediate_size == 6_144


def test_pipeline_stages_split_whole_decoder_layers():
    """pp 4 divides 44 decoder layers: each stage 11 attention and 11 Mamba layers. pp 3 would split them
    unevenly (get_pp_indices over decoder layers), which is refused by name."""
    result = plan(pipeline_parallel_size=4, gpu_count=4)
    assert result.num_gpu_blocks > 0
    with pytest.raises(SizingInputError) as error:
        plan(pipeline_parallel_size=3, gpu_count=3)
    assert "44 decoder layers" in error.value.errors["pipeline_parallel_size"]


def test_the_tiny_model_estimates_its_90m_parameters():
    """Falcon-H1-Tiny-90M: embeddings 32,768 x 512 (tied) = 16,777,216; per layer attention q/k/v/o 512 x (512 + 2 x
    128) + 512 x 512 = 655,360, MLP 3 x 512 x 768 = 1,179,648, Mamba2 in_proj 512 x (2 x 768 + 2 x 64 + 24) =
    864,256, conv 896 x 4 + 896 = 4,480, A/D/dt_bias 72, norm 768, out_proj 768 x 512 = 393,216, two norms 1,024:
    3,098,824 x 24 = 74,371,776; with the final norm 512: 91,149,504, the "90M" of its name."""
    model = model_spec_from_hf_config(FALCON_H1_TINY)
    assert model.num_params == 91_149_504


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"mamba_n_heads": 0}, "mamba_n_heads"),
        ({"mamba_d_state": None}, "mamba_d_state"),
        ({"mamba_d_ssm": None, "mamba_expand": "wide"}, "mamba_expand"),
    ],
)
def test_bad_mamba_fields_name_the_field(change, field):
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config({**FALCON_H1_7B, **change}, num_params=7_000_000_000)
    assert field in error.value.errors
