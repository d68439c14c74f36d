"""/api/v1/scenarios/: list, filters, CRUD with role checks, the recomputed plan, and no N+1 on the list."""

from __future__ import annotations

import pytest
from planner_factories import ApiScenarioFactory, UserFactory
from rest_framework.test import APIClient

from planner.models import SCENARIO_INPUT_FIELDS, GpuProfile, ModelProfile, Scenario
from planner.services import scenario_plan
from planner.sizing import plan_to_dict

LIST = "/api/v1/scenarios/"
NEW = {"name": "Qwen3 8B chat", "model": "qwen3-8b", "gpu": "l40s", "max_model_len": 16384, "concurrency": 8}

pytestmark = pytest.mark.django_db


def detail(scenario: Scenario) -> str:
    return f"{LIST}{scenario.pk}/"


# --- reads ----------------------------------------------------------------------------------------------------


def test_list_shows_scenarios_with_slugs_and_owner(viewer, scenario) -> None:
    response = viewer.get(LIST)

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 1
    item = body["results"][0]
    assert item["id"] == scenario.pk
    assert item["model"] == "llama-3.1-8b"
    assert item["gpu"] == "h100-sxm"
    assert item["owner"] == "api-planner"
    assert set(SCENARIO_INPUT_FIELDS) <= set(item)
    assert "plan" not in item  # the list stays cheap; the detail recomputes


def test_list_is_paginated(viewer, catalog, planner_user) -> None:
    ApiScenarioFactory.create_batch(55, owner=planner_user)

    first = viewer.get(LIST).json()
    second = viewer.get(LIST, {"page": 2}).json()

    assert first["count"] == 55
    assert len(first["results"]) == 50
    assert len(second["results"]) == 5
    assert first["next"] and second["previous"]
    assert viewer.get(LIST, {"page": 9}).status_code == 404


def test_list_runs_a_fixed_number_of_queries(viewer, catalog, planner_user, django_assert_num_queries) -> None:
    owners = UserFactory.create_batch(5)
    gpus = list(GpuProfile.objects.all()[:5])
    for i in range(20):
        ApiScenarioFactory(owner=owners[i % 5], gpu=gpus[i % 5])

    # Token lookup (with its user), count, one page with owner/model/gpu joined: not one query per row.
    with django_assert_num_queries(3):
        response = viewer.get(LIST)
    assert len(response.json()["results"]) == 20


def test_list_filters_by_model_gpu_owner_and_name(viewer, catalog, planner_user, other_planner) -> None:
    ApiScenarioFactory(name="Llama chat", owner=planner_user)
    ApiScenarioFactory(name="Llama batch", owner=other_planner, gpu=GpuProfile.objects.get(slug="l4"))
    ApiScenarioFactory(name="Qwen chat", owner=other_planner, model=ModelProfile.objects.get(slug="qwen3-8b"))

    def names(**params: str) -> set[str]:
        response = viewer.get(LIST, params)
        assert response.status_code == 200
        return {item["name"] for item in response.json()["results"]}

    assert names(model="qwen3-8b") == {"Qwen chat"}
    assert names(gpu="l4") == {"Llama batch"}
    assert names(owner="api-planner") == {"Llama chat"}
    assert names(search="chat") == {"Llama chat", "Qwen chat"}
    assert names(model="llama-3.1-8b", owner="api-planner-2") == {"Llama batch"}
    assert names(model="no-such-model") == set()


def test_a_too_long_filter_is_a_400(viewer, catalog) -> None:
    response = viewer.get(LIST, {"search": "x" * 500})

    assert response.status_code == 400
    assert "search" in response.json()


def test_retrieve_includes_the_recomputed_plan(viewer, scenario) -> None:
    response = viewer.get(detail(scenario))

    assert response.status_code == 200
    body = response.json()
    assert body["plan"] == plan_to_dict(scenario_plan(scenario=scenario))
    assert body["plan_errors"] is None
    assert body["max_model_len"] == 8192


