"""Create, edit and clone: grouped fields with defaults, the engine's errors on the right fields, nothing
saved from a bad form, and the live preview's JSON."""

from __future__ import annotations

import pytest
from django.forms.models import model_to_dict
from django.urls import reverse
from planner_factories import ScenarioFactory, UserFactory

from planner.forms import ScenarioForm
from planner.models import ModelProfile, Scenario

CREATE = reverse("planner:scenario-create")
PREVIEW = reverse("planner:scenario-preview")

VALID = {
    "name": "Qwen3 8B on a 4090",
    "model": "qwen3-8b",
    "gpu": "rtx-4090",
    "tensor_parallel_size": "1",
    "pipeline_parallel_size": "1",
    "weight_dtype": "auto",
    "kv_cache_dtype": "auto",
    "engine_version": "latest",
    "max_model_len": "16384",
    "concurrency": "2",
    "context_rounding": "exact",
}


def post_data(**changes: str) -> dict[str, str]:
    return {**VALID, **changes}


@pytest.mark.django_db
def test_the_form_starts_from_vllm_like_defaults(planner_client, catalog):
    form = planner_client.get(CREATE).context["form"]
    assert form["concurrency"].value() == 1
    assert form["tensor_parallel_size"].value() == 1
    assert form["pipeline_parallel_size"].value() == 1
    assert form["context_rounding"].value() == "exact"
    assert form["kv_cache_dtype"].value() == "auto"
    titles = [group.title for group, _fields, _open in form.field_groups()]
    assert titles == ["Scenario", "Model", "Hardware", "Engine", "SLA", "Overrides (advanced)"]
    advanced = form.field_groups()[-1]
    assert advanced[0].advanced and advanced[2] is False  # folded while empty


@pytest.mark.django_db
def test_query_parameters_preselect_model_and_gpu(planner_client, catalog):
    body = planner_client.get(CREATE, {"model": "qwen3-8b", "gpu": "l4"}).content.decode()
    assert '<option value="qwen3-8b" selected>' in body
    assert '<option value="l4" selected>' in body


@pytest.mark.django_db
def test_a_planner_creates_a_scenario_they_own(planner_client, planner_user, catalog):
    response = planner_client.post(CREATE, post_data())
    scenario = Scenario.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("planner:scenario-detail", args=[scenario.pk])
    assert scenario.owner == planner_user
    assert (scenario.model.slug, scenario.gpu.slug) == ("qwen3-8b", "rtx-4090")
    assert (scenario.concurrency, scenario.max_model_len, scenario.gpu_count) == (2, 16384, None)


@pytest.mark.django_db
def test_viewers_may_not_create_edit_or_clone(viewer_client, catalog):
    scenario = ScenarioFactory()
    assert viewer_client.get(CREATE).status_code == 403
    assert viewer_client.post(CREATE, post_data()).status_code == 403
    assert viewer_client.get(reverse("planner:scenario-edit", args=[scenario.pk])).status_code == 403
    assert viewer_client.get(reverse("planner:scenario-clone", args=[scenario.pk])).status_code == 403
    assert Scenario.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"name": ""}, "name", "This field is required."),
        ({"model": ""}, "model", "This field is required."),
        ({"model": "no-such-model"}, "model", "Select a valid choice."),
        ({"concurrency": ""}, "concurrency", "This field is required."),
        ({"concurrency": "-3"}, "concurrency", "greater than or equal to 1."),
        ({"concurrency": "0"}, "concurrency", "greater than or equal to 1."),
        ({"concurrency": "lots"}, "concurrency", "Enter a whole number."),
        ({"concurrency": "1000000000"}, "concurrency", "must be at most 1000000"),
        ({"concurrency": "99999999999999999999"}, "concurrency", "must be at most"),
        ({"max_model_len": "0"}, "max_model_len", "greater than or equal to 1."),
        ({"max_model_len": "1000000000"}, "max_model_len", "must be at most"),
        ({"gpu_memory_utilization": "1.5"}, "gpu_memory_utilization", "must be at most 1"),
        ({"gpu_memory_utilization": "nan"}, "gpu_memory_utilization", "Enter a number."),
        ({"weights_gib": "-1"}, "weights_gib", "greater than or equal to 0"),
        ({"weights_gib": "inf"}, "weights_gib", "Enter a number."),
        ({"tensor_parallel_size": "3"}, "tensor_parallel_size", "does not divide the model's 32 attention heads"),
        ({"gpu_count": "3", "tensor_parallel_size": "2"}, "gpu_count", "must be a multiple of"),
        ({"engine_version": "banana"}, "engine_version", "must be 'latest' or a release"),
        ({"block_size": "48"}, "block_size", "Select a valid choice."),
        ({"kv_cache_dtype": "fp3"}, "kv_cache_dtype", "Select a valid choice."),
    ],
)
def test_bad_input_shows_a_field_error_and_saves_nothing(planner_client, catalog, changes, field, message):
    response = planner_client.post(CREATE, post_data(**changes))
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors, errors
    assert any(message in text for text in errors[field]), errors[field]
    assert Scenario.objects.count() == 0
    assert 'class="errorlist' in response.content.decode()


