"""Alerts through the API and the /monitor/alerts/ page: filters, acknowledge, silence, who may do what,
and bad input answered 400."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from monitor_factories import endpoint_on, node_with_key
from rest_framework.test import APIClient

from monitor.models import Alert, AlertRule, RuleKind, Silence

pytestmark = pytest.mark.django_db

AT = dt.datetime(2026, 12, 1, 0, 5, tzinfo=dt.UTC)


def make_alert(endpoint, kind: str, state: str, *, minutes: int = 0) -> Alert:
    started = AT + dt.timedelta(minutes=minutes)
    return Alert.objects.create(
        rule=AlertRule.objects.get(kind=kind),
        endpoint=endpoint,
        state=state,
        started_at=started,
        last_seen_at=started,
        resolved_at=started + dt.timedelta(minutes=1) if state == "resolved" else None,
        value=0.95,
        message="KV cache usage 95%",
    )


@pytest.fixture
def alerts(frozen_now) -> dict[str, Alert]:
    node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9001, name="llama-a")
    return {
        "firing": make_alert(endpoint, RuleKind.KV_USAGE_HIGH, "firing", minutes=2),
        "acknowledged": make_alert(endpoint, RuleKind.SCRAPE_DOWN, "acknowledged", minutes=1),
        "resolved": make_alert(endpoint, RuleKind.KV_USAGE_HIGH, "resolved"),
    }


def user_with(name: str, *codenames: str):
    user = get_user_model().objects.create_user(name, password="pw-for-tests-only")
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="monitor", codename__in=codenames))
    return user


@pytest.fixture
def reader() -> APIClient:
    client = APIClient()
    client.force_authenticate(user_with("reader"))
    return client


@pytest.fixture
def oncall() -> APIClient:
    client = APIClient()
    client.force_authenticate(user_with("oncall", "change_alert"))
    return client


def test_the_list_filters_by_state(reader, alerts):
    response = reader.get("/api/v1/alerts/", {"state": "firing"})

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 1
    item = body["results"][0]
    assert {key: item[key] for key in ("id", "rule", "endpoint", "state", "started_at", "kind", "rule_name")} == {
        "id": alerts["firing"].pk,
        "rule": AlertRule.objects.get(kind="kv_usage_high").pk,
        "endpoint": alerts["firing"].endpoint_id,
        "state": "firing",
        "started_at": "2026-12-01T00:07:00Z",
        "kind": "kv_usage_high",
        "rule_name": "KV cache usage high",
    }
    assert (item["resolved_at"], item["acknowledged_by"], item["silenced"]) == (None, None, False)


def test_the_list_without_a_filter_is_newest_first(reader, alerts):
    states = [item["state"] for item in reader.get("/api/v1/alerts/").json()["results"]]
    assert states == ["firing", "acknowledged", "resolved"]
    resolved = reader.get("/api/v1/alerts/?state=resolved").json()["results"]
    assert [(a["id"], a["resolved_at"]) for a in resolved] == [(alerts["resolved"].pk, "2026-12-01T00:06:00Z")]


def test_the_list_runs_a_fixed_number_of_queries(reader, alerts, django_assert_num_queries):
    # count, page of alerts with rule/endpoint/user joined, running silences: not one per alert.
    with django_assert_num_queries(3):
        assert reader.get("/api/v1/alerts/").status_code == 200


@pytest.mark.parametrize(
    "query",
    [{"state": "burning"}, {"state": "firing\x00"}, {"state": "\x00"}, {"endpoint": "1\x00"}, {"endpoint": "-4"}],
)
def test_bad_filters_are_answered_400(reader, alerts, query):
    response = reader.get("/api/v1/alerts/", query)
    assert response.status_code == 400
    assert set(response.json()) == set(query)


def test_anonymous_reads_follow_the_public_monitor_setting(alerts, settings):
    settings.KVDASH_PUBLIC_MONITOR = False
    assert APIClient().get("/api/v1/alerts/").status_code in (401, 403)
    settings.KVDASH_PUBLIC_MONITOR = True
    assert APIClient().get("/api/v1/alerts/").json()["count"] == 3


def test_acknowledge_needs_the_change_alert_right(reader, oncall, alerts):
    url = f"/api/v1/alerts/{alerts['firing'].pk}/acknowledge/"
    assert reader.post(url).status_code == 403
    assert APIClient().post(url).status_code in (401, 403)

    response = oncall.post(url)

    assert response.status_code == 200
    assert (response.json()["state"], response.json()["acknowledged_by"]) == ("acknowledged", "oncall")
    assert oncall.get("/api/v1/alerts/?state=firing").json()["count"] == 0
    assert oncall.get("/api/v1/alerts/?state=acknowledged").json()["count"] == 2


def test_a_resolved_alert_cannot_be_acknowledged(oncall, alerts):
    response = oncall.post(f"/api/v1/alerts/{alerts['resolved'].pk}/acknowledge/")
    assert response.status_code == 400
    assert response.json() == {"state": "this alert has resolved: there is nothing to acknowledge"}


def test_silence_through_the_api(oncall, alerts):
    alert = alerts["firing"]
    response = oncall.post(
        f"/api/v1/alerts/{alert.pk}/silence/", {"minutes": 90, "comment": "deploying"}, format="json"
    )

    assert response.status_code == 201
    body = response.json()
    assert (body["rule"], body["endpoint"], body["starts_at"], body["ends_at"], body["comment"]) == (
        alert.rule_id,
        alert.endpoint_id,
        "2026-12-01T00:10:00Z",
        "2026-12-01T01:40:00Z",
        "deploying",
    )
    assert oncall.get(f"/api/v1/alerts/{alert.pk}/").json()["silenced"] is True
    bad = oncall.post(f"/api/v1/alerts/{alert.pk}/silence/", {"minutes": 0, "comment": "a\x00b"}, format="json")
    assert bad.status_code == 400
    assert set(bad.json()) == {"minutes", "comment"}


# --- the page ---------------------------------------------------------------------------------------------


@pytest.fixture
def page_user() -> Client:
    client = Client()
    client.force_login(user_with("page-oncall", "change_alert"))
    return client


def test_the_page_lists_firing_acknowledged_and_resolved_alerts(page_user, alerts):
    response = page_user.get("/monitor/alerts/")

    assert response.status_code == 200
    html = response.content.decode()
    assert f'data-alert-id="{alerts["firing"].pk}" data-state="firing"' in html
    assert f'data-alert-id="{alerts["acknowledged"].pk}" data-state="acknowledged"' in html
    assert f'data-alert-id="{alerts["resolved"].pk}" data-state="resolved"' in html
    assert f'action="/monitor/alerts/{alerts["firing"].pk}/acknowledge/"' in html
    assert 'name="csrfmiddlewaretoken"' in html
    assert "<script>" not in html  # the CSP allows no inline script


def test_the_page_filters_by_state_and_refuses_a_bad_one(page_user, alerts):
    html = page_user.get("/monitor/alerts/?state=resolved").content.decode()
    assert f'data-alert-id="{alerts["resolved"].pk}"' in html
    assert f'data-alert-id="{alerts["firing"].pk}"' not in html
    assert page_user.get("/monitor/alerts/?state=burning").status_code == 400
    assert page_user.get("/monitor/alerts/?state=fir%00ing").status_code == 400


def test_the_page_is_refused_to_anonymous_when_the_monitor_is_private(alerts, settings):
    settings.KVDASH_PUBLIC_MONITOR = False
    response = Client().get("/monitor/alerts/")
    assert (response.status_code, response["Location"]) == (302, "/accounts/login/?next=/monitor/alerts/")

    settings.KVDASH_PUBLIC_MONITOR = True
    html = Client().get("/monitor/alerts/").content.decode()
    assert f'data-alert-id="{alerts["firing"].pk}"' in html
    assert "Acknowledge</button>" not in html  # reading is public, acting is not


def test_acknowledge_and_silence_from_the_page(page_user, alerts):
    firing = alerts["firing"]
    response = page_user.post(f"/monitor/alerts/{firing.pk}/acknowledge/")
    assert (response.status_code, response["Location"]) == (302, "/monitor/alerts/")
    firing.refresh_from_db()
    assert (firing.state, firing.acknowledged_by.username) == ("acknowledged", "page-oncall")

    response = page_user.post(f"/monitor/alerts/{firing.pk}/silence/", {"hours": "4", "scope": "endpoint"})
    assert response.status_code == 302
    silence = Silence.objects.get()
    assert (silence.rule_id, silence.endpoint_id, silence.ends_at) == (
        None,
        firing.endpoint_id,
        dt.datetime(2026, 12, 1, 4, 10, tzinfo=dt.UTC),
    )
    html = page_user.get("/monitor/alerts/").content.decode()
    assert f'data-silence-id="{silence.pk}"' in html
    assert 'data-silenced="true"' in html

    page_user.post(f"/monitor/silences/{silence.pk}/expire/")
    silence.refresh_from_db()
    assert silence.ends_at == dt.datetime(2026, 12, 1, 0, 10, tzinfo=dt.UTC)


def test_page_actions_need_the_right_and_valid_input(alerts):
    firing = alerts["firing"]
    anonymous = Client().post(f"/monitor/alerts/{firing.pk}/acknowledge/")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")

    reader = Client()
    reader.force_login(user_with("page-reader"))
    assert reader.post(f"/monitor/alerts/{firing.pk}/acknowledge/").status_code == 403
    assert reader.get(f"/monitor/alerts/{firing.pk}/acknowledge/").status_code == 405

    oncall = Client()
    oncall.force_login(user_with("page-oncall", "change_alert"))
    bad_hours = oncall.post(f"/monitor/alerts/{firing.pk}/silence/", {"hours": "5", "scope": "alert"})
    nul = oncall.post(f"/monitor/alerts/{firing.pk}/silence/", {"hours": "4", "scope": "alert", "comment": "a\x00"})
    assert (bad_hours.status_code, nul.status_code) == (400, 400)
    assert not Silence.objects.exists()
    assert oncall.post("/monitor/alerts/999999/acknowledge/").status_code == 404
