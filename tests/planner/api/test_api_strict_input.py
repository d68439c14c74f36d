"""Requests that say something the API does not understand are 400s naming it, in JSON."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import RequestDataTooBig
from django.test import RequestFactory, override_settings

from kvdash.views import bad_request
from planner.models import Scenario

SIZE = "/api/v1/size/"
BASE = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "max_model_len": 32768, "concurrency": 8}
SCENARIO = {"name": "chat", "model": "llama-3.1-8b", "gpu": "h100-sxm", "max_model_len": 8192, "concurrency": 4}

pytestmark = pytest.mark.django_db


def test_a_misspelt_size_field_is_a_400_naming_it_and_the_likely_one(anon, catalog) -> None:
    response = anon.post(SIZE, {**BASE, "max_model_length": 1024}, format="json")

    assert response.status_code == 400
    assert response.json() == {"max_model_length": ["unknown field; did you mean 'max_model_len'?"]}


def test_a_misspelt_scenario_field_is_a_400_and_nothing_is_saved(planner, catalog) -> None:
    response = planner.post("/api/v1/scenarios/", {**SCENARIO, "concurency": 64}, format="json")

    assert response.status_code == 400
    assert response.json() == {"concurency": ["unknown field; did you mean 'concurrency'?"]}
    assert not Scenario.objects.exists()


def test_read_only_fields_sent_back_are_still_accepted(planner, catalog) -> None:
    created = planner.post("/api/v1/scenarios/", SCENARIO, format="json").json()
    response = planner.put(f"/api/v1/scenarios/{created['id']}/", {**created, "concurrency": 6}, format="json")

    assert response.status_code == 200
    assert response.json()["concurrency"] == 6


def test_an_unknown_import_field_is_a_400(planner, db) -> None:
    response = planner.post("/api/v1/models/import/", {"config": {"a": 1}, "sav": True}, format="json")

    assert response.status_code == 400
    assert response.json()["sav"] == ["unknown field; did you mean 'save'?"]


def test_a_lone_surrogate_in_a_scenario_name_is_a_400(planner, catalog) -> None:
    body = json.dumps(SCENARIO)[:-1] + ', "notes": "\\ud800"}'
    response = planner.post("/api/v1/scenarios/", body, content_type="application/json")

    assert response.status_code == 400
    assert "lone surrogate" in response.json()["notes"][0]
    assert not Scenario.objects.exists()


@pytest.mark.parametrize("version", ["99.99", "1.0", "0.34", "0.0", "\uff10.\uff11\uff10", "0.1\u0669"])
def test_engine_version_must_be_latest_or_a_known_release(anon, planner, catalog, version) -> None:
    # U+FF10 is a full-width 0, U+0669 an Arabic-Indic 9: both are digits to Python's int().
    sized = anon.post(SIZE, {**BASE, "engine_version": version}, format="json")
    saved = planner.post("/api/v1/scenarios/", {**SCENARIO, "engine_version": version}, format="json")

    assert sized.status_code == saved.status_code == 400
    assert "from 0.1 to 0.33" in sized.json()["engine_version"][0] or "release" in sized.json()["engine_version"][0]
    assert "engine_version" in saved.json()
    assert not Scenario.objects.exists()


@pytest.mark.parametrize("version", ["latest", "0.10", "v0.19.1", "0.33"])
def test_known_releases_are_accepted(anon, catalog, version) -> None:
    assert anon.post(SIZE, {**BASE, "engine_version": version}, format="json").status_code == 200


def test_a_body_over_the_upload_limit_is_a_json_400_on_the_api_and_text_on_pages() -> None:
    # Django refuses a body past DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) with RequestDataTooBig wherever it reads
    # one, before any DRF code runs; the 400 handler answers it.
    factory = RequestFactory()
    api = bad_request(factory.post("/api/v1/size/"), RequestDataTooBig("too big"))
    page = bad_request(factory.post("/planner/scenarios/new/"), RequestDataTooBig("too big"))

    assert (api.status_code, api["Content-Type"]) == (400, "application/json")
    assert json.loads(api.content) == {"detail": "The request body is too large or has too many fields."}
    assert (page.status_code, page["Content-Type"]) == (400, "text/plain; charset=utf-8")


@override_settings(ALLOWED_HOSTS=["testserver"])
def test_a_django_level_400_on_an_api_path_answers_json(anon) -> None:
    # A Host header we do not serve is refused by Django itself (DisallowedHost), like an oversized body.
    response = anon.post("/api/v1/size/", BASE, format="json", HTTP_HOST="evil.example")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Bad request."}
