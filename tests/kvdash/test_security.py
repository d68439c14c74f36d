"""Security properties the deployment relies on (issue 11): an agent's key writes its own node only, also through
the Celery task; the monitor is closed to anonymous users when public access is off; production error pages
carry no stack trace.

The key-per-node rule at the ingest function is proven in tests/monitor/test_monitor_ingest.py
(``foreign_endpoint`` and ``wrong_node``); the API's side of public access in tests/monitor/test_monitor_api.py."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import pytest
from django.test import Client
from django.urls import path
from django.utils import timezone

# The monitor's factories, shared with tests/monitor (pytest puts only this folder on the path).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "monitor"))

from monitor_factories import T0, endpoint_entry, endpoint_on, node_with_key, payload, sealed

from monitor.models import EngineSample, IngestDrop
from monitor.tasks import ingest_batch

SECRET_MESSAGE = "kaboom-secret-detail-0451"


def _boom(request):
    raise RuntimeError(SECRET_MESSAGE)


urlpatterns = [path("boom/", _boom)]


@pytest.fixture
def frozen_now(monkeypatch: pytest.MonkeyPatch) -> dt.datetime:
    moment = dt.datetime(2026, 12, 1, 0, 10, tzinfo=dt.UTC)
    monkeypatch.setattr(timezone, "now", lambda: moment)
    return moment


@pytest.mark.django_db
def test_an_agent_key_cannot_write_another_nodes_samples_through_the_ingest_task(frozen_now):
    _node_a, key_a = node_with_key("gpu-a")
    node_with_key("gpu-b")
    theirs = endpoint_on("gpu-b", 9002)
    # gpu-a's key, gpu-a's name, gpu-b's endpoint: the entry is dropped.
    result = ingest_batch.apply(args=list(sealed(payload("gpu-a", [endpoint_entry(theirs.pk, T0)]), key_a).values()))
    assert result.get()["dropped"] == {"foreign_endpoint": 1}
    # gpu-a's key claiming to be gpu-b: the whole batch is refused.
    result = ingest_batch.apply(args=list(sealed(payload("gpu-b", [endpoint_entry(theirs.pk, T0)]), key_a).values()))
    assert result.get()["refused"] == "wrong_node"
    assert not EngineSample.objects.filter(endpoint_id=theirs.pk).exists()
    assert set(IngestDrop.objects.values_list("node_name", "reason")) == {
        ("gpu-a", "foreign_endpoint"),
        ("gpu-a", "wrong_node"),
    }


@pytest.mark.django_db
def test_anonymous_users_cannot_read_the_monitor_pages_when_public_access_is_off(settings):
    settings.KVDASH_PUBLIC_MONITOR = False
    settings.KVDASH_METRICS_TOKEN = ""
    endpoint = endpoint_on("gpu-a", 9001, name="secret-llama")
    anonymous = Client()
    pages = [
        "/monitor/",
        f"/monitor/endpoints/{endpoint.pk}/",
        "/monitor/report/",
        "/monitor/alerts/",
        "/monitor/fleet.json",
        f"/monitor/endpoints/{endpoint.pk}/charts.json",
        "/metrics",
        "/api/v1/prometheus-sources/",
        "/api/v1/prometheus-targets/",
    ]
    for url in pages:
        response = anonymous.get(url)
        assert response.status_code in (302, 401, 403), url
        if response.status_code == 302:
            assert response["Location"].startswith("/accounts/login/"), url
        assert b"secret-llama" not in response.content, url


@pytest.fixture
def production_errors(settings):
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["testserver"]
    settings.ROOT_URLCONF = __name__


@pytest.mark.django_db
def test_a_production_404_shows_no_debug_page(production_errors):
    response = Client().get("/no/such/page/")
    assert response.status_code == 404
    body = response.content.decode()
    assert "Traceback" not in body and "URLconf" not in body and "DEBUG = True" not in body


@pytest.mark.django_db
def test_a_production_500_shows_no_stack_trace(production_errors):
    response = Client(raise_request_exception=False).get("/boom/")
    assert response.status_code == 500
    body = response.content.decode()
    for leak in ("Traceback", SECRET_MESSAGE, "RuntimeError", "SECRET_KEY", "settings.py"):
        assert leak not in body, leak