def test_plan_endpoint_answers_the_plan(viewer, scenario) -> None:
    response = viewer.get(f"{detail(scenario)}plan/")

    assert response.status_code == 200
    assert response.json() == plan_to_dict(scenario_plan(scenario=scenario))


def test_a_scenario_that_no_longer_plans_still_reads(viewer, scenario) -> None:
    # Stored before the engine checked it (or the rules changed since): 32 heads do not split over tp 3.
    Scenario.objects.filter(pk=scenario.pk).update(tensor_parallel_size=3)

    response = viewer.get(detail(scenario))

    assert response.status_code == 200
    assert response.json()["plan"] is None
    assert "tensor_parallel_size" in response.json()["plan_errors"]
    plan = viewer.get(f"{detail(scenario)}plan/")
    assert plan.status_code == 422
    assert "tensor_parallel_size" in plan.json()["plan_errors"]


def test_a_scenario_whose_model_config_broke_still_reads(viewer, scenario) -> None:
    ModelProfile.objects.filter(slug="llama-3.1-8b").update(config={"num_hidden_layers": "broken"})

    response = viewer.get(detail(scenario))

    assert response.status_code == 200
    assert response.json()["plan"] is None
    assert response.json()["plan_errors"]


def test_reads_need_a_signed_in_user(anon, scenario) -> None:
    assert anon.get(LIST).status_code == 401
    assert anon.get(detail(scenario)).status_code == 401
    assert anon.get(f"{detail(scenario)}plan/").status_code == 401


def test_a_session_works_for_the_browser(viewer_user, scenario) -> None:
    client = APIClient()
    client.force_login(viewer_user)

    assert client.get(detail(scenario)).status_code == 200


@pytest.mark.parametrize("path", ["999999/", "999999/plan/", "abc/", str(2**70) + "/"])
def test_unknown_scenarios_are_404(viewer, catalog, path) -> None:
    assert viewer.get(f"{LIST}{path}").status_code == 404


# --- writes ---------------------------------------------------------------------------------------------------


def test_a_planner_creates_a_scenario_and_gets_its_plan(planner, planner_user, catalog) -> None:
    response = planner.post(LIST, NEW, format="json")

    assert response.status_code == 201
    body = response.json()
    scenario = Scenario.objects.get(pk=body["id"])
    assert scenario.owner == planner_user
    assert scenario.model.slug == "qwen3-8b"
    assert scenario.concurrency == 8
    assert body["owner"] == "api-planner"
    assert body["plan"] == plan_to_dict(scenario_plan(scenario=scenario))


def test_owner_in_the_body_is_ignored(planner, planner_user, other_planner, catalog) -> None:
    response = planner.post(LIST, {**NEW, "owner": "api-planner-2"}, format="json")

    assert response.status_code == 201
    assert Scenario.objects.get(pk=response.json()["id"]).owner == planner_user


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model": "no-such-model"}, "model"),
        ({"gpu": "no-such-gpu"}, "gpu"),
        ({"name": ""}, "name"),
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": "x"}, "concurrency"),
        ({"gpu_memory_utilization": 2}, "gpu_memory_utilization"),
        ({"weights_gib": -5}, "weights_gib"),
        ({"kv_cache_dtype": "fp7"}, "kv_cache_dtype"),
        ({"tensor_parallel_size": 3}, "tensor_parallel_size"),  # the engine's check: 3 does not divide 32 heads
        ({"engine_version": "banana"}, "engine_version"),
    ],
)
def test_create_rejects_bad_input_per_field(planner, catalog, change, field) -> None:
    response = planner.post(LIST, {**NEW, **change}, format="json")

    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not Scenario.objects.exists()


def test_create_needs_the_planner_role(viewer, anon, catalog) -> None:
    assert viewer.post(LIST, NEW, format="json").status_code == 403
    assert anon.post(LIST, NEW, format="json").status_code == 401
    assert not Scenario.objects.exists()


def test_a_superuser_is_a_planner(catalog) -> None:
    client = APIClient()
    client.force_authenticate(UserFactory(username="root", is_superuser=True))

    assert client.post(LIST, NEW, format="json").status_code == 201


