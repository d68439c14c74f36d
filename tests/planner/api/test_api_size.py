"""POST /api/v1/size/ and /api/v1/size/search/: answers equal the engine's, bad input is a per-field 400."""

from __future__ import annotations

import pytest
from django.test import override_settings

from planner.models import GpuProfile, ModelProfile
from planner.sizing import (
    PlanInputs,
    compute_plan,
    custom_gpu,
    model_spec_from_hf_config,
    plan_to_dict,
    search_configurations,
)

SIZE = "/api/v1/size/"
SEARCH = "/api/v1/size/search/"
BASE = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "max_model_len": 32768, "concurrency": 8}
SMALL_CONFIG = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "hidden_size": 512,
    "intermediate_size": 1024,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}

pytestmark = pytest.mark.django_db


def db_inputs(**values: object) -> PlanInputs:
    model = ModelProfile.objects.get(slug=values.pop("model")).spec()
    gpu = GpuProfile.objects.get(slug=values.pop("gpu")).spec()
    return PlanInputs(model=model, gpu=gpu, **values)


def test_size_answer_equals_the_engines_plan(anon, catalog) -> None:
    response = anon.post(SIZE, BASE, format="json")

    assert response.status_code == 200
    assert response.json() == plan_to_dict(compute_plan(db_inputs(**BASE)))


def test_size_answer_has_the_documented_headline_fields(anon, catalog) -> None:
    body = anon.post(SIZE, {**BASE, "tensor_parallel_size": 2}, format="json").json()

    for key in (
        "kv_bytes_per_token",
        "kv_bytes_per_token_per_gpu",
        "weights_bytes",
        "kv_budget_bytes_per_gpu",
        "num_gpu_blocks",
        "kv_capacity_tokens",
        "max_concurrency",
        "max_context_len",
        "fits",
        "concurrency_table",
        "memory_per_gpu",
        "estimates",
        "advice",
        "vllm_command",
        "assumptions",
    ):
        assert key in body
    # Per rank vs per replica: tp 2 splits the KV heads, so one rank holds half of each token.
    assert body["kv_bytes_per_token"] == 2 * body["kv_bytes_per_token_per_gpu"]
    assert body["kv_capacity_tokens"] == body["num_gpu_blocks"] * body["block_size"]
    assert {"concurrency", "max_context_len"} <= set(body["concurrency_table"][0])
    assert "--tensor-parallel-size 2" in body["vllm_command"]


def test_size_passes_every_option_to_the_engine(anon, catalog) -> None:
    options = {
        **BASE,
        "gpu_count": 4,
        "tensor_parallel_size": 2,
        "pipeline_parallel_size": 1,
        "weight_dtype": "fp8",
        "kv_cache_dtype": "fp8",
        "gpu_memory_utilization": 0.85,
        "block_size": 32,
        "max_num_batched_tokens": 4096,
        "engine_version": "0.10",
        "weights_gib": 9.5,
        "activation_gib": 1.5,
        "non_torch_gib": 0.5,
        "context_rounding": "pow2",
        "prompt_tokens": 2000,
        "output_tokens": 500,
        "shared_prefix_tokens": 100,
        "target_tpot_ms": 30.0,
        "target_ttft_ms": 900.0,
    }
    response = anon.post(SIZE, options, format="json")

    assert response.status_code == 200
    assert response.json() == plan_to_dict(compute_plan(db_inputs(**options)))
    assert response.json()["inputs"]["gpu_count"] == 4


def test_fixed_kv_cache_memory_per_gpu(anon, catalog) -> None:
    body = anon.post(SIZE, {**BASE, "kv_cache_memory_gib": 10}, format="json").json()

    assert (
        body["kv_budget_bytes_per_gpu"]
        == plan_to_dict(compute_plan(db_inputs(**BASE, kv_cache_memory_gib=10)))["kv_budget_bytes_per_gpu"]
    )
    assert body["kv_budget_bytes_per_gpu"] <= 10 * 2**30


