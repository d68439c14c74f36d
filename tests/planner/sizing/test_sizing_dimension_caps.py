"""The engine refuses model shapes far beyond any real model: they cost CPU and answer size, never a plan."""

from __future__ import annotations

import json
import time

import pytest

from planner.sizing import (
    PlanInputs,
    SizingInputError,
    catalog_gpus,
    custom_gpu,
    model_spec_from_hf_config,
    plan_to_dict,
    search_configurations,
)

SMALL = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "hidden_size": 64,
    "intermediate_size": 64,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize(
    ("key", "largest_accepted"),
    [
        # Llama 3.1 405B has 126 layers, 128 heads, hidden 16384, intermediate 53248; Gemma 3 a 262,208 vocab;
        # Llama 4 Scout 10,485,760 positions; DeepSeek-V3 256 routed experts. The caps leave 2x to 16x headroom.
        ("num_hidden_layers", 256),
        ("hidden_size", 131_072),
        ("intermediate_size", 1_048_576),
        ("vocab_size", 4_194_304),
        ("max_position_embeddings", 2**27),
    ],
)
def test_each_dimension_is_capped_just_above_what_real_models_use(key, largest_accepted):
    spec = model_spec_from_hf_config({**SMALL, key: largest_accepted}, name="edge")
    assert spec.name == "edge"
    with pytest.raises(SizingInputError) as caught:
        model_spec_from_hf_config({**SMALL, key: largest_accepted + 1}, name="too big")
    assert caught.value.errors[key] == f"must be at most {largest_accepted}, got {largest_accepted + 1}"


def test_attention_heads_and_experts_are_capped():
    with pytest.raises(SizingInputError) as caught:
        model_spec_from_hf_config({**SMALL, "num_attention_heads": 2048, "num_key_value_heads": 2048}, name="x")
    assert set(caught.value.errors) == {"num_attention_heads", "num_key_value_heads"}
    with pytest.raises(SizingInputError) as caught:
        model_spec_from_hf_config({**SMALL, "num_local_experts": 100_000, "num_experts_per_tok": 2}, name="x")
    assert "num_local_experts" in caught.value.errors


def test_a_100000_layer_config_is_refused_at_once():
    layers = 100_000
    config = {
        **SMALL,
        "num_hidden_layers": layers,
        "sliding_window": 4096,
        "layer_types": ["sliding_attention" if i % 2 else "full_attention" for i in range(layers)],
    }
    start = time.perf_counter()
    with pytest.raises(SizingInputError) as caught:
        model_spec_from_hf_config(config, name="attack")
    assert time.perf_counter() - start < 0.5
    assert caught.value.errors["num_hidden_layers"] == "must be at most 256, got 100000"


def test_a_search_for_the_deepest_accepted_model_answers_in_bounded_size():
    # 256 alternating layers, tiny widths so that nearly every configuration fits: the most plans and the
    # longest per-layer pattern a request can ask for.
    layers = 256
    config = {
        **SMALL,
        "num_hidden_layers": layers,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "layer_types": ["sliding_attention" if i % 2 else "full_attention" for i in range(layers)],
    }
    spec = model_spec_from_hf_config(config, name="deep")
    inputs = PlanInputs(model=spec, gpu=custom_gpu(memory_gib=80.0), max_model_len=32768, concurrency=8)
    candidates = search_configurations(inputs, gpus=list(catalog_gpus().values()))
    body = json.dumps([plan_to_dict(candidate.plan) for candidate in candidates[:50]])
    # Each plan carries the model's layer pattern as runs: one run for 256 alternating layers, not 256 entries.
    assert len(body) < 50 * 20_000
    assert plan_to_dict(candidates[0].plan)["inputs"]["model"]["layer_pattern"] == [{"unit": [0, 1], "repeat": 128}]