@pytest.mark.django_db
def test_clean_maps_engine_errors_it_cannot_place_above_the_form(catalog):
    form = ScenarioForm(data=post_data())
    assert form.is_valid()
    assert form.plan is not None and form.plan.fits
    from planner.forms import add_sizing_errors
    from planner.sizing import SizingInputError

    add_sizing_errors(form, SizingInputError({"concurrency": "too many", "layer_groups": "odd"}))
    assert form.errors["concurrency"] == ["too many"]
    assert form.non_field_errors() == ["layer_groups: odd"]


@pytest.mark.django_db
def test_a_bad_edit_leaves_the_stored_scenario_exactly_as_it_was(planner_client, planner_user, catalog):
    scenario = ScenarioFactory(owner=planner_user, name="keep me", concurrency=3, notes="original")
    before = model_to_dict(Scenario.objects.get(pk=scenario.pk))
    updated_before = Scenario.objects.get(pk=scenario.pk).updated
    url = reverse("planner:scenario-edit", args=[scenario.pk])
    for bad in (
        {"name": "renamed", "notes": "changed", "tensor_parallel_size": "3"},
        {"name": "", "concurrency": "-1"},
        {"name": "renamed", "concurrency": "many", "max_model_len": "x"},
        {"name": "renamed", "model": "gone"},
    ):
        response = planner_client.post(url, post_data(**bad))
        assert response.status_code == 200
        assert response.context["form"].errors
    reloaded = Scenario.objects.get(pk=scenario.pk)
    assert model_to_dict(reloaded) == before
    assert reloaded.updated == updated_before


@pytest.mark.django_db
def test_the_owner_edits_and_the_form_shows_stored_values(planner_client, planner_user, catalog):
    scenario = ScenarioFactory(owner=planner_user, concurrency=3, block_size=32)
    url = reverse("planner:scenario-edit", args=[scenario.pk])
    form = planner_client.get(url).context["form"]
    assert form["model"].value() == "qwen3-8b"
    assert form["gpu"].value() == "rtx-4090"
    assert form["block_size"].value() == 32
    response = planner_client.post(url, post_data(name="edited", concurrency="5", block_size="32"))
    assert response.status_code == 302
    scenario.refresh_from_db()
    assert (scenario.name, scenario.concurrency, scenario.block_size) == ("edited", 5, 32)


@pytest.mark.django_db
def test_another_planner_without_change_rights_may_not_edit(client, catalog):
    scenario = ScenarioFactory()
    client.force_login(UserFactory(username="someone", planner=True))
    assert client.post(reverse("planner:scenario-edit", args=[scenario.pk]), post_data()).status_code == 403


@pytest.mark.django_db
def test_clone_prefills_a_create_form_and_saves_a_new_scenario(planner_client, planner_user, catalog):
    source = ScenarioFactory(name="original", concurrency=3, kv_cache_dtype="fp8", notes="n")
    form = planner_client.get(reverse("planner:scenario-clone", args=[source.pk])).context["form"]
    assert form["name"].value() == "original (copy)"
    assert form["kv_cache_dtype"].value() == "fp8"
    assert form["concurrency"].value() == 3
    assert form["model"].value() == "qwen3-8b"
    assert Scenario.objects.count() == 1  # nothing is written before the copy is saved
    response = planner_client.post(CREATE, post_data(name="original (copy)", kv_cache_dtype="fp8", concurrency="3"))
    assert response.status_code == 302
    copy = Scenario.objects.exclude(pk=source.pk).get()
    assert (copy.owner, copy.kv_cache_dtype) == (planner_user, "fp8")


