"""The monitor's REST API: nodes, endpoints (register, read, change), series; who may do what."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from monitor_factories import T0, endpoint_entry, endpoint_on, engine_values, node_with_key, payload, sealed
from rest_framework.test import APIClient

from monitor.ingest import ingest_signed
from monitor.models import Endpoint
from planner.models import GpuProfile, ModelProfile, Scenario
from planner.services import catalog_load

pytestmark = pytest.mark.django_db


@pytest.fixture
def reader() -> APIClient:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user("oncall"))
    return client


@pytest.fixture
def admin() -> APIClient:
    user = get_user_model().objects.create_user("monitor-admin")
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="monitor", codename__in=["add_endpoint", "change_endpoint"])
    )
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def scenario() -> Scenario:
    catalog_load()
    owner = get_user_model().objects.create_user("planner-owner")
    return Scenario.objects.create(
        name="Llama 8B on H100",
        owner=owner,
        model=ModelProfile.objects.get(slug="llama-3.1-8b"),
        gpu=GpuProfile.objects.get(slug="h100-sxm"),
        max_model_len=32768,
        concurrency=12,
    )


def test_an_admin_registers_an_endpoint_and_reads_it_back(admin, scenario):
    response = admin.post(
        "/api/v1/endpoints/",
        {"url": "http://10.0.0.7:8000/", "node": "gpu-a", "name": "llama", "scenario": scenario.pk},
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["url"], body["node"], body["name"], body["up"], body["engines"]) == (
        "http://10.0.0.7:8000",
        "gpu-a",
        "llama",
        None,
        [],
    )
    # The plan of the scenario, per engine (llama-3.1-8b on one H100 at 32K, figures of the sizing tests).
    assert body["planned"]["scenario"] == scenario.pk
    assert body["planned"]["block_size"] == 16
    assert body["planned"]["kv_tokens"] == body["planned"]["num_gpu_blocks"] * 16
    listed = admin.get("/api/v1/endpoints/").json()
    assert [row["id"] for row in listed["results"]] == [body["id"]]
    # Registering the same URL again updates, it does not duplicate.
    again = admin.post("/api/v1/endpoints/", {"url": "http://10.0.0.7:8000", "node": "gpu-a"}, format="json")
    assert again.status_code == 200 and Endpoint.objects.count() == 1


def test_the_detail_carries_the_latest_values_per_engine(reader, frozen_now):
    _node, key = node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9001)
    engines = [engine_values("0"), engine_values("1", kv_cache_usage=0.5)]
    ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0, engines=engines)]), key))
    body = reader.get(f"/api/v1/endpoints/{endpoint.pk}/").json()
    assert body["up"] is True and body["last_error"] == ""
    assert body["last_scrape_at"] == "2026-12-01T00:00:00Z"
    assert [(e["engine"], e["kv_cache_usage"], e["num_gpu_blocks"]) for e in body["engines"]] == [
        ("0", 0.25, 1000),
        ("1", 0.5, 1000),
    ]
    assert body["planned"] is None


def test_series_answers_points_with_null_gaps(reader, frozen_now):
    _node, key = node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9001)
    for offset, up in ((0, True), (10, False), (20, True)):
        ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0 + offset, up=up)]), key))
    response = reader.get(
        f"/api/v1/endpoints/{endpoint.pk}/series/",
        {"metric": "kv_cache_usage", "start": int(T0), "end": int(T0) + 29, "step": 10},
    )
    assert response.status_code == 200
    assert response.json() == {
        "metric": "kv_cache_usage",
        "step": 10,
        "source": "raw",
        "points": [[1796083200, 0.25], [1796083210, None], [1796083220, 0.25]],
    }
    rfc3339 = reader.get(
        f"/api/v1/endpoints/{endpoint.pk}/series/",
        {"metric": "num_requests_running", "start": "2026-12-01T00:00:00Z", "end": "2026-12-01T00:00:09Z"},
    )
    # No step given: the scrape interval (10 s), so the 9 s window is one step holding the first sample.
    assert rfc3339.json()["points"] == [[1796083200, 3.0]]


@pytest.mark.parametrize(
    "query",
    [
        {"metric": "nope"},
        {"metric": "kv_cache_usage", "start": "yesterday"},
        {"metric": "kv_cache_usage", "start": "nan"},
        {"metric": "kv_cache_usage", "start": "1e400"},
        {"metric": "kv_cache_usage", "start": "2026-12-01\x00"},
        {"metric": "kv_cache_usage", "start": "1796083300", "end": "1796083200"},
        {"metric": "kv_cache_usage", "step": "0"},
        {"metric": "kv_cache_usage", "start": "0", "end": "1796083200"},
    ],
)
def test_bad_series_queries_answer_400_naming_the_field(reader, frozen_now, query):
    node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9001)
    response = reader.get(f"/api/v1/endpoints/{endpoint.pk}/series/", query)
    assert response.status_code == 400
    assert set(response.json()) & {"metric", "start", "end", "step"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://x", "node": "gpu-a"}, "url"),
        ({"url": "http://ok:8000", "node": "Bad Name!"}, "node"),
        ({"url": "http://ok:8000", "node": "gpu-a", "scenario": 999999}, "scenario"),
        ({"url": "http://ok\x00:8000", "node": "gpu-a"}, "url"),
        ({"node": "gpu-a"}, "url"),
    ],
)
def test_bad_registrations_answer_400_naming_the_field(admin, body, field):
    response = admin.post("/api/v1/endpoints/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert Endpoint.objects.count() == 0


def test_patch_disables_an_endpoint_and_ties_it_to_a_scenario(admin, scenario):
    node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9001)
    response = admin.patch(
        f"/api/v1/endpoints/{endpoint.pk}/", {"enabled": False, "scenario": scenario.pk}, format="json"
    )
    assert response.status_code == 200
    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.scenario_id) == (False, scenario.pk)


def test_nodes_list_their_gpus_and_heartbeat(reader, frozen_now):
    _node, key = node_with_key("gpu-a")
    ingest_signed(**sealed(payload("gpu-a", [], nvml={"available": False, "error": "NVML unavailable: x"}), key))
    body = reader.get("/api/v1/nodes/").json()
    assert [(n["name"], n["queue"], n["nvml_available"], n["nvml_error"]) for n in body["results"]] == [
        ("gpu-a", "agent.gpu-a", False, "NVML unavailable: x")
    ]
    assert body["results"][0]["last_heartbeat_at"] == "2026-12-01T00:10:00Z"


def test_anonymous_users_cannot_read_the_monitor_when_public_access_is_off(settings, frozen_now):
    settings.KVDASH_PUBLIC_MONITOR = False
    node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9001)
    anon = APIClient()
    for url in ("/api/v1/nodes/", "/api/v1/endpoints/", f"/api/v1/endpoints/{endpoint.pk}/"):
        assert anon.get(url).status_code in (401, 403)
    assert anon.get(f"/api/v1/endpoints/{endpoint.pk}/series/", {"metric": "kv_cache_usage"}).status_code in (401, 403)


def test_readers_cannot_register_or_change_endpoints(reader):
    assert reader.post("/api/v1/endpoints/", {"url": "http://x:1", "node": "a"}, format="json").status_code == 403
    assert Endpoint.objects.count() == 0


def test_the_schema_documents_the_monitor_api(reader):
    schema = reader.get("/api/schema/", {"format": "json"}).json()
    for path in ("/api/v1/nodes/", "/api/v1/endpoints/", "/api/v1/endpoints/{id}/", "/api/v1/endpoints/{id}/series/"):
        assert path in schema["paths"]


def test_ids_past_a_bigint_answer_400_or_404_never_500(admin, reader):
    huge = 10**20
    assert reader.get("/api/v1/alerts/", {"endpoint": huge}).status_code == 400
    assert reader.get(f"/api/v1/endpoints/{huge}/").status_code == 404
    response = admin.post(
        "/api/v1/endpoints/", {"url": "http://x:8000", "node": "gpu-a", "scenario": huge}, format="json"
    )
    assert response.status_code == 400 and "scenario" in response.json()