def test_size_with_a_config_json_and_an_ad_hoc_gpu(anon, db) -> None:
    # Neither the model nor the GPU is in the database: no catalog needed.
    response = anon.post(
        SIZE,
        {"model_config": SMALL_CONFIG, "gpu_memory_gib": 24, "gpu_bandwidth_tbs": 1.0, "max_model_len": 4096},
        format="json",
    )

    assert response.status_code == 200
    expected = compute_plan(
        PlanInputs(
            model=model_spec_from_hf_config(SMALL_CONFIG, name="custom model"),
            gpu=custom_gpu(memory_gib=24, bandwidth_tbs=1.0, bf16_tflops=100.0),
            max_model_len=4096,
        )
    )
    assert response.json() == plan_to_dict(expected)
    assert response.json()["kv_bytes_per_token"] == 2 * 4 * 2 * 64 * 2  # K+V x layers x kv heads x head size x bf16


def test_size_finds_custom_models_in_the_database(anon, catalog) -> None:
    ModelProfile.objects.create(slug="tiny-custom", name="Tiny", config=SMALL_CONFIG)

    response = anon.post(SIZE, {"model": "tiny-custom", "gpu": "l4"}, format="json")

    assert response.status_code == 200
    assert response.json()["inputs"]["model"]["name"] == "Tiny"


def test_an_edited_model_row_is_read_again(anon, catalog) -> None:
    profile = ModelProfile.objects.create(slug="tiny-custom", name="Tiny", config=SMALL_CONFIG)
    first = anon.post(SIZE, {"model": "tiny-custom", "gpu": "l4"}, format="json").json()

    profile.config = {**SMALL_CONFIG, "num_hidden_layers": 8}
    profile.save()
    second = anon.post(SIZE, {"model": "tiny-custom", "gpu": "l4"}, format="json").json()

    assert second["kv_bytes_per_token"] == 2 * first["kv_bytes_per_token"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"concurrency": "many"}, "concurrency"),
        ({"concurrency": -3}, "concurrency"),
        ({"concurrency": 10**12}, "concurrency"),
        ({"max_model_len": 0}, "max_model_len"),
        ({"max_model_len": 2**40}, "max_model_len"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"gpu_memory_utilization": "NaN"}, "gpu_memory_utilization"),
        ({"weights_gib": -1}, "weights_gib"),
        ({"weights_gib": 1e300}, "weights_gib"),
        ({"tensor_parallel_size": 0}, "tensor_parallel_size"),
        ({"tensor_parallel_size": True}, "tensor_parallel_size"),
        ({"kv_cache_dtype": "fp7"}, "kv_cache_dtype"),
        ({"context_rounding": "pow3"}, "context_rounding"),
        ({"block_size": "big"}, "block_size"),
        ({"engine_version": "banana"}, "engine_version"),
        ({"model": "no-such-model"}, "model"),
        ({"gpu": "no-such-gpu"}, "gpu"),
        ({"tensor_parallel_size": 3}, "tensor_parallel_size"),  # 3 does not divide 32 heads
        ({"gpu_count": 3, "tensor_parallel_size": 2}, "gpu_count"),  # not a multiple of tp x pp
        ({"model_config": {"num_hidden_layers": "x"}}, "model"),  # both model and model_config
        ({"gpu_memory_gib": 80}, "gpu"),  # both gpu and gpu_memory_gib
        ({"gpu_bandwidth_tbs": 2.0}, "gpu_bandwidth_tbs"),  # only for an ad-hoc GPU
    ],
)
def test_bad_input_is_a_400_naming_the_field(anon, catalog, change, field) -> None:
    response = anon.post(SIZE, {**BASE, **change}, format="json")

    assert response.status_code == 400
    body = response.json()
    assert field in body, body
    assert isinstance(body[field], list)
    assert all(isinstance(message, str) and message for message in body[field])