@pytest.mark.django_db
def test_clone_form_saved_where_it_is_shown_makes_a_new_scenario_of_the_user(planner_client, planner_user, catalog):
    # The clone page's form posts back to the clone URL (issue 12, item 1: that answered 405).
    owner = UserFactory(username="owner", planner=True)
    source = ScenarioFactory(name="original", owner=owner, concurrency=1, notes="keep")
    url = reverse("planner:scenario-clone", args=[source.pk])
    response = planner_client.post(url, post_data(name="edited copy", concurrency="2", kv_cache_dtype="fp8"))
    assert response.status_code == 302
    copy = Scenario.objects.exclude(pk=source.pk).get()
    assert response["Location"] == reverse("planner:scenario-detail", args=[copy.pk])
    assert (copy.name, copy.owner, copy.concurrency, copy.kv_cache_dtype) == ("edited copy", planner_user, 2, "fp8")
    source.refresh_from_db()
    assert (source.name, source.owner, source.concurrency, source.kv_cache_dtype) == ("original", owner, 1, "auto")


@pytest.mark.django_db
def test_clone_form_with_errors_is_shown_again_and_saves_nothing(planner_client, catalog):
    source = ScenarioFactory(name="original")
    response = planner_client.post(reverse("planner:scenario-clone", args=[source.pk]), post_data(concurrency="0"))
    assert response.status_code == 200
    assert "concurrency" in response.context["form"].errors
    assert Scenario.objects.count() == 1


@pytest.mark.django_db
def test_preview_answers_the_headline_and_the_plan(planner_client, catalog):
    response = planner_client.post(PREVIEW, post_data(name=""))
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True
    assert body["fits"] is True
    assert "fits: 2 sequences × 16K on 1× RTX 4090" in body["html"]
    assert body["plan"]["kv_bytes_per_token"] == 147_456  # Qwen3 8B: 36 layers × 8 heads × 128 × 2 × 2 B
    more = planner_client.post(PREVIEW, post_data(concurrency="8")).json()
    assert "does not fit: 8 sequences × 16K" in more["html"]
    assert more["fits"] is False


@pytest.mark.django_db
def test_preview_answers_400_with_per_field_errors(planner_client, catalog):
    response = planner_client.post(PREVIEW, post_data(concurrency="-1", tensor_parallel_size="x"))
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert set(errors) == {"concurrency", "tensor_parallel_size"}
    assert errors["concurrency"][0]["message"].startswith("Ensure this value is greater than or equal to")
    engine = planner_client.post(PREVIEW, post_data(tensor_parallel_size="5")).json()
    assert "does not divide" in engine["errors"]["tensor_parallel_size"][0]["message"]


@pytest.mark.django_db
def test_preview_needs_a_login_and_a_post(planner_client, catalog):
    assert planner_client.get(PREVIEW).status_code == 405
    planner_client.logout()
    assert planner_client.post(PREVIEW, post_data()).status_code == 302


@pytest.mark.django_db
def test_a_catalog_model_whose_config_broke_is_reported_on_the_model_field(planner_client, catalog):
    ModelProfile.objects.filter(slug="qwen3-8b").update(config={"model_type": "qwen3"})
    response = planner_client.post(CREATE, post_data())
    assert response.status_code == 200
    errors = response.context["form"].errors["model"]
    assert any(error.startswith("Qwen3 8B: num_attention_heads: missing") for error in errors), errors
    assert Scenario.objects.count() == 0


@pytest.mark.django_db
def test_help_text_has_the_id_the_control_names_in_aria_describedby(planner_client, catalog):
    body = planner_client.get(CREATE).content.decode()
    assert 'aria-describedby="id_max_model_len_helptext"' in body
    assert 'id="id_max_model_len_helptext"' in body
    assert 'id="id_concurrency_live_error"' in body


@pytest.mark.django_db
def test_a_failed_save_with_model_and_gpu_chosen_does_not_ask_to_pick_them(planner_client, catalog):
    response = planner_client.post(CREATE, post_data(name="", concurrency="0"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Pick a model and a GPU" not in body
    assert 'id="preview-blocked"' in body
    assert 'aria-invalid="true"' in body
