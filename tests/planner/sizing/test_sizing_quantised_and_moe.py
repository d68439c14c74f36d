"""Parameter counts of 2026's MoE / hybrid models and quantised checkpoints' weight bytes.

Official totals are the model cards' figures (the HF repositories in data/hf_configs/SOURCES.md); the
estimate from config.json shapes must land within 1.5% of them (vision towers included where the
checkpoint has one).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from planner.sizing import model_spec_from_hf_config
from planner.sizing.memory import weight_bytes

CONFIGS = Path(__file__).parent / "data" / "hf_configs"


def config(name: str) -> dict:
    with (CONFIGS / f"{name}.json").open(encoding="utf-8") as handle:
        return json.load(handle)


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        # "80B in total and 3B activated" (Qwen3-Next model card; activated excludes the embeddings).
        ("Qwen--Qwen3-Next-80B-A3B-Thinking", 80.0, None),
        # "35B in total and 3B activated" (Qwen3.5-35B-A3B model card).
        ("Qwen--Qwen3.5-35B-A3B", 35.0, None),
        # "397B in total and 17B activated" (Qwen3.5-397B-A17B model card).
        ("Qwen--Qwen3.5-397B-A17B", 397.0, 17.0),
        # 27B (Qwen3.5-27B model card), vision encoder included.
        ("Qwen--Qwen3.5-27B", 27.0, None),
        # "31.6B total parameters ... 3.6B including embeddings" (Nemotron 3 Nano model card).
        ("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 31.6, 3.6),
        # 120B total, 12B active (Nemotron 3 Super model card).
        ("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8", 120.0, 12.0),
        # "25.2B total, 3.8B active" (Gemma 4 26B-A4B model card), vision encoder included.
        ("google--gemma-4-26B-A4B", 25.2, None),
        # 671B main model (DeepSeek-V3.2 card: 685B with the 14B MTP module, which vLLM loads only for MTP).
        ("deepseek-ai--DeepSeek-V3.2", 671.0, None),
    ],
)
def test_moe_and_hybrid_parameter_counts_match_the_model_cards(name, total_b, active_b):
    model = model_spec_from_hf_config(config(name))
    assert model.params_estimated
    assert model.num_params / 1e9 == pytest.approx(total_b, rel=0.015)
    if active_b is not None:
        assert model.num_active_params / 1e9 == pytest.approx(active_b, rel=0.08)


def test_moe_config_without_intermediate_size_is_read():
    """Qwen3.5-35B-A3B gives moe_intermediate_size and shared_expert_intermediate_size only."""
    cfg = config("Qwen--Qwen3.5-35B-A3B")
    assert "intermediate_size" not in cfg["text_config"]
    model = model_spec_from_hf_config(cfg)
    assert (model.num_experts, model.num_experts_per_tok, model.expert_intermediate_size) == (256, 8, 512)


def test_nemotron_nano_nvfp4_keeps_the_excluded_modules_in_16_bits():
    """NVFP4 (ModelOpt hf_quant_config.json: quant_algo NVFP4, group 16) at 0.5 + 1/16 = 0.5625 bytes
    per parameter, with its exclude_modules in bf16: the 6 attention layers (5, 12, 19, 26, 33, 42) and the
    in/out projections of 6 of the 23 Mamba layers (4, 11, 18, 25, 32, 41).
    Attention layer (hidden 2688, 32 x 128 queries, 2 x 128 keys and values, no biases):
    2688 x (4096 + 2 x 256) + 4096 x 2688 = 23,396,352; x 6 = 140,378,112.
    Mamba2 mixer (4096 channels, 8 groups, state 128, 64 heads, conv 4 with bias):
    in_proj 2688 x (2 x 4096 + 2 x 8 x 128 + 64) = 27,697,152; conv (4096 + 2048) x 4 + 6144 = 30,720;
    dt_bias, A_log, D 3 x 64 = 192; norm 4096; out_proj 4096 x 2688 = 11,010,048: 38,742,208; x 6 =
    232,453,248. Kept in bf16: 372,831,360 parameters besides the embeddings and LM head
    (131,072 x 2688 x 2 = 704,643,072)."""
    with (CONFIGS / "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.hf_quant_config.json").open() as handle:
        hf_quant = json.load(handle)
    model = model_spec_from_hf_config(config("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"), hf_quant_config=hf_quant)
    assert model.quantization == "nvfp4"
    assert model.unquantized_params == 372_831_360
    assert model.embedding_params == 704_643_072
    kept = 704_643_072 + 372_831_360
    assert weight_bytes(model, "auto").total == math.ceil(2 * kept + 0.5625 * (model.num_params - kept))
    # Without the hf_quant_config.json the checkpoint reads as bf16 (its config.json says nothing).
    assert model_spec_from_hf_config(config("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4")).quantization is None


@pytest.mark.parametrize(
    ("quantization_config", "expected", "bytes_per_param"),
    [
        # DeepSeek-style FP8 with a float32 scale per 128 x 128 block.
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8_block", 1 + 4 / 16384),
        ({"quant_method": "fp8"}, "fp8", 1.0),
        # compressed-tensors NVFP4 (Qwen3.5-397B-A17B-NVFP4's config_groups).
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}},
            },
            "nvfp4",
            0.5625,
        ),
        # AWQ W4A16 at group 128: 0.5 + 2 / 128 (an fp16 scale per group).
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "int4", 0.5 + 2 / 128),
    ],
)
def test_quantisation_formats_with_their_scales(quantization_config, expected, bytes_per_param):
    base = {
        "model_type": "llama",
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16",
        "quantization_config": quantization_config,
    }
    model = model_spec_from_hf_config(base, num_params=8_030_000_000)
    assert model.quantization == expected
    embeddings = 128256 * 4096 * 2
    assert weight_bytes(model, "auto").total == math.ceil(
        2 * embeddings + bytes_per_param * (8_030_000_000 - embeddings)
    )


def test_w4a16_group_32_scales_are_counted():
    """Kimi K2.5 (compressed-tensors int4, group_size 32): 0.5 + 2 / 32 = 0.5625 bytes per quantised weight;
    its ignore list keeps attention (re:.*self_attn.*), shared experts and the dense MLP in bf16."""
    model = model_spec_from_hf_config(config("moonshotai--Kimi-K2.5"))
    assert model.quantization == "int4_g32"
    kept = model.embedding_params + model.unquantized_params
    assert model.unquantized_params > 0
    assert weight_bytes(model, "auto").total == math.ceil(2 * kept + 0.5625 * (model.num_params - kept))


def test_a_config_group_with_a_non_number_of_bits_is_not_a_type_error():
    """Found by mutating the real configs: num_bits as a list made the narrowest-group choice compare a list with an
    int. Such a group counts as 16 bits; the NVFP4 group still sizes the experts."""
    import json
    from pathlib import Path

    path = Path(__file__).parent / "data" / "hf_configs" / "nvidia--Qwen3.6-35B-A3B-NVFP4.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    quantization = config.get("quantization_config") or config["text_config"]["quantization_config"]
    # group_0 is the 8-bit float group (linear attention), group_1 the 4-bit NVFP4 experts (groups of 16).
    quantization["config_groups"]["group_0"]["weights"]["num_bits"] = [8]
    assert model_spec_from_hf_config(config).quantization == "nvfp4"