def test_unknown_model_and_gpu_are_both_reported(anon, catalog) -> None:
    response = anon.post(SIZE, {**BASE, "model": "gpt-9", "gpu": "tpu-v9"}, format="json")

    assert response.status_code == 400
    assert "gpt-9" in response.json()["model"][0]
    assert "tpu-v9" in response.json()["gpu"][0]


def test_model_and_gpu_are_required(anon, db) -> None:
    response = anon.post(SIZE, {"concurrency": 2}, format="json")

    assert response.status_code == 400
    assert set(response.json()) == {"model", "gpu"}


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"num_hidden_layers": 32},
        {"num_hidden_layers": "many", "num_attention_heads": 32, "hidden_size": 4096},
        {**SMALL_CONFIG, "num_key_value_heads": 3},
        {**SMALL_CONFIG, "num_hidden_layers": -4},
        {**SMALL_CONFIG, "text_config": "oops"},
    ],
)
def test_a_broken_model_config_is_a_400_on_model_config(anon, db, config) -> None:
    response = anon.post(SIZE, {"model_config": config, "gpu_memory_gib": 24}, format="json")

    assert response.status_code == 400
    assert list(response.json()) == ["model_config"]


@pytest.mark.parametrize("body", ["not json", "[1, 2]", "null", '{"model": '])
def test_a_body_that_is_not_an_object_is_a_400(anon, db, body) -> None:
    response = anon.post(SIZE, body, content_type="application/json")

    assert response.status_code == 400


def test_bad_ad_hoc_gpu_figures_are_reported_on_their_fields(anon, db) -> None:
    response = anon.post(
        SIZE, {"model_config": SMALL_CONFIG, "gpu_memory_gib": -2, "gpu_bf16_tflops": 0}, format="json"
    )

    assert response.status_code == 400
    assert set(response.json()) == {"gpu_memory_gib", "gpu_bf16_tflops"}


def test_a_plan_that_does_not_fit_is_an_answer_not_an_error(anon, catalog) -> None:
    response = anon.post(SIZE, {"model": "llama-3.1-405b", "gpu": "l4"}, format="json")

    assert response.status_code == 200
    assert response.json()["fits"] is False
    assert response.json()["problems"]


@override_settings(KVDASH_PUBLIC_SIZING=False)
def test_without_public_sizing_anonymous_callers_get_401(anon, catalog) -> None:
    assert anon.post(SIZE, BASE, format="json").status_code == 401
    assert anon.post(SEARCH, {"model": "llama-3.1-8b"}, format="json").status_code == 401


@override_settings(KVDASH_PUBLIC_SIZING=False)
def test_without_public_sizing_a_token_or_a_session_works(viewer, viewer_user, catalog) -> None:
    from rest_framework.test import APIClient

    assert viewer.post(SIZE, BASE, format="json").status_code == 200
    session = APIClient()
    session.force_login(viewer_user)
    assert session.post(SIZE, BASE, format="json").status_code == 200


def test_a_bad_token_is_a_401(anon, catalog) -> None:
    anon.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")

    assert anon.post(SIZE, BASE, format="json").status_code == 401


def test_size_only_takes_post(anon, catalog) -> None:
    assert anon.get(SIZE).status_code == 405


@override_settings(
    REST_FRAMEWORK={
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "rest_framework.authentication.TokenAuthentication",
            "rest_framework.authentication.SessionAuthentication",
        ],
        "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
        "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
        "DEFAULT_THROTTLE_RATES": {"anon_sizing": "3/min"},
    }
)
def test_anonymous_sizing_is_throttled_but_signed_in_callers_are_not(anon, viewer, catalog) -> None:
    statuses = [anon.post(SIZE, BASE, format="json").status_code for _ in range(4)]

    assert statuses == [200, 200, 200, 429]
    assert anon.post(SEARCH, {"model": "llama-3.1-8b"}, format="json").status_code == 429
    assert all(viewer.post(SIZE, BASE, format="json").status_code == 200 for _ in range(4))


