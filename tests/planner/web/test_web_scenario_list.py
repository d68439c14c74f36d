"""The scenario list: who sees it, search, filters, sort, fits badges, pagination, constant queries."""

from __future__ import annotations

import pytest
from django.urls import reverse
from planner_factories import ScenarioFactory

from planner.models import GpuProfile, ModelProfile
from planner.selectors import SCENARIOS_PER_PAGE

LIST = reverse("planner:scenario-list")


@pytest.mark.django_db
def test_anonymous_users_are_sent_to_log_in(client):
    response = client.get(LIST)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.django_db
def test_viewers_see_scenarios_but_no_create_button(viewer_client, catalog):
    ScenarioFactory(name="Visible to all")
    body = viewer_client.get(LIST).content.decode()
    assert "Visible to all" in body
    assert reverse("planner:scenario-create") not in body


@pytest.mark.django_db
def test_planners_get_the_create_and_import_buttons(planner_client, catalog):
    body = planner_client.get(LIST).content.decode()
    assert reverse("planner:scenario-create") in body
    assert reverse("planner:scenario-import") in body


@pytest.mark.django_db
def test_each_row_has_a_badge_saying_whether_the_plan_fits(planner_client, catalog):
    fits = ScenarioFactory(name="small", max_model_len=8192, concurrency=1)
    misses = ScenarioFactory(name="big", max_model_len=32768, concurrency=64)
    response = planner_client.get(LIST)
    rows = {row.scenario.pk: row for row in response.context["rows"]}
    assert rows[fits.pk].outcome.fits is True
    assert rows[misses.pk].outcome.fits is False
    body = response.content.decode()
    assert '<span class="badge ok">fits</span>' in body
    assert '<span class="badge bad">does not fit</span>' in body
    assert "fits: 1 sequence × 8K on 1× RTX 4090" in body


@pytest.mark.django_db
def test_a_scenario_the_engine_no_longer_accepts_is_listed_with_its_error(planner_client, catalog):
    broken = ScenarioFactory(name="broken one")
    # The catalog changed under it: the stored block size is not one vLLM offers.
    type(broken).objects.filter(pk=broken.pk).update(block_size=48)
    response = planner_client.get(LIST)
    assert response.status_code == 200
    body = response.content.decode()
    assert "broken one" in body
    assert '<span class="badge warn">error</span>' in body
    assert "block_size" in body


@pytest.mark.django_db
def test_search_matches_name_notes_model_and_gpu(planner_client, catalog):
    ScenarioFactory(name="Chat bot", notes="for the support team")
    ScenarioFactory(name="Batch jobs", gpu=GpuProfile.objects.get(slug="h100-sxm"))

    def names(**params):
        return [row.scenario.name for row in planner_client.get(LIST, params).context["rows"]]

    assert names(q="chat") == ["Chat bot"]
    assert names(q="SUPPORT") == ["Chat bot"]
    assert names(q="H100") == ["Batch jobs"]
    assert sorted(names(q="qwen3")) == ["Batch jobs", "Chat bot"]
    assert names(q="nothing like this") == []


@pytest.mark.django_db
def test_filters_by_model_and_gpu_slug(planner_client, catalog):
    ScenarioFactory(name="qwen on 4090")
    ScenarioFactory(name="llama on 4090", model=ModelProfile.objects.get(slug="llama-3-8b"))
    ScenarioFactory(name="qwen on l4", gpu=GpuProfile.objects.get(slug="l4"))

    def names(**params):
        return sorted(row.scenario.name for row in planner_client.get(LIST, params).context["rows"])

    assert names(model="llama-3-8b") == ["llama on 4090"]
    assert names(gpu="l4") == ["qwen on l4"]
    assert names(model="qwen3-8b", gpu="rtx-4090") == ["qwen on 4090"]
    assert names(model="no-such-model") == []


@pytest.mark.django_db
def test_sorts_by_updated_newest_first_by_default_and_oldest_first_on_request(planner_client, catalog):
    first = ScenarioFactory(name="first")
    second = ScenarioFactory(name="second")
    first.notes = "touched last"
    first.save()  # auto_now: now the newest

    def names(**params):
        return [row.scenario.name for row in planner_client.get(LIST, params).context["rows"]]

    assert names() == ["first", "second"]
    assert names(sort="updated") == ["second", "first"]
    assert names(sort="name") == ["first", "second"]
    assert names(sort="bogus") == ["first", "second"]
    assert second.pk


@pytest.mark.django_db
def test_paginates_fifty_per_page_keeping_the_filters(planner_client, catalog):
    owner = ScenarioFactory().owner
    ScenarioFactory.create_batch(SCENARIOS_PER_PAGE + 4, owner=owner)
    first = planner_client.get(LIST, {"q": "Scenario"})
    assert len(first.context["rows"]) == SCENARIOS_PER_PAGE
    assert "q=Scenario&amp;page=2" in first.content.decode()
    second = planner_client.get(LIST, {"q": "Scenario", "page": 2})
    assert len(second.context["rows"]) == 5
    assert planner_client.get(LIST, {"page": "not-a-number"}).status_code == 200
    assert planner_client.get(LIST, {"page": "999"}).status_code == 200


@pytest.mark.django_db
def test_the_list_runs_the_same_number_of_queries_for_5_and_50_scenarios(
    planner_client, catalog, django_assert_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    owner = ScenarioFactory().owner
    ScenarioFactory.create_batch(4, owner=owner)
    planner_client.get(LIST)  # warm the session and the permission cache paths alike
    with CaptureQueriesContext(connection) as five:
        assert len(planner_client.get(LIST).context["rows"]) == 5
    ScenarioFactory.create_batch(45, owner=owner, model=ModelProfile.objects.get(slug="llama-3-8b"))
    with django_assert_num_queries(len(five.captured_queries)):
        assert len(planner_client.get(LIST).context["rows"]) == 50
