"""Bad input on the planner pages is a 4xx or a field error, never a 500 (on PostgreSQL too: NUL, lone
surrogates and non-finite numbers are what PostgreSQL refuses to store or compare)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from planner_factories import ScenarioFactory

from planner.models import ModelProfile, Scenario

CREATE = reverse("planner:model-create")
IMPORT = reverse("planner:scenario-import")
CONFIG = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}


def _config_with(raw_value: str) -> str:
    """CONFIG as JSON text with one more key whose value is ``raw_value`` written as is (not json.dumps'd)."""
    return json.dumps(CONFIG)[:-1] + f', "extra": {raw_value}}}'


DEEP = '{"a": ' * 900 + "1" + "}" * 900


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/planner/?q=%00", "q"),
        ("/planner/?model=%00", "model"),
        ("/planner/?gpu=llama%00", "gpu"),
        ("/planner/models/llama%00/", None),
        ("/planner/scenarios/new/?model=%00", "model"),
    ],
)
def test_nul_in_an_address_is_a_4xx_that_says_so(planner_client, catalog, path, field):
    response = planner_client.get(path)
    assert response.status_code == (400 if field else 404)
    text = response.content.decode()
    assert "NUL" in text
    if field:
        assert repr(field) in text


@pytest.mark.django_db
def test_nul_in_an_api_query_is_a_json_400(planner_client, catalog):
    response = planner_client.get("/api/v1/scenarios/?search=%00")
    assert response.status_code == 400
    assert "NUL" in response.json()["search"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("raw_value", "message"),
    [
        ('"a\\u0000b"', "NUL"),
        ('"\\ud800"', "lone surrogate"),
        ('{"\\udfff": 1}', "lone surrogate"),
        # The config check refuses it (nested more than 32 levels deep), or the JSON reader first when the stack
        # is already deep (nested too deeply).
        (DEEP, "nested"),
        ('{"a": ' * 100 + "1" + "}" * 100, "nested more than 32 levels deep"),
    ],
)
def test_a_config_postgresql_cannot_store_is_a_field_error_on_check_and_save(
    planner_client, catalog, raw_value, message
):
    before = ModelProfile.objects.count()
    for button in ("check", "save"):
        response = planner_client.post(CREATE, {"name": "odd", "config_text": _config_with(raw_value), button: "1"})
        assert response.status_code == 200
        errors = response.context["form"].errors["config_text"]
        assert any(message in error for error in errors), errors
    assert ModelProfile.objects.count() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    "document",
    [
        {"name": "ok", "model": "llama-3.1-8b\x00", "gpu": "h100-sxm"},
        {"name": "ok", "model": "llama-3.1-8b", "gpu": "h100-sxm\x00"},
        {"name": "bad\x00name", "model": "llama-3.1-8b", "gpu": "h100-sxm"},
        {"name": "\ud800", "model": "llama-3.1-8b", "gpu": "h100-sxm"},
        {"name": "ok", "model": "llama-3.1-8b", "gpu": "h100-sxm", "notes": "\udc00"},
        {"name": "ok", "model": "\ud83d", "gpu": "h100-sxm"},
    ],
)
def test_nul_or_a_lone_surrogate_in_an_imported_scenario_is_a_field_error(planner_client, catalog, document):
    # json.dumps writes NUL as \u0000 and a lone surrogate as \ud800: valid JSON, text PostgreSQL cannot hold.
    response = planner_client.post(IMPORT, {"document": json.dumps(document)})
    assert response.status_code == 200
    errors = response.context["form"].errors["document"]
    assert any("NUL" in error or "lone surrogate" in error for error in errors), errors
    assert not Scenario.objects.exists()


DEEP_CONFIG = json.loads(DEEP)


@pytest.mark.django_db
def test_a_deep_config_stored_before_the_checks_does_not_break_model_lists(client, catalog):
    # Rows written before this check existed (or by hand) may still hold one: listing models never decodes configs.
    # bulk_create: past ModelProfile.save, as an old row or a hand-written one would be.
    (deep,) = ModelProfile.objects.bulk_create(
        [ModelProfile(slug="deep", name="Deep", config={**CONFIG, "extra": DEEP_CONFIG})]
    )
    admin = User.objects.create_superuser("root", "root@example.com", "x")
    ScenarioFactory(owner=admin, model=ModelProfile.objects.get(slug="llama-3.1-8b"))
    client.force_login(admin)
    for path in (
        "/admin/planner/scenario/",
        "/admin/planner/scenario/add/",
        f"/admin/planner/scenario/{Scenario.objects.get().pk}/change/",
        "/admin/planner/modelprofile/",
        "/planner/scenarios/new/",
        "/planner/",
        "/planner/models/",
    ):
        response = client.get(path)
        assert response.status_code == 200, path
        assert "Deep" in response.content.decode(), path
    listing = client.get("/api/v1/models/?page_size=100")
    assert listing.status_code == 200
    assert "deep" in [row["slug"] for row in listing.json()["results"]]
    assert deep.pk


@pytest.mark.django_db
def test_the_admin_refuses_a_deep_config_too(client, catalog):
    admin = User.objects.create_superuser("root", "root@example.com", "x")
    client.force_login(admin)
    deep = json.dumps({**CONFIG, "extra": json.loads('{"a": ' * 100 + "1" + "}" * 100)})
    response = client.post(
        "/admin/planner/modelprofile/add/", {"slug": "deep", "name": "Deep", "config": deep, "source": "", "notes": ""}
    )
    assert response.status_code == 200
    assert "nested more than 32 levels deep" in response.content.decode()
    assert not ModelProfile.objects.filter(slug="deep").exists()


@pytest.mark.django_db
def test_non_finite_numbers_in_a_pasted_config_are_saved_as_strings(planner_client, catalog):
    # Real configs hold JSON's Infinity (Nemotron-H's time_step_limit); PostgreSQL's jsonb has no such number,
    # so the saved config keeps it as text instead of failing on save.
    text = json.dumps(CONFIG)[:-1] + ', "limits": [NaN, Infinity, -Infinity, 1e400]}'
    response = planner_client.post(CREATE, {"name": "odd numbers", "config_text": text, "save": "1"})
    assert response.status_code == 302
    saved = ModelProfile.objects.get(slug="odd-numbers")
    saved.refresh_from_db()
    assert saved.config["limits"] == ["NaN", "Infinity", "-Infinity", "Infinity"]