# --- search ---------------------------------------------------------------------------------------------------


def test_search_answers_the_engines_candidates_cheapest_first(anon, catalog) -> None:
    request = {"model": "llama-3.1-70b", "max_model_len": 32768, "concurrency": 8, "limit": 5}
    response = anon.post(SEARCH, request, format="json")

    assert response.status_code == 200
    rows = response.json()
    assert 0 < len(rows) <= 5
    costs = [row["cost_per_hour"] for row in rows if row["cost_per_hour"] is not None]
    assert costs == sorted(costs)
    for row in rows:
        assert row["plan"]["meets_sla"] is True
        assert row["plan"]["inputs"]["gpu"]["slug"] == row["gpu"]
        assert row["plan"]["inputs"]["tensor_parallel_size"] == row["tensor_parallel_size"]
        assert row["plan"]["max_concurrency"] * row["data_parallel_size"] >= 8


def test_search_answer_equals_the_engines_search(anon, catalog) -> None:
    request = {"model": "llama-3.1-8b", "max_model_len": 16384, "concurrency": 32, "max_gpus": 4}
    rows = anon.post(SEARCH, request, format="json").json()

    gpus = [row.spec() for row in GpuProfile.objects.all()]
    inputs = PlanInputs(
        model=ModelProfile.objects.get(slug="llama-3.1-8b").spec(),
        gpu=gpus[0],
        max_model_len=16384,
        concurrency=32,
    )
    expected = search_configurations(inputs, gpus=gpus, max_gpus=4)[:10]
    assert [row["plan"] for row in rows] == [plan_to_dict(candidate.plan) for candidate in expected]
    assert [(row["gpu"], row["gpu_count"]) for row in rows] == [(c.gpu.slug, c.gpu_count) for c in expected]


def test_search_uses_gpus_from_the_database(anon, catalog) -> None:
    GpuProfile.objects.exclude(slug__in=["l4", "a100-80gb"]).delete()

    rows = anon.post(SEARCH, {"model": "llama-3.1-8b", "max_model_len": 8192}, format="json").json()

    assert rows
    assert {row["gpu"] for row in rows} <= {"l4", "a100-80gb"}


def test_search_can_be_limited_to_named_gpus_and_kv_dtypes(anon, catalog) -> None:
    request = {"model": "llama-3.1-8b", "max_model_len": 8192, "gpus": ["l40s"], "kv_dtypes": ["auto"]}
    rows = anon.post(SEARCH, request, format="json").json()

    assert rows
    assert {(row["gpu"], row["kv_cache_dtype"]) for row in rows} == {("l40s", "auto")}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model": "no-such-model"}, "model"),
        ({"gpus": ["no-such-gpu"]}, "gpus"),
        ({"kv_dtypes": ["fp7"]}, "kv_dtypes"),
        ({"max_gpus": 0}, "max_gpus"),
        ({"limit": 1000}, "limit"),
        ({"concurrency": "lots"}, "concurrency"),
    ],
)
def test_search_bad_input_is_a_400_naming_the_field(anon, catalog, change, field) -> None:
    response = anon.post(SEARCH, {"model": "llama-3.1-8b", **change}, format="json")

    assert response.status_code == 400
    assert field in response.json()


@pytest.mark.parametrize("path", [SIZE, SEARCH, "/api/v1/models/import/", "/api/v1/scenarios/"])
def test_a_body_nested_too_deeply_is_a_400(planner, catalog, path) -> None:
    body = '{"model_config": ' + "[" * 100_000 + "]" * 100_000 + "}"

    response = planner.post(path, body, content_type="application/json")

    assert response.status_code == 400


