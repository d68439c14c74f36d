"""Bad inputs raise SizingInputError naming the field, and nothing else (no KeyError/ZeroDivisionError)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.sizing import (
    PlanInputs,
    SizingInputError,
    catalog_gpus,
    catalog_models,
    compute_plan,
    model_spec_from_hf_config,
    step_time_seconds,
)

MODELS = catalog_models()
GPUS = catalog_gpus()
BASE = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "hidden_size": 512,
    "intermediate_size": 1024,
    "vocab_size": 1000,
    "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16",
}


def _without(key):
    return {k: v for k, v in BASE.items() if k != key}


BAD_CONFIGS = [
    pytest.param([], "config", id="list"),
    pytest.param("llama", "config", id="string"),
    pytest.param(None, "config", id="none"),
    pytest.param(_without("num_hidden_layers"), "num_hidden_layers", id="missing-layers"),
    pytest.param(_without("num_attention_heads"), "num_attention_heads", id="missing-heads"),
    pytest.param(_without("hidden_size"), "hidden_size", id="missing-hidden"),
    pytest.param(_without("max_position_embeddings"), "max_position_embeddings", id="missing-max-pos"),
    pytest.param(_without("vocab_size"), "vocab_size", id="missing-vocab-for-estimate"),
    pytest.param({**BASE, "num_hidden_layers": 0}, "num_hidden_layers", id="zero-layers"),
    pytest.param({**BASE, "num_hidden_layers": -3}, "num_hidden_layers", id="negative-layers"),
    pytest.param({**BASE, "num_hidden_layers": "32"}, "num_hidden_layers", id="string-layers"),
    pytest.param({**BASE, "num_hidden_layers": True}, "num_hidden_layers", id="bool-layers"),
    pytest.param({**BASE, "num_hidden_layers": 1.5}, "num_hidden_layers", id="fractional-layers"),
    pytest.param({**BASE, "num_hidden_layers": math.nan}, "num_hidden_layers", id="nan-layers"),
    pytest.param({**BASE, "num_hidden_layers": math.inf}, "num_hidden_layers", id="inf-layers"),
    pytest.param({**BASE, "num_hidden_layers": 10**7}, "num_hidden_layers", id="absurd-layers"),
    pytest.param({**BASE, "num_attention_heads": 0}, "num_attention_heads", id="zero-heads"),
    pytest.param({**BASE, "num_key_value_heads": 3}, "num_key_value_heads", id="kv-not-dividing"),
    pytest.param({**BASE, "num_key_value_heads": 0}, "num_key_value_heads", id="zero-kv"),
    pytest.param({**BASE, "head_dim": -1}, "head_dim", id="negative-head-dim"),
    pytest.param({**BASE, "hidden_size": 500}, "head_dim", id="hidden-not-multiple-of-heads"),
    pytest.param({**BASE, "torch_dtype": "float8"}, "torch_dtype", id="unknown-dtype"),
    pytest.param({**BASE, "torch_dtype": 16}, "torch_dtype", id="numeric-dtype"),
    pytest.param({**BASE, "text_config": "abc"}, "text_config", id="text-config-string"),
    pytest.param({**BASE, "layer_types": ["full_attention"]}, "layer_types", id="layer-types-length"),
    pytest.param({**BASE, "layer_types": ["mamba"] * 4}, "layer_types", id="layer-types-unknown"),
    pytest.param({**BASE, "layer_types": "alternating"}, "layer_types", id="layer-types-prose"),
    pytest.param({**BASE, "layer_types": ["sliding_attention"] * 4}, "sliding_window", id="sliding-without-window"),
    pytest.param({**BASE, "sliding_window": 0}, "sliding_window", id="zero-window"),
    pytest.param({**BASE, "use_sliding_window": "yes", "sliding_window": 8}, "use_sliding_window", id="bool-string"),
    pytest.param({**BASE, "kv_lora_rank": 512}, "qk_rope_head_dim", id="mla-without-rope"),
    pytest.param({**BASE, "num_local_experts": 8}, "num_experts_per_tok", id="moe-without-top-k"),
    pytest.param({**BASE, "num_local_experts": 8, "num_experts_per_tok": 9}, "num_experts_per_tok", id="top-k-big"),
    pytest.param({**BASE, "quantization_config": "fp8"}, "quantization_config", id="quant-string"),
    pytest.param({**BASE, "num_experts": 4, "num_experts_per_tok": 2, "mlp_only_layers": 3}, "mlp_only_layers"),
    pytest.param({**BASE, "max_position_embeddings": -1}, "max_position_embeddings", id="negative-max-pos"),
    pytest.param({**BASE, 1: 2}, "config", id="non-string-key"),
]


@pytest.mark.parametrize(("config", "field"), BAD_CONFIGS)
def test_malformed_config_names_the_field(config, field):
    with pytest.raises(SizingInputError) as caught:
        model_spec_from_hf_config(config)
    assert field in caught.value.errors
    assert isinstance(caught.value, ValueError)


def _inputs(**changes):
    fields = {"model": MODELS["llama-3-8b"], "gpu": GPUS["h100-sxm"], **changes}
    return PlanInputs(**fields)


BAD_INPUTS = [
    ({"gpu_memory_utilization": 0}, "gpu_memory_utilization"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
    ({"gpu_memory_utilization": math.nan}, "gpu_memory_utilization"),
    ({"gpu_memory_utilization": True}, "gpu_memory_utilization"),
    ({"max_model_len": 0}, "max_model_len"),
    ({"max_model_len": 20_000_000}, "max_model_len"),
    ({"max_model_len": 16384}, "max_model_len"),  # above Llama 3's 8192 positions
    ({"tensor_parallel_size": 3}, "tensor_parallel_size"),
    ({"tensor_parallel_size": 0}, "tensor_parallel_size"),
    ({"tensor_parallel_size": "2"}, "tensor_parallel_size"),
    ({"pipeline_parallel_size": 64}, "pipeline_parallel_size"),
    ({"tensor_parallel_size": 2, "gpu_count": 3}, "gpu_count"),
    ({"kv_cache_dtype": "fp4"}, "kv_cache_dtype"),
    ({"weight_dtype": "q4_k_m"}, "weight_dtype"),
    ({"weights_gib": -1}, "weights_gib"),
    ({"activation_gib": -0.5}, "activation_gib"),
    ({"non_torch_gib": math.inf}, "non_torch_gib"),
    ({"kv_cache_memory_gib": 0}, "kv_cache_memory_gib"),
    ({"concurrency": 0}, "concurrency"),
    ({"block_size": 24}, "block_size"),
    ({"max_num_batched_tokens": 0}, "max_num_batched_tokens"),
    ({"engine_version": "banana"}, "engine_version"),
    ({"context_rounding": "nearest"}, "context_rounding"),
    ({"target_tpot_ms": -1}, "target_tpot_ms"),
    ({"prompt_tokens": 100, "shared_prefix_tokens": 200}, "shared_prefix_tokens"),
    ({"prompt_tokens": 8000, "output_tokens": 1000}, "prompt_tokens"),
    ({"model": {"num_hidden_layers": 32}}, "model"),
    ({"gpu": "h100"}, "gpu"),
]


@pytest.mark.parametrize(("changes", "field"), BAD_INPUTS, ids=[field for _, field in BAD_INPUTS])
def test_bad_plan_inputs_name_the_field(changes, field):
    with pytest.raises(SizingInputError) as caught:
        compute_plan(_inputs(**changes))
    assert field in caught.value.errors


def test_every_bad_field_is_reported_at_once():
    with pytest.raises(SizingInputError) as caught:
        compute_plan(_inputs(gpu_memory_utilization=2, concurrency=-1, kv_cache_dtype="x"))
    assert {"gpu_memory_utilization", "concurrency", "kv_cache_dtype"} <= set(caught.value.errors)


def test_step_time_rejects_negative_counts():
    plan = compute_plan(_inputs())
    with pytest.raises(SizingInputError):
        step_time_seconds(plan, num_decode_seqs=-1, context_tokens=0, prefill_tokens=0)


CONFIG_KEYS = [
    *BASE,
    "head_dim",
    "text_config",
    "layer_types",
    "sliding_window",
    "use_sliding_window",
    "max_window_layers",
    "sliding_window_pattern",
    "attention_chunk_size",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "q_lora_rank",
    "num_local_experts",
    "n_routed_experts",
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "first_k_dense_replace",
    "decoder_sparse_step",
    "mlp_only_layers",
    "quantization_config",
    "multi_query",
    "tie_word_embeddings",
    "dtype",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.integers(min_value=0, max_value=300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["bfloat16", "float16", "llama", "gemma2", "gemma3_text", "qwen2", "llama4_text", "gpt_oss"]),
    st.sampled_from(["sliding_attention", "full_attention", "chunked_attention"]),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=6), st.dictionaries(st.text(max_size=8), children)),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.booleans(),
    overrides=st.dictionaries(st.sampled_from(CONFIG_KEYS), values, max_size=8),
)
def test_random_configs_raise_only_sizing_input_errors(base, overrides):
    config = {**(BASE if base else {}), **overrides}
    try:
        model = model_spec_from_hf_config(config)
    except SizingInputError as error:
        assert error.errors
        return
    plan_inputs = PlanInputs(model=model, gpu=GPUS["l4"], kv_cache_memory_gib=1)
    try:
        compute_plan(plan_inputs)
    except SizingInputError as error:
        assert error.errors


plan_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=2**33),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["auto", "fp8", "int4", "pow2", "exact", "latest", "0.8", "x"]),
)
PLAN_FIELDS = [
    "gpu_count",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "weight_dtype",
    "kv_cache_dtype",
    "gpu_memory_utilization",
    "block_size",
    "max_num_batched_tokens",
    "weights_gib",
    "activation_gib",
    "non_torch_gib",
    "kv_cache_memory_gib",
    "max_model_len",
    "concurrency",
    "prompt_tokens",
    "output_tokens",
    "shared_prefix_tokens",
    "target_tpot_ms",
    "target_ttft_ms",
    "context_rounding",
    "engine_version",
    "max_num_seqs",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    slug=st.sampled_from(sorted(MODELS)),
    changes=st.dictionaries(st.sampled_from(PLAN_FIELDS), plan_values, max_size=6),
)
def test_random_plan_inputs_raise_only_sizing_input_errors(slug, changes):
    try:
        plan = compute_plan(PlanInputs(model=MODELS[slug], gpu=GPUS["h200"], **changes))
    except SizingInputError as error:
        assert error.errors
        return
    assert plan.num_gpu_blocks >= 0


def _config_paths(node, path=()):
    """Every key and list index inside a config (lists of at most 300 items), as paths from the root."""
    if path:
        yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _config_paths(value, (*path, key))
    elif isinstance(node, list) and len(node) <= 300:
        for index, value in enumerate(node):
            yield from _config_paths(value, (*path, index))


def _real_configs():
    import json
    from pathlib import Path

    folder = Path(__file__).parent / "data" / "hf_configs"
    configs = {}
    for path in sorted(folder.glob("*.json")):
        if "hf_quant" not in path.stem:
            configs[path.stem] = json.loads(path.read_text(encoding="utf-8"))
    return configs


REAL_CONFIGS = _real_configs()
REAL_CONFIG_PATHS = {name: list(_config_paths(config)) for name, config in REAL_CONFIGS.items()}
odd_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "auto", "x", "NaN", "full_attention", "mamba"]),
    st.lists(st.integers(min_value=-2, max_value=200), max_size=4),
    st.dictionaries(st.sampled_from(["a", "no_op", "quant_algo"]), st.integers(), max_size=2),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(sorted(REAL_CONFIGS)))
def test_real_configs_mutated_deep_inside_raise_only_sizing_input_errors(data, name):
    """Every real test config (the 2026 families' nested block_configs, linear_attn_config, compress_ratios,
    hybrid_layer_pattern, quantization configs) with values replaced deep inside: a plan or a SizingInputError with
    a message per field, never another exception (a list in compress_ratios once raised TypeError)."""
    import copy

    config = copy.deepcopy(REAL_CONFIGS[name])
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        path = data.draw(st.sampled_from(REAL_CONFIG_PATHS[name]))
        parent = config
        try:
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = data.draw(odd_values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier replacement removed the path
    try:
        model = model_spec_from_hf_config(config)
        tp = data.draw(st.sampled_from([1, 2, 8]))
        plan = compute_plan(
            PlanInputs(model=model, gpu=GPUS["h200"], tensor_parallel_size=tp, gpu_count=tp, kv_cache_memory_gib=40),
            advice=False,
        )
    except SizingInputError as error:
        assert error.errors and all(isinstance(message, str) and message for message in error.errors.values())
        return
    assert plan.num_gpu_blocks >= 0
