"""ModelSpec derivation from HF config.json: heads, head size, attention kind, per-layer kinds, dtype."""

from __future__ import annotations

import pytest

from planner.sizing import catalog_data, catalog_gpus, catalog_models, model_spec_from_hf_config

ENTRIES = {entry["slug"]: entry for entry in catalog_data()["models"]}
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


def _spec(**changes):
    return model_spec_from_hf_config({**BASE, **changes})


def _kinds(model):
    return [model.layer_groups[i].kind for i in model.layer_pattern]


def test_required_slugs_exist():
    models, gpus = catalog_models(), catalog_gpus()
    for slug in ("llama-3-8b", "llama-3-70b", "llama-3.1-8b", "llama-3.1-70b", "qwen3-8b", "mistral-7b", "deepseek-v3"):
        assert slug in models
    for slug in ("rtx-4090", "a100-80gb", "h100-sxm", "h200"):
        assert slug in gpus
    # 19 from the reference catalog, 8 hybrid / sparse / compressed-attention models of 2026 (issue 14).
    for slug in (
        "qwen3-next-80b-a3b",
        "qwen3.5-27b",
        "qwen3.5-35b-a3b",
        "nemotron-3-nano-30b-a3b",
        "nemotron-3-super-120b-a12b-fp8",
        "deepseek-v3.2",
        "deepseek-v4-flash",
        "gemma-4-26b-a4b",
    ):
        assert slug in models
    assert len(models) == 29
    assert len(gpus) == 13


def test_catalog_entries_carry_sources_and_real_configs():
    data = catalog_data()
    for entry in data["models"] + data["gpus"]:
        assert entry["source"]
        assert "notes" in entry or "memory_usable_note" in entry
    for entry in data["models"]:
        layer_types = entry["config"].get("layer_types", entry["config"].get("text_config", {}).get("layer_types"))
        assert layer_types is None or isinstance(layer_types, list)
    prices = {entry["slug"]: entry["price_per_hour"] for entry in data["gpus"]}
    assert prices["h100-sxm"] == 4.76  # RunPod on-demand, March 2026
    assert prices["rtx-4090"] == 0.60


def test_catalog_data_is_a_copy():
    catalog_data()["models"].clear()
    assert catalog_data()["models"]


def test_head_size_and_attention_kind():
    assert (_spec().head_size, _spec().attention_kind) == (64, "GQA")
    assert _spec(num_key_value_heads=None).attention_kind == "MHA"
    mha = _spec()
    del_kv = dict(BASE)
    del del_kv["num_key_value_heads"]
    assert model_spec_from_hf_config(del_kv).num_kv_heads == 8
    assert _spec(num_key_value_heads=1).attention_kind == "MQA"
    assert _spec(head_dim=128).head_size == 128
    assert _spec(head_dim=None).head_size == 64
    assert mha.num_kv_heads == 2
    falcon = dict(del_kv, multi_query=True)
    assert model_spec_from_hf_config(falcon).num_kv_heads == 1


def test_mla_head_size_is_the_latent():
    model = catalog_models()["deepseek-v2-lite"]
    assert (model.attention_kind, model.num_kv_heads, model.head_size) == ("MLA", 1, 576)
    assert model.kv_lora_rank == 512
    assert model.qk_rope_head_dim == 64


def test_multimodal_text_config_is_read():
    gemma3 = catalog_models()["gemma-3-27b"]
    assert ENTRIES["gemma-3-27b"]["config"]["text_config"]["num_hidden_layers"] == 62
    assert gemma3.num_layers == 62
    assert gemma3.tie_word_embeddings
    kinds = _kinds(gemma3)
    assert [i for i, kind in enumerate(kinds) if kind == "full"] == list(range(5, 62, 6))
    assert kinds.count("sliding_window") == 52


def test_gemma2_alternates_starting_with_sliding():
    kinds = _kinds(catalog_models()["gemma-2-9b"])
    assert kinds[:4] == ["sliding_window", "full", "sliding_window", "full"]
    assert kinds.count("full") == 21


def test_gpt_oss_layer_types_list():
    model = catalog_models()["gpt-oss-20b"]
    assert _kinds(model)[:2] == ["sliding_window", "full"]
    assert model.layer_groups[0].window == 128
    assert model.quantization == "mxfp4"


def test_llama4_every_fourth_layer_is_global():
    model = catalog_models()["llama-4-scout"]
    kinds = _kinds(model)
    assert [i for i, kind in enumerate(kinds) if kind == "full"] == list(range(3, 48, 4))
    assert model.layer_groups[0] == type(model.layer_groups[0])("chunked_local", 36, 8192)


def test_qwen_sliding_window_is_off_unless_use_sliding_window():
    assert catalog_models()["qwen2.5-7b"].layer_groups[0].kind == "full"
    on = _spec(model_type="qwen2", sliding_window=1024, use_sliding_window=True, max_window_layers=2)
    assert _kinds(on) == ["full", "full", "sliding_window", "sliding_window"]


def test_mistral_sliding_window_null_is_full_and_set_applies_everywhere():
    assert catalog_models()["mistral-7b"].layer_groups[0].kind == "full"
    v01 = _spec(model_type="mistral", sliding_window=4096)
    assert _kinds(v01) == ["sliding_window"] * 4
    phi3 = catalog_models()["phi-3-mini-4k"]
    assert phi3.layer_groups[0].kind == "sliding_window"
    assert phi3.layer_groups[0].window == 2047


def test_hf_layer_types_strings():
    model = _spec(
        layer_types=["sliding_attention", "full_attention", "chunked_attention", "full_attention"],
        sliding_window=512,
        attention_chunk_size=1024,
    )
    assert _kinds(model) == ["sliding_window", "full", "chunked_local", "full"]
    assert {g.kind: g.window for g in model.layer_groups} == {
        "sliding_window": 512,
        "full": None,
        "chunked_local": 1024,
    }


@pytest.mark.parametrize(
    ("value", "expected"), [("bfloat16", "bfloat16"), ("float16", "float16"), ("float32", "float32")]
)
def test_dtype_from_torch_dtype_or_dtype(value, expected):
    assert _spec(torch_dtype=value).dtype == expected
    no_torch_dtype = {k: v for k, v in BASE.items() if k != "torch_dtype"}
    assert model_spec_from_hf_config({**no_torch_dtype, "dtype": value}).dtype == expected


def test_missing_dtype_is_assumed_bfloat16_and_noted():
    model = model_spec_from_hf_config({k: v for k, v in BASE.items() if k != "torch_dtype"})
    assert model.dtype == "bfloat16"
    assert any("assumed bfloat16" in note for note in model.notes)


def test_given_counts_win_over_the_estimate():
    model = model_spec_from_hf_config(BASE, num_params=5_000_000, num_active_params=4_000_000, hf_id="org/x")
    assert (model.num_params, model.num_active_params, model.params_estimated) == (5_000_000, 4_000_000, False)
    assert model.name == "org/x"