def test_the_owner_updates_with_put_and_patch(planner, scenario) -> None:
    put = planner.put(detail(scenario), {**NEW, "name": "Renamed"}, format="json")
    assert put.status_code == 200
    scenario.refresh_from_db()
    assert (scenario.name, scenario.model.slug, scenario.max_model_len) == ("Renamed", "qwen3-8b", 16384)

    patch = planner.patch(detail(scenario), {"concurrency": 2}, format="json")
    assert patch.status_code == 200
    scenario.refresh_from_db()
    assert (scenario.name, scenario.concurrency) == ("Renamed", 2)
    assert patch.json()["plan"]["inputs"]["concurrency"] == 2


def test_a_bad_update_changes_nothing(planner, scenario) -> None:
    response = planner.patch(detail(scenario), {"tensor_parallel_size": 3, "name": "Broken"}, format="json")

    assert response.status_code == 400
    assert "tensor_parallel_size" in response.json()
    scenario.refresh_from_db()
    assert (scenario.name, scenario.tensor_parallel_size) == ("Llama on H100", 1)


def test_another_planner_needs_change_permission_to_edit(scenario, catalog) -> None:
    # A planner without change_scenario may only edit their own scenarios.
    from django.contrib.auth.models import Permission

    limited = UserFactory(username="limited")
    limited.user_permissions.add(Permission.objects.get(content_type__app_label="planner", codename="add_scenario"))
    client = APIClient()
    client.force_authenticate(limited)

    assert client.patch(detail(scenario), {"name": "Mine now"}, format="json").status_code == 403
    scenario.refresh_from_db()
    assert scenario.name == "Llama on H100"


def test_a_viewer_cannot_edit_or_delete(viewer, scenario) -> None:
    assert viewer.patch(detail(scenario), {"name": "x"}, format="json").status_code == 403
    assert viewer.put(detail(scenario), NEW, format="json").status_code == 403
    assert viewer.delete(detail(scenario)).status_code == 403
    assert Scenario.objects.filter(pk=scenario.pk).exists()


def test_anonymous_writes_are_401(anon, scenario) -> None:
    assert anon.patch(detail(scenario), {"name": "x"}, format="json").status_code == 401
    assert anon.delete(detail(scenario)).status_code == 401


def test_delete_is_for_the_owner_or_staff(planner, other_planner, scenario) -> None:
    other = APIClient()
    other.force_authenticate(other_planner)
    assert other.delete(detail(scenario)).status_code == 403

    assert planner.delete(detail(scenario)).status_code == 204
    assert not Scenario.objects.filter(pk=scenario.pk).exists()


def test_staff_may_delete_any_scenario(scenario) -> None:
    staff = APIClient()
    staff.force_authenticate(UserFactory(username="staff", is_staff=True))

    assert staff.delete(detail(scenario)).status_code == 204


def test_deleting_a_missing_scenario_is_404(planner, catalog) -> None:
    assert planner.delete(f"{LIST}424242/").status_code == 404


@pytest.mark.parametrize("field", ["model", "gpu"])
def test_a_nul_character_in_a_slug_is_a_400_not_a_database_error(planner, catalog, field) -> None:
    # PostgreSQL refuses NUL in text; the lookup must never reach it.
    response = planner.post(LIST, {**NEW, field: "qwen3\x008b"}, format="json")

    assert response.status_code == 400
    assert field in response.json()


def test_a_nul_character_in_a_filter_is_a_400(viewer, catalog) -> None:
    response = viewer.get(LIST, {"model": "a\x00b"})

    assert response.status_code == 400
    assert "model" in response.json()


def test_a_planner_with_change_permission_edits_others_scenarios(other_planner, scenario) -> None:
    client = APIClient()
    client.force_authenticate(other_planner)  # holds change_scenario, like the planner group

    response = client.patch(detail(scenario), {"name": "Reviewed"}, format="json")

    assert response.status_code == 200
    scenario.refresh_from_db()
    assert (scenario.name, scenario.owner.username) == ("Reviewed", "api-planner")
