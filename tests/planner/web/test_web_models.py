"""Custom models from a pasted or uploaded HF config.json: validated by the engine, shape shown back."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from planner_factories import UserFactory

from planner.models import ModelProfile

CREATE = reverse("planner:model-create")
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


def shape(response) -> dict[str, str]:
    return dict(response.context["shape"])


@pytest.mark.django_db
def test_check_shows_the_derived_shape_without_saving(planner_client, catalog):
    before = ModelProfile.objects.count()
    response = planner_client.post(CREATE, {"name": "My Llama", "config_text": json.dumps(CONFIG), "check": "1"})
    assert response.status_code == 200
    derived = shape(response)
    assert derived["Attention"] == "GQA"
    assert derived["Layers"] == "32"
    assert derived["KV heads (cached)"] == "8"
    assert derived["Head size (cached)"] == "128"
    assert derived["Parameters"].endswith("(estimated)")
    assert ModelProfile.objects.count() == before


@pytest.mark.django_db
def test_save_stores_a_custom_model_with_a_unique_slug(planner_client, planner_user, catalog):
    data = {"name": "My Llama", "config_text": json.dumps(CONFIG), "params_b": "8", "save": "1"}
    first = planner_client.post(CREATE, data)
    second = planner_client.post(CREATE, data)
    assert first.status_code == second.status_code == 302
    models = ModelProfile.objects.filter(name="My Llama").order_by("pk")
    assert [m.slug for m in models] == ["my-llama", "my-llama-2"]
    model = models[0]
    assert (model.is_catalog, model.created_by, model.params_b, model.config) == (False, planner_user, 8.0, CONFIG)
    assert first["Location"] == reverse("planner:model-detail", args=["my-llama"])
    page = planner_client.get(first["Location"])
    assert dict(page.context["shape"])["Parameters"] == "8.00 B"
    # It can be planned with straight away.
    assert '<option value="my-llama"' in planner_client.get(reverse("planner:scenario-create")).content.decode()


@pytest.mark.django_db
def test_an_uploaded_config_is_read_and_echoed_into_the_text_box(planner_client, catalog):
    upload = SimpleUploadedFile("config.json", json.dumps({"text_config": CONFIG}).encode())
    response = planner_client.post(CREATE, {"name": "Nested", "config_file": upload, "check": "1"})
    assert shape(response)["Layers"] == "32"
    assert json.loads(response.context["form"]["config_text"].value()) == {"text_config": CONFIG}


@pytest.mark.django_db
def test_a_chosen_slug_that_is_taken_is_a_field_error(planner_client, catalog):
    response = planner_client.post(
        CREATE, {"name": "x", "slug": "qwen3-8b", "config_text": json.dumps(CONFIG), "save": "1"}
    )
    assert response.status_code == 200
    assert response.context["form"].errors["slug"] == ["a model 'qwen3-8b' exists already"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("config_text", "message"),
    [
        ("", "Paste the JSON or upload a file."),
        ("{broken", "Not valid JSON"),
        ("[]", "must be a JSON object"),
        ('"just a string"', "must be a JSON object"),
        (json.dumps({**CONFIG, "num_key_value_heads": 5}), "num_key_value_heads: 5 KV heads do not divide 32"),
        (json.dumps({**CONFIG, "num_hidden_layers": -4}), "num_hidden_layers"),
        (json.dumps({**CONFIG, "num_hidden_layers": "many"}), "num_hidden_layers"),
        (json.dumps({"model_type": "llama"}), "num_attention_heads: missing from the config"),
        ("[" * 5000 + "]" * 5000, "Not valid JSON"),
    ],
)
def test_a_broken_config_is_a_field_error_and_nothing_is_saved(planner_client, catalog, config_text, message):
    before = ModelProfile.objects.count()
    response = planner_client.post(CREATE, {"name": "broken", "config_text": config_text, "save": "1"})
    assert response.status_code == 200
    errors = response.context["form"].errors["config_text"]
    assert any(message in error for error in errors), errors
    assert ModelProfile.objects.count() == before


@pytest.mark.django_db
def test_parameter_counts_are_checked(planner_client, catalog):
    response = planner_client.post(
        CREATE, {"name": "x", "config_text": json.dumps(CONFIG), "params_b": "-1", "save": "1"}
    )
    assert "params_b" in response.context["form"].errors


@pytest.mark.django_db
def test_viewers_read_models_but_may_not_add_them(client, catalog):
    client.force_login(UserFactory(username="reader"))
    assert client.get(CREATE).status_code == 403
    listing = client.get(reverse("planner:model-list"))
    assert "Qwen3 8B" in listing.content.decode()
    detail = client.get(reverse("planner:model-detail", args=["llama-3.1-8b"]))
    assert detail.status_code == 200
    assert dict(detail.context["shape"])["Attention"] == "GQA"


@pytest.mark.django_db
def test_a_stored_model_the_engine_rejects_shows_its_errors(viewer_client, catalog):
    ModelProfile.objects.filter(slug="qwen3-8b").update(config={"model_type": "qwen3"})
    response = viewer_client.get(reverse("planner:model-detail", args=["qwen3-8b"]))
    assert response.status_code == 200
    assert "num_attention_heads" in response.context["spec_errors"]


@pytest.mark.django_db
def test_a_saved_config_keeps_the_repo_it_names_for_vllm_serve(planner_client, catalog):
    config = {**CONFIG, "_name_or_path": "acme/my-llama"}
    response = planner_client.post(CREATE, {"name": "From a repo", "config_text": json.dumps(config), "save": "1"})
    assert response.status_code == 302
    profile = ModelProfile.objects.get(name="From a repo")
    assert profile.hf_id == "acme/my-llama"
    assert profile.spec().hf_id == "acme/my-llama"
    bad = planner_client.post(CREATE, {"name": "x", "hf_id": "no repo", "config_text": json.dumps(CONFIG), "save": "1"})
    assert "hf_id" in bad.context["form"].errors
