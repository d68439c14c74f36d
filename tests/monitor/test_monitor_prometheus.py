"""Endpoints read from an existing Prometheus: the query-API client, the pull into samples and health, and the
charts, report and registration on top, against a real HTTP server on loopback answering from fixtures shaped
as Prometheus' /api/v1/query and /api/v1/query_range answers."""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.utils import timezone
from monitor_factories import T0, endpoint_on
from rest_framework.test import APIClient

from monitor.models import Endpoint, EngineSample, Node, PrometheusSource, PrometheusTarget
from monitor.prometheus_sources import prometheus_endpoint_register, prometheus_source_save, prometheus_target_pull
from monitor.prometheus_tasks import pull_prometheus, pull_prometheus_target
from monitor.report import endpoint_report
from monitor.scrape import ScrapeError
from monitor.scrape.prometheus import PrometheusClient, selector_valid
from monitor.selectors import scrape_plan
from planner.models import GpuProfile, ModelProfile, Scenario
from planner.services import catalog_load

FIXTURE = json.loads((Path(__file__).parent / "data" / "prometheus_query_api.json").read_text())
SELECTOR = '{instance="10.0.0.7:8000", job="vllm"}'
TOKEN = "prom-token-123"
EMPTY_MATRIX = {"status": "success", "data": {"resultType": "matrix", "result": []}}
EMPTY_VECTOR = {"status": "success", "data": {"resultType": "vector", "result": []}}
# Points per engine in the fixture: 61 steps over ten minutes, less the six of the gap.
POINTS = 61 - 6


class QueryApi:
    """What the loopback server answers: fixtures by metric name, or a forced error; it records each request."""

    def __init__(self) -> None:
        self.answers = copy.deepcopy(FIXTURE)
        self.error: tuple[int, dict[str, Any]] | None = None
        self.requests: list[tuple[str, dict[str, str], str]] = []

    def answer(self, path: str, params: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if self.error is not None:
            return self.error
        kind = {"/api/v1/query": "query", "/api/v1/query_range": "query_range"}.get(path)
        if kind is None:
            return 404, {"status": "error", "errorType": "not_found", "error": "no such path"}
        names = re.findall(r"vllm:[a-z_]+", params.get("query", ""))
        empty = EMPTY_VECTOR if kind == "query" else EMPTY_MATRIX
        answer = copy.deepcopy(self.answers[kind].get(names[0], empty)) if names else empty
        if kind == "query_range":
            # Prometheus answers only the points inside [start, end].
            start, end = float(params["start"]), float(params["end"])
            for series in answer["data"]["result"]:
                series["values"] = [point for point in series["values"] if start <= point[0] <= end]
            answer["data"]["result"] = [series for series in answer["data"]["result"] if series["values"]]
        return 200, answer


@pytest.fixture
def query_api() -> Iterator[tuple[QueryApi, str]]:
    api = QueryApi()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            params = {key: values[0] for key, values in parse_qs(parts.query).items()}
            api.requests.append((parts.path, params, self.headers.get("Authorization", "")))
            code, body = api.answer(parts.path, params)
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def scenario(db: None) -> Scenario:
    catalog_load()
    return Scenario.objects.create(
        name="Llama 8B on H100",
        owner=get_user_model().objects.create_user("planner-owner"),
        model=ModelProfile.objects.get(slug="llama-3.1-8b"),
        gpu=GpuProfile.objects.get(slug="h100-sxm"),
        max_model_len=32768,
        concurrency=12,
    )


def _target(base_url: str, scenario: Scenario | None = None) -> PrometheusTarget:
    prometheus_source_save(name="prom-main", base_url=base_url, bearer_token=TOKEN)
    target, _ = prometheus_endpoint_register(
        name="llama-prom", source="prom-main", selector=SELECTOR, scenario_id=scenario.pk if scenario else None
    )
    return target


# -- the client ---------------------------------------------------------------------------------------------


def test_the_client_reads_a_matrix_and_a_vector_and_leaves_nan_out(query_api):
    api, url = query_api
    client = PrometheusClient(base_url=url, bearer_token=TOKEN)
    matrix = client.query_range(
        f"max by (engine) (vllm:gpu_cache_usage_perc{SELECTOR})", start=T0, end=T0 + 600, step=10
    )
    by_engine = {series.labels["engine"]: series.points for series in matrix}
    assert len(by_engine["0"]) == POINTS
    assert len(by_engine["1"]) == POINTS - 1  # its "NaN" at 00:06:40 is not a point
    assert by_engine["0"][0] == (T0, 0.3) and by_engine["0"][-1] == (T0 + 600, 0.97)
    vector = client.query(f"vllm:cache_config_info{SELECTOR}", at=T0 + 600)
    assert {series.labels["num_gpu_blocks"] for series in vector} == {"27000"}
    path, params, auth = api.requests[0]
    assert path == "/api/v1/query_range" and params["step"] == "10.000" and auth == f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    ("code", "body", "retryable"),
    [
        (400, {"status": "error", "errorType": "bad_data", "error": "parse error at char 5"}, False),
        (422, {"status": "error", "errorType": "execution", "error": "many-to-many matching"}, False),
        (503, {"status": "error", "errorType": "timeout", "error": "query timed out"}, True),
        (401, {"status": "error", "error": "unauthorized"}, False),
        (200, {"status": "success", "data": {"resultType": "scalar", "result": [T0, "1"]}}, False),
    ],
)
def test_the_client_raises_one_error_type_that_says_whether_to_retry(query_api, code, body, retryable):
    api, url = query_api
    api.error = (code, body)
    with pytest.raises(ScrapeError) as raised:
        PrometheusClient(base_url=url).query("vllm:num_requests_running")
    assert raised.value.retryable is retryable