def test_a_100000_layer_config_is_a_quick_400_not_seconds_of_search(anon, catalog) -> None:
    import time

    layers = 100_000
    config = {
        **SMALL_CONFIG,
        "num_hidden_layers": layers,
        "sliding_window": 1024,
        "layer_types": ["sliding_attention" if i % 2 else "full_attention" for i in range(layers)],
    }
    start = time.perf_counter()
    response = anon.post(SEARCH, {"model_config": config, "concurrency": 8}, format="json")

    assert time.perf_counter() - start < 2.0
    assert response.status_code == 400
    assert "num_hidden_layers: must be at most 256" in response.json()["model_config"][0]


def test_a_pasted_config_serves_the_repo_it_came_from_not_custom_model(anon, db) -> None:
    body = {"model_config": SMALL_CONFIG, "gpu_memory_gib": 24, "max_model_len": 4096}
    plain = anon.post(SIZE, body, format="json").json()
    assert plain["vllm_command"].startswith("vllm serve <hf-repo-id> --tensor-parallel-size 1")
    assert "custom model" not in plain["vllm_command"]
    assert any("<hf-repo-id>" in warning for warning in plain["warnings"])
    named = anon.post(SIZE, {**body, "model_hf_id": "acme/tiny-llama"}, format="json").json()
    assert named["vllm_command"].startswith("vllm serve acme/tiny-llama --tensor-parallel-size 1")
    saved_by_transformers = {**SMALL_CONFIG, "_name_or_path": "acme/tiny-llama-2"}
    kept = anon.post(SIZE, {**body, "model_config": saved_by_transformers}, format="json").json()
    assert kept["vllm_command"].startswith("vllm serve acme/tiny-llama-2 ")
    bad = anon.post(SIZE, {**body, "model_hf_id": "not a repo; rm -rf /"}, format="json")
    assert bad.status_code == 400 and "model_hf_id" in bad.json()


def test_search_puts_an_unpriced_gpu_last_and_says_why(anon, catalog) -> None:
    GpuProfile.objects.create(
        slug="own-h200", name="Our own H200", memory_bytes=150_119_844_413, bandwidth_tbs=4.8, bf16_tflops=989.4
    )
    request = {"model": "llama-3.1-8b", "max_model_len": 8192, "concurrency": 4, "gpus": ["own-h200", "h100-sxm"]}
    rows = anon.post(SEARCH, {**request, "limit": 50}, format="json").json()
    slugs = [row["gpu"] for row in rows]
    assert "own-h200" in slugs and slugs.index("own-h200") > max(i for i, s in enumerate(slugs) if s == "h100-sxm")
    own = next(row for row in rows if row["gpu"] == "own-h200")
    assert own["cost_per_hour"] is None
    assert own["price_note"] == "Our own H200 has no price: ranked after every priced configuration, by GPU memory"
    assert rows[0]["price_note"] == ""


def test_catalog_gpus_carry_their_price_source_and_date(anon, catalog) -> None:
    body = anon.get("/api/v1/gpus/h100-sxm/").json()
    assert (body["price_per_hour"], body["price_date"]) == (4.76, "2026-03-10")
    assert body["price_source"].startswith("https://deploybase.ai/articles/runpod-gpu-pricing")


def test_a_deep_models_layer_pattern_is_answered_as_runs_not_per_layer(anon, catalog) -> None:
    layers = 256
    config = {
        **SMALL_CONFIG,
        "num_hidden_layers": layers,
        "sliding_window": 1024,
        "layer_types": ["sliding_attention" if i % 2 else "full_attention" for i in range(layers)],
    }
    response = anon.post(SEARCH, {"model_config": config, "concurrency": 8, "limit": 5}, format="json")

    assert response.status_code == 200
    patterns = [row["plan"]["inputs"]["model"]["layer_pattern"] for row in response.json()]
    assert patterns and all(pattern == [{"unit": [0, 1], "repeat": 128}] for pattern in patterns)

    sized = anon.post(SIZE, {"model_config": config, "gpu": "h100-sxm", "concurrency": 8}, format="json")
    assert sized.status_code == 200
    assert sized.json()["inputs"]["model"]["layer_pattern"] == [{"unit": [0, 1], "repeat": 128}]
