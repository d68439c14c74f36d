"""Issue 12 items 11-12: vision/audio towers in the parameter count; float32 checkpoints and --dtype float32."""

from __future__ import annotations

import json
from pathlib import Path

from planner.sizing import PlanInputs, catalog_gpus, compute_plan, model_spec_from_hf_config

CONFIGS = Path(__file__).parent / "data" / "hf_configs"

# Llama 3 8B's shapes with a float32 checkpoint; the official count is given, so only the dtype varies.
FLOAT32_LLAMA = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "torch_dtype": "float32",
}


def _plan(**kwargs):
    model = model_spec_from_hf_config(FLOAT32_LLAMA, num_params=8_030_000_000)
    return compute_plan(PlanInputs(model=model, gpu=catalog_gpus()["h100-sxm"], **kwargs), advice=False)


def test_float32_checkpoint_under_dtype_auto_runs_in_bfloat16():
    """vLLM 0.33 config/model.py _resolve_auto_dtype: "Downcast for float32 models" to the platform's
    preferred dtype (bfloat16 on CUDA), and the KV cache's auto follows the model dtype:
    weights 2 x 8.03e9 = 16,060,000,000 bytes; KV 32 layers x 2 x 8 heads x 128 x 2 bytes = 131,072 B/token."""
    plan = _plan()
    assert plan.weights_bytes == 16_060_000_000
    assert plan.kv_bytes_per_token_per_gpu == 131_072
    assert any(a.name == "dtype" and "bfloat16" in a.value for a in plan.assumptions)


def test_dtype_float32_doubles_weights_and_kv():
    """--dtype float32: 4 bytes per weight (32,120,000,000) and KV auto = float32: 262,144 B/token."""
    plan = _plan(weight_dtype="float32")
    assert plan.weights_bytes == 32_120_000_000
    assert plan.kv_bytes_per_token_per_gpu == 262_144
    assert "--dtype float32" in plan.vllm_command


def test_vision_tower_is_counted_in_an_estimated_parameter_count():
    """Qwen3.5-27B's vision_config: depth 27, width 1152, MLP 4304, patch 16 x 16 x 2 frames x 3 channels,
    spatial merge 2, out_hidden_size 5120.
    Per block: q/k/v/o 4 x 1152^2 = 5,308,416 + biases 4 x 1152 = 4,608; MLP 2 x 1152 x 4304 = 9,916,416
    + biases 4,304 + 1,152; two norms (weight and bias) 4,608: 15,239,504; x 27 = 411,466,608.
    Patch embedding 3 x 16 x 16 x 2 x 1152 + 1152 = 1,770,624. Merger: 4,608^2 + 4,608 x 5,120 = 44,826,624.
    Tower total 458,063,856."""
    with (CONFIGS / "Qwen--Qwen3.5-27B.json").open(encoding="utf-8") as handle:
        config = json.load(handle)
    with_tower = model_spec_from_hf_config(config)
    text_only = model_spec_from_hf_config({key: value for key, value in config.items() if key != "vision_config"})
    assert with_tower.num_params - text_only.num_params == 458_063_856
    assert any("towers" in note for note in with_tower.notes)