def test_a_source_that_refuses_connections_is_a_retryable_error():
    with pytest.raises(ScrapeError) as raised:
        PrometheusClient(base_url="http://127.0.0.1:9", timeout=2).query("up")
    assert raised.value.retryable


@pytest.mark.parametrize(
    ("selector", "valid"),
    [
        ('{instance="10.0.0.7:8000"}', True),
        ('{job="vllm", model_name=~"llama.*"}', True),
        ('{instance="a\\"b"}', True),
        ("{}", False),
        ('instance="10.0.0.7:8000"', False),
        ('{instance="x"} or up', False),
        ('{instance="x"}\n', False),
    ],
)
def test_a_selector_is_label_matchers_in_braces(selector, valid):
    assert selector_valid(selector) is valid


# -- the pull: samples, health, charts, report ----------------------------------------------------------------


@pytest.mark.django_db
def test_a_pull_stores_prometheus_points_as_samples_with_its_gaps_and_the_latest_values(query_api, frozen_now):
    api, url = query_api
    target = _target(url)
    outcome = prometheus_target_pull(target_id=target.pk)
    assert outcome.up and outcome.error == ""
    rows = EngineSample.objects.filter(endpoint_id=target.endpoint_id)
    assert rows.filter(engine=0).count() == POINTS and rows.filter(engine=1).count() == POINTS
    # The gap stays a gap: no row between 00:03:00 and 00:03:50, never a zero.
    assert not rows.filter(time__gte=_at(180), time__lt=_at(240)).exists()
    # The NaN is a missing value in a row that has the other values.
    nan_row = rows.get(engine=1, time=_at(400))
    assert nan_row.kv_cache_usage is None and nan_row.num_requests_running == 6
    last = rows.get(engine=0, time=_at(600))
    assert (last.kv_cache_usage, last.num_requests_running, last.num_gpu_blocks, last.block_size) == (
        0.97,
        19,
        27000,
        16,
    )
    assert (last.request_success_total, last.ttft_sum, last.ttft_count) == (120, 15.0, 120)
    endpoint = Endpoint.objects.get(pk=target.endpoint_id)
    assert (endpoint.up, endpoint.last_error, endpoint.consecutive_failures) == (True, "", 0)
    assert endpoint.last_success_at == _at(600)
    assert endpoint.latest["0"]["num_gpu_blocks"] == 27000
    assert endpoint.latest["0"]["cache_dtype"] == "auto" and endpoint.latest["0"]["gpu_memory_utilization"] == 0.9
    # Every query carried the selector and the token; the old gauge name was read when the new one was absent.
    queries = [params["query"] for _path, params, _auth in api.requests]
    assert all(SELECTOR in query for query in queries)
    assert {auth for _path, _params, auth in api.requests} == {f"Bearer {TOKEN}"}
    assert queries.index(f"max by (engine) (vllm:kv_cache_usage_perc{SELECTOR})") < queries.index(
        f"max by (engine) (vllm:gpu_cache_usage_perc{SELECTOR})"
    )


