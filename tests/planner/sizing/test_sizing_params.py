"""Parameter counts estimated from config shapes against the catalog's official and computed counts."""

from __future__ import annotations

import pytest

from planner.sizing import catalog_data, catalog_models, model_spec_from_hf_config

ENTRIES = {entry["slug"]: entry for entry in catalog_data()["models"]}
# "7B" is Mistral's class name, not a count: the checkpoint holds 7.248B (catalog notes).
ROUNDED_CLASS_NAMES = {"mistral-7b"}


@pytest.mark.parametrize("slug", sorted(ENTRIES))
def test_estimate_is_within_3_percent_of_the_official_count(slug):
    entry = ENTRIES[slug]
    estimate = model_spec_from_hf_config(entry["config"])
    assert estimate.params_estimated
    billions = estimate.num_params / 1e9
    assert billions == pytest.approx(entry["params_computed_from_config"], rel=0.03)
    if slug not in ROUNDED_CLASS_NAMES:
        assert billions == pytest.approx(entry["params_b"], rel=0.03)


@pytest.mark.parametrize("slug", sorted(slug for slug, entry in ENTRIES.items() if entry["params_active_b"]))
def test_moe_active_estimate_is_within_3_percent(slug):
    entry = ENTRIES[slug]
    estimate = model_spec_from_hf_config(entry["config"])
    assert estimate.is_moe
    assert estimate.num_active_params / 1e9 == pytest.approx(entry["params_active_computed_from_config"], rel=0.03)
    assert estimate.num_active_params < estimate.num_params


def test_catalog_models_use_the_larger_of_official_and_computed_counts():
    models = catalog_models()
    assert not models["llama-3-8b"].params_estimated
    assert models["mistral-7b"].num_params == 7_248_000_000
    assert models["llama-4-scout"].num_params == 109_000_000_000  # official count includes the vision tower
    assert models["deepseek-v3"].num_active_params == 37_552_000_000


def test_dense_models_are_not_moe():
    models = catalog_models()
    assert not models["qwen3-8b"].is_moe
    assert models["qwen3-8b"].num_active_params == models["qwen3-8b"].num_params
    assert models["mixtral-8x7b"].is_moe
