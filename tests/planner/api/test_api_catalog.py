"""/api/v1/models/ and /api/v1/gpus/: the catalog by slug, and POST /api/v1/models/import/."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from planner.models import GpuProfile, ModelProfile
from planner.sizing import catalog_gpus, catalog_models

MODELS = "/api/v1/models/"
GPUS = "/api/v1/gpus/"
IMPORT = "/api/v1/models/import/"
QWEN_LIKE = {
    "model_type": "qwen3",
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}
MLA_CONFIG = {
    "model_type": "deepseek_v2",
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "vocab_size": 102400,
    "max_position_embeddings": 163840,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "torch_dtype": "bfloat16",
}

pytestmark = pytest.mark.django_db


def test_models_list_is_the_database_catalog(anon, catalog) -> None:
    response = anon.get(MODELS, {"page": 1})

    assert response.status_code == 200
    slugs = {item["slug"] for item in response.json()["results"]}
    assert slugs == set(catalog_models())
    assert "config" not in response.json()["results"][0]


def test_model_detail_has_config_and_derived_shape(anon, catalog) -> None:
    response = anon.get(f"{MODELS}llama-3.1-8b/")

    assert response.status_code == 200
    body = response.json()
    assert body["config"]["num_hidden_layers"] == 32
    shape = body["shape"]
    assert (shape["num_layers"], shape["num_attention_heads"], shape["num_kv_heads"], shape["head_size"]) == (
        32,
        32,
        8,
        128,
    )
    assert shape["attention_kind"] == "GQA"
    assert shape["layer_groups"] == [
        {"kind": "full", "num_layers": 32, "window": None, "head_size": None, "num_kv_heads": None, "head_size_v": None}
    ]
    assert shape["kv_bytes_per_token_bf16"] == 2 * 32 * 8 * 128 * 2  # the figure everyone quotes: 128 KiB
    assert shape["num_params"] == 8_000_000_000


def test_a_model_whose_config_broke_still_reads_with_a_null_shape(anon, catalog) -> None:
    ModelProfile.objects.filter(slug="mistral-7b").update(config={"num_hidden_layers": "x"})

    response = anon.get(f"{MODELS}mistral-7b/")

    assert response.status_code == 200
    assert response.json()["shape"] is None


def test_gpus_list_and_detail(anon, catalog) -> None:
    listing = anon.get(GPUS).json()
    assert {item["slug"] for item in listing["results"]} == set(catalog_gpus())

    h100 = anon.get(f"{GPUS}h100-sxm/").json()
    assert h100["memory_bytes"] == GpuProfile.objects.get(slug="h100-sxm").memory_bytes
    assert h100["memory_gib"] == pytest.approx(h100["memory_bytes"] / 2**30)
    assert h100["bandwidth_tbs"] > 3


@pytest.mark.parametrize("path", [f"{MODELS}no-such-model/", f"{GPUS}no-such-gpu/", f"{MODELS}a%00b/"])
def test_unknown_slugs_are_404(anon, catalog, path) -> None:
    assert anon.get(path).status_code == 404


@override_settings(KVDASH_PUBLIC_SIZING=False)
def test_catalog_reads_need_a_user_when_sizing_is_not_public(anon, viewer, catalog) -> None:
    assert anon.get(MODELS).status_code == 401
    assert anon.get(f"{GPUS}l4/").status_code == 401
    assert viewer.get(MODELS).status_code == 200
    assert viewer.get(f"{GPUS}l4/").status_code == 200


def test_the_catalog_is_read_only(planner, catalog) -> None:
    assert planner.post(MODELS, {"slug": "x"}, format="json").status_code == 405
    assert planner.delete(f"{GPUS}l4/").status_code == 405
    assert GpuProfile.objects.filter(slug="l4").exists()


# --- import ---------------------------------------------------------------------------------------------------


def test_import_preview_answers_the_shape_and_saves_nothing(anon, db) -> None:
    response = anon.post(IMPORT, {"config": QWEN_LIKE}, format="json")

    assert response.status_code == 200
    body = response.json()
    assert body["saved"] is False
    assert body["model"] is None
    assert body["shape"]["num_layers"] == 36
    assert body["shape"]["kv_bytes_per_token_bf16"] == 2 * 36 * 8 * 128 * 2
    assert body["shape"]["params_estimated"] is True
    assert not ModelProfile.objects.exists()


def test_import_reads_mla(anon, db) -> None:
    shape = anon.post(IMPORT, {"config": MLA_CONFIG}, format="json").json()["shape"]

    assert shape["attention_kind"] == "MLA"
    assert shape["num_kv_heads"] == 1
    assert shape["head_size"] == 512 + 64
    assert shape["kv_bytes_per_token_bf16"] == 27 * (512 + 64) * 2


def test_a_planner_saves_an_import_as_a_custom_model(planner, planner_user, catalog) -> None:
    request = {
        "config": QWEN_LIKE,
        "name": "Our Qwen fine-tune",
        "hf_id": "acme/qwen-ft",
        "params_b": 8.2,
        "save": True,
    }
    response = planner.post(IMPORT, request, format="json")

    assert response.status_code == 201
    assert response.json()["saved"] is True
    assert response.json()["model"]["slug"] == "our-qwen-fine-tune"
    profile = ModelProfile.objects.get(slug="our-qwen-fine-tune")
    assert (profile.config, profile.hf_id, profile.params_b, profile.is_catalog) == (
        QWEN_LIKE,
        "acme/qwen-ft",
        8.2,
        False,
    )
    assert profile.created_by == planner_user
    assert response.json()["shape"]["num_params"] == 8_200_000_000
    # ... and it can be sized straight away.
    sized = planner.post("/api/v1/size/", {"model": "our-qwen-fine-tune", "gpu": "l40s"}, format="json")
    assert sized.status_code == 200


def test_import_save_needs_the_planner_role(anon, viewer, db) -> None:
    request = {"config": QWEN_LIKE, "slug": "mine", "save": True}

    assert anon.post(IMPORT, request, format="json").status_code == 401
    assert viewer.post(IMPORT, request, format="json").status_code == 403
    assert not ModelProfile.objects.exists()


def test_import_refuses_a_slug_in_use(planner, catalog) -> None:
    before = ModelProfile.objects.get(slug="qwen3-8b").config

    response = planner.post(IMPORT, {"config": QWEN_LIKE, "slug": "qwen3-8b", "save": True}, format="json")

    assert response.status_code == 400
    assert "slug" in response.json()
    assert ModelProfile.objects.get(slug="qwen3-8b").config == before


@pytest.mark.parametrize(
    ("request_body", "field"),
    [
        ({}, "config"),
        ({"config": "not an object"}, "config"),
        ({"config": {}}, "config"),
        ({"config": {"num_hidden_layers": 2}}, "config"),
        ({"config": {**QWEN_LIKE, "num_key_value_heads": 5}}, "config"),
        ({"config": QWEN_LIKE, "slug": "has spaces", "save": True}, "slug"),
        ({"config": QWEN_LIKE, "params_b": -1}, "params_b"),
        ({"config": QWEN_LIKE, "save": "perhaps"}, "save"),
    ],
)
def test_import_bad_input_is_a_400_naming_the_field(planner, db, request_body, field) -> None:
    response = planner.post(IMPORT, request_body, format="json")

    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not ModelProfile.objects.exists()


def test_import_refuses_nul_characters_in_the_config(planner, db) -> None:
    # PostgreSQL's jsonb cannot hold NUL: refused as input instead of failing on save.
    response = planner.post(
        IMPORT, {"config": {**QWEN_LIKE, "architectures": ["Qwen\x00"]}, "save": True}, format="json"
    )

    assert response.status_code == 400
    assert "config" in response.json()
    assert not ModelProfile.objects.exists()


def _raw_import(client, config_json: str, **fields: object) -> object:
    body = '{"config": ' + config_json + "".join(f', "{k}": {json.dumps(v)}' for k, v in fields.items()) + "}"
    return client.post(IMPORT, body, content_type="application/json")


@pytest.mark.parametrize(
    ("raw_value", "message"),
    [
        ('"\\ud800"', "lone surrogate"),
        ('"a\\u0000"', "NUL"),
        ('{"a": ' * 100 + "1" + "}" * 100, "nested more than 32 levels deep"),
    ],
)
@pytest.mark.parametrize("save", [False, True])
def test_import_refuses_what_postgresql_cannot_store_with_a_400(planner, db, raw_value, message, save) -> None:
    config_json = json.dumps(QWEN_LIKE)[:-1] + f', "extra": {raw_value}}}'
    response = _raw_import(planner, config_json, save=save)

    assert response.status_code == 400
    assert message in response.json()["config"][0]
    assert not ModelProfile.objects.exists()


@pytest.mark.parametrize("save", [False, True])
def test_import_of_a_config_nested_900_deep_is_a_400(planner, db, save) -> None:
    config_json = json.dumps(QWEN_LIKE)[:-1] + ', "extra": ' + '{"a": ' * 900 + "1" + "}" * 900 + "}"
    response = _raw_import(planner, config_json, save=save)

    # Depending on the stack depth at hand the JSON parser gives up first ("nested too deeply") or the config
    # check does ("nested more than 32 levels deep"): a 400 either way.
    assert response.status_code == 400
    assert "nested" in json.dumps(response.json())
    assert not ModelProfile.objects.exists()


def test_import_refuses_a_lone_surrogate_in_the_name(planner, db) -> None:
    response = _raw_import(planner, json.dumps(QWEN_LIKE), save=True, name="\ud800")

    assert response.status_code == 400
    assert "name" in response.json()
    assert not ModelProfile.objects.exists()


@pytest.mark.parametrize("slug", [".", "..", ".hidden", "-x"])
def test_import_refuses_slugs_that_are_not_names(planner, db, slug) -> None:
    response = planner.post(IMPORT, {"config": QWEN_LIKE, "slug": slug, "save": True}, format="json")

    assert response.status_code == 400
    assert "slug" in response.json()
    assert not ModelProfile.objects.exists()


def test_import_of_a_taken_name_without_a_slug_is_numbered_like_the_page(planner, db) -> None:
    slugs = [
        planner.post(IMPORT, {"config": QWEN_LIKE, "name": "Twin", "save": True}, format="json").json()["model"]["slug"]
        for _ in range(3)
    ]

    assert slugs == ["twin", "twin-2", "twin-3"]


def test_import_stores_1e400_in_a_config_as_a_string(planner, db) -> None:
    config_json = json.dumps(QWEN_LIKE)[:-1] + ', "extra": [1e400]}'
    response = _raw_import(planner, config_json, save=True, slug="big-number")

    assert response.status_code == 201
    profile = ModelProfile.objects.get(slug="big-number")
    profile.refresh_from_db()
    assert profile.config["extra"] == ["Infinity"]