def _at(offset: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(T0 + offset, tz=dt.UTC)


@pytest.mark.django_db
def test_a_second_pull_overlaps_and_writes_nothing_twice(query_api, frozen_now):
    _api, url = query_api
    target = _target(url)
    prometheus_target_pull(target_id=target.pk)
    again = prometheus_target_pull(target_id=target.pk)
    assert again.up
    assert EngineSample.objects.filter(endpoint_id=target.endpoint_id).count() == 2 * POINTS


@pytest.mark.django_db
def test_the_new_kv_gauge_name_is_preferred_when_prometheus_has_both(query_api, frozen_now):
    api, url = query_api
    newer = copy.deepcopy(FIXTURE["query_range"]["vllm:gpu_cache_usage_perc"])
    for series in newer["data"]["result"]:
        series["values"] = [[moment, "0.125"] for moment, _value in series["values"]]
    api.answers["query_range"]["vllm:kv_cache_usage_perc"] = newer
    target = _target(url)
    prometheus_target_pull(target_id=target.pk)
    assert EngineSample.objects.get(endpoint_id=target.endpoint_id, engine=0, time=_at(600)).kv_cache_usage == 0.125


@pytest.mark.django_db
def test_a_failing_source_marks_the_endpoint_down_and_stores_no_rows(query_api, frozen_now, monkeypatch):
    api, url = query_api
    target = _target(url)
    api.error = (503, {"status": "error", "errorType": "unavailable", "error": "TSDB not ready"})
    outcome = prometheus_target_pull(target_id=target.pk)
    monkeypatch.setattr(timezone, "now", lambda: frozen_now + dt.timedelta(seconds=10))
    prometheus_target_pull(target_id=target.pk)
    assert not outcome.up and "TSDB not ready" in outcome.error
    endpoint = Endpoint.objects.get(pk=target.endpoint_id)
    assert endpoint.up is False and "Prometheus prom-main" in endpoint.last_error
    assert endpoint.consecutive_failures == 2
    assert not EngineSample.objects.filter(endpoint_id=target.endpoint_id).exists()


@pytest.mark.django_db
def test_a_server_prometheus_no_longer_sees_is_down(query_api, frozen_now):
    api, url = query_api
    api.answers = {"query": {}, "query_range": {}}
    target = _target(url)
    outcome = prometheus_target_pull(target_id=target.pk)
    endpoint = Endpoint.objects.get(pk=target.endpoint_id)
    assert not outcome.up and endpoint.up is False and "no recent samples" in endpoint.last_error


@pytest.mark.django_db
def test_charts_and_the_report_read_a_prometheus_endpoint_as_they_read_an_agents(query_api, frozen_now, scenario):
    _api, url = query_api
    target = _target(url, scenario)
    pull_prometheus_target.apply(args=[target.pk]).get()
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user("oncall"))
    series = client.get(
        f"/api/v1/endpoints/{target.endpoint_id}/series/",
        {"metric": "kv_cache_usage", "start": T0, "end": T0 + 600, "step": 10},
    ).json()
    points = dict((int(t), value) for t, value in series["points"])
    assert series["source"] == "raw"
    assert points[T0] == 0.5 and points[T0 + 600] == 0.97  # the max over the two engines
    assert all(points[T0 + offset] is None for offset in range(180, 240, 10))
    running = client.get(
        f"/api/v1/endpoints/{target.endpoint_id}/series/",
        {"metric": "num_requests_running", "start": T0, "end": T0 + 600, "step": 10},
    ).json()
    assert dict((int(t), v) for t, v in running["points"])[T0 + 600] == 19 + 6  # summed over engines
    report = endpoint_report(endpoint=Endpoint.objects.select_related("scenario").get(pk=target.endpoint_id))
    assert report["actual_num_gpu_blocks"] == 27000 and report["actual_kv_tokens"] == 27000 * 16
    assert report["planned_num_gpu_blocks"] > 0 and report["deviation_pct"] is not None


# -- agents skip them; the round queues each ------------------------------------------------------------------


@pytest.mark.django_db
def test_agents_do_not_scrape_prometheus_endpoints(query_api):
    _api, url = query_api
    scraped = endpoint_on("gpu-a", 9001)
    Node.objects.filter(name="gpu-a").update(last_heartbeat_at=timezone.now())  # its agent said hello
    target = _target(url)
    plan = scrape_plan()
    listed = {item["id"] for items in plan.values() for item in items}
    assert scraped.pk in listed and target.endpoint_id not in listed
    # Its node runs no agent: no scrape is queued for it at all.
    assert "prom-main" not in plan and "gpu-a" in plan


@pytest.mark.django_db
def test_a_pull_round_queues_one_pull_per_enabled_target(query_api, monkeypatch):
    _api, url = query_api
    target = _target(url)
    prometheus_source_save(name="prom-off", base_url=url, enabled=False)
    prometheus_endpoint_register(name="off", source="prom-off", selector='{instance="10.0.0.9:8000"}')
    queued = []
    monkeypatch.setattr(pull_prometheus_target, "apply_async", lambda args, **kw: queued.append((args, kw)))
    assert pull_prometheus.apply().get() == 1
    assert queued == [([target.pk], {"expires": 10.0})]


