"""kvdash's own /metrics: the plans, scrape health and alert states of the endpoints, parsed back with
prometheus_client's own parser; who may read it."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from monitor_factories import endpoint_on
from prometheus_client.parser import text_string_to_metric_families

from monitor.models import Alert, AlertRule, Endpoint
from monitor.planned import endpoint_planned
from planner.models import GpuProfile, ModelProfile, Scenario
from planner.services import catalog_load

pytestmark = pytest.mark.django_db

TOKEN = "metrics-token-abc"


@pytest.fixture
def scenario() -> Scenario:
    catalog_load()
    return Scenario.objects.create(
        name="Llama 8B on H100",
        owner=get_user_model().objects.create_user("planner-owner"),
        model=ModelProfile.objects.get(slug="llama-3.1-8b"),
        gpu=GpuProfile.objects.get(slug="h100-sxm"),
        max_model_len=32768,
        concurrency=12,
    )


def _samples(text: str) -> dict[str, list]:
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


def test_metrics_carries_the_plan_of_every_endpoint_with_a_scenario(client, settings, scenario):
    settings.KVDASH_PUBLIC_MONITOR = True
    planned = endpoint_on("gpu-a", 9001, scenario_id=scenario.pk, name="llama-a")
    Endpoint.objects.filter(pk=planned.pk).update(up=True)
    unplanned = endpoint_on("gpu-b", 9002, name="bare")
    Endpoint.objects.filter(pk=unplanned.pk).update(up=False)
    endpoint_on("gpu-b", 9003, name="never-scraped")
    response = client.get("/metrics")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    samples = _samples(response.content.decode())
    plan = endpoint_planned(endpoint=Endpoint.objects.get(pk=planned.pk))
    expected_labels = {
        "endpoint": "llama-a",
        "endpoint_id": str(planned.pk),
        "node": "gpu-a",
        "model": ModelProfile.objects.get(slug="llama-3.1-8b").hf_id or "llama-3.1-8b",
        "scenario": "Llama 8B on H100",
        "vllm_instance": "127.0.0.1:9001",
    }
    for key, name in (
        ("kv_tokens", "kvdash_endpoint_planned_kv_tokens"),
        ("num_gpu_blocks", "kvdash_endpoint_planned_num_gpu_blocks"),
        ("max_concurrency", "kvdash_endpoint_planned_max_concurrency"),
    ):
        [sample] = samples[name]  # only the endpoint with a scenario has a plan
        assert sample.labels == expected_labels
        assert sample.value == pytest.approx(plan[key])
    up = {sample.labels["endpoint"]: sample.value for sample in samples["kvdash_endpoint_up"]}
    assert up == {"llama-a": 1.0, "bare": 0.0}  # never scraped: no sample rather than a guess


def test_metrics_carries_the_open_alerts(client, settings):
    settings.KVDASH_PUBLIC_MONITOR = True
    endpoint = endpoint_on("gpu-a", 9001, name="llama-a")
    rule = AlertRule.objects.create(
        name="KV nearly full (test)", kind="kv_usage_high", threshold=0.9, severity="critical"
    )
    now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    Alert.objects.create(rule=rule, endpoint=endpoint, started_at=now, last_seen_at=now, message="KV 95%")
    Alert.objects.create(
        rule=rule, endpoint=endpoint, started_at=now, last_seen_at=now, resolved_at=now, state="resolved", message="x"
    )
    samples = _samples(client.get("/metrics").content.decode())
    [firing] = samples["kvdash_alert_firing"]
    assert firing.labels == {
        "rule": "KV nearly full (test)",
        "severity": "critical",
        "state": "firing",
        "endpoint": "llama-a",
        "endpoint_id": str(endpoint.pk),
    }
    assert firing.value == 1.0


@pytest.mark.parametrize(
    ("header", "status"),
    [(None, 401), ("Bearer wrong", 401), (f"Basic {TOKEN}", 401), (f"Bearer {TOKEN}", 200), (f"bearer {TOKEN}", 200)],
)
def test_with_a_token_set_metrics_wants_it_as_a_bearer_token(settings, header, status):
    settings.KVDASH_METRICS_TOKEN = TOKEN
    settings.KVDASH_PUBLIC_MONITOR = True  # the token is asked for even when the monitor is public
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    response = Client().get("/metrics", **extra)
    assert response.status_code == status
    if status == 401:
        assert response["WWW-Authenticate"].startswith("Bearer")


def test_without_a_token_metrics_follows_the_monitors_read_rule(settings):
    settings.KVDASH_METRICS_TOKEN = ""
    settings.KVDASH_PUBLIC_MONITOR = False
    assert Client().get("/metrics").status_code == 401
    signed_in = Client()
    signed_in.force_login(get_user_model().objects.create_user("oncall"))
    assert signed_in.get("/metrics").status_code == 200
    settings.KVDASH_PUBLIC_MONITOR = True
    assert Client().get("/metrics").status_code == 200