# -- registration: command, API, admin ------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_command_registers_an_endpoint_read_from_prometheus(query_api, scenario, monkeypatch, capsys):
    _api, url = query_api
    monkeypatch.setenv("PROM_TOKEN", TOKEN)
    call_command(
        "register_prometheus_endpoint",
        "llama",
        "--source",
        url,
        "--selector",
        '{instance="10.0.0.7:8000"}',
        "--scenario",
        str(scenario.pk),
        "--token-env",
        "PROM_TOKEN",
        "--json",
    )
    row = json.loads(capsys.readouterr().out)
    endpoint = Endpoint.objects.get(pk=row["id"])
    assert (endpoint.url, endpoint.node.name, endpoint.scenario_id) == (
        "http://10.0.0.7:8000",
        "prometheus",
        scenario.pk,
    )
    assert PrometheusSource.objects.get(name="prometheus").bearer_token == TOKEN
    assert TOKEN not in json.dumps(row)


@pytest.mark.django_db
def test_the_api_registers_sources_and_targets_and_never_shows_the_token(query_api):
    _api, url = query_api
    user = get_user_model().objects.create_user("monitor-admin")
    user.user_permissions.add(*Permission.objects.filter(codename__in=["add_prometheussource", "add_prometheustarget"]))
    admin = APIClient()
    admin.force_authenticate(user)
    created = admin.post(
        "/api/v1/prometheus-sources/", {"name": "prom-main", "base_url": url, "bearer_token": TOKEN}, format="json"
    )
    assert created.status_code == 201 and created.json()["has_bearer_token"] is True
    listed = admin.get("/api/v1/prometheus-sources/")
    assert TOKEN not in listed.content.decode() and listed.json()["results"][0]["name"] == "prom-main"
    bad = admin.post(
        "/api/v1/prometheus-targets/", {"name": "x", "source": "prom-main", "selector": "up"}, format="json"
    )
    assert bad.status_code == 400 and "selector" in bad.json()
    made = admin.post(
        "/api/v1/prometheus-targets/",
        {"name": "llama", "source": "prom-main", "selector": SELECTOR},
        format="json",
    )
    assert made.status_code == 201, made.content
    assert made.json()["selector"] == SELECTOR and made.json()["source"] == "prom-main"
    assert Endpoint.objects.get(pk=made.json()["endpoint"]).url == "http://10.0.0.7:8000"
    reader = APIClient()
    reader.force_authenticate(get_user_model().objects.create_user("oncall"))
    refused = reader.post("/api/v1/prometheus-sources/", {"name": "p2", "base_url": url}, format="json")
    assert refused.status_code == 403


@pytest.mark.django_db
def test_the_admin_never_renders_the_token(query_api, admin_client):
    _api, url = query_api
    source, _ = prometheus_source_save(name="prom-main", base_url=url, bearer_token=TOKEN)
    for page in ("/admin/monitor/prometheussource/", f"/admin/monitor/prometheussource/{source.pk}/change/"):
        response = admin_client.get(page)
        assert response.status_code == 200 and TOKEN not in response.content.decode()
    # Saved with the field left blank: the stored token is kept.
    response = admin_client.post(
        f"/admin/monitor/prometheussource/{source.pk}/change/",
        {"name": "prom-main", "base_url": url, "bearer_token": "", "enabled": "on"},
    )
    assert response.status_code == 302
    assert PrometheusSource.objects.get(pk=source.pk).bearer_token == TOKEN


@pytest.mark.django_db
def test_an_alert_rule_fires_on_a_prometheus_endpoint(query_api, frozen_now):
    from monitor.alerting import alerts_evaluate
    from monitor.models import Alert, AlertRule

    _api, url = query_api
    target = _target(url)
    # Engine 0's KV usage reaches 0.9 at 00:08:00 and stays there to 00:10:00 in the fixture.
    rule = AlertRule.objects.create(
        name="KV high (prometheus test)", kind="kv_usage_high", threshold=0.9, duration_s=60
    )
    prometheus_target_pull(target_id=target.pk)
    alerts_evaluate(now=frozen_now)
    alert = Alert.objects.get(rule=rule, endpoint_id=target.endpoint_id)
    assert alert.state == "firing" and alert.value == pytest.approx(0.97)
    assert alert.since == _at(480)
