"""Planned vs actual, time to saturation, tile states, and the monitor's pages."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from monitor_factories import T0, endpoint_entry, endpoint_on, engine_values, node_with_key, payload, sealed
from rest_framework.test import APIClient

from monitor.fleet import tile_state
from monitor.ingest import ingest_signed
from monitor.report import endpoint_report
from monitor.saturation import time_to_saturation
from planner.models import GpuProfile, ModelProfile, Scenario
from planner.services import catalog_load

pytestmark = pytest.mark.django_db


@pytest.fixture
def qwen_on_l40s(frozen_now):
    """Qwen2.5 7B on an L40S at vLLM's default utilisation (0.92): 30,547 blocks of 16 tokens per the engine's
    sizing tests of this scenario (the demo fleet's misconfigured member)."""
    catalog_load()
    scenario = Scenario.objects.create(
        name="Qwen2.5 7B on L40S",
        owner=get_user_model().objects.create_user("planner"),
        model=ModelProfile.objects.get(slug="qwen2.5-7b"),
        gpu=GpuProfile.objects.get(slug="l40s"),
        max_model_len=16384,
        concurrency=8,
        engine_version="0.19",  # the block counts below are v0.19's profile ("latest" adds the CUDA-graph reserve)
    )
    _node, key = node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9001, scenario_id=scenario.pk, name="qwen")
    return endpoint, key


def report_for(endpoint, key, at=T0, **engine):
    ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, at, engines=[engine_values(**engine)])]), key))
    endpoint.refresh_from_db()
    return endpoint_report(endpoint=endpoint)


def test_a_server_started_with_a_lower_utilisation_is_flagged_with_that_cause(qwen_on_l40s):
    endpoint, key = qwen_on_l40s
    # What the simulated server started with --gpu-memory-utilization 0.80 reports in cache_config_info.
    report = report_for(endpoint, key, num_gpu_blocks=24277, block_size=16, gpu_memory_utilization=0.8)
    assert report["planned_num_gpu_blocks"] == 30547
    assert report["actual_num_gpu_blocks"] == 24277
    assert (report["planned_kv_tokens"], report["actual_kv_tokens"]) == (488752, 388432)
    # (388,432 - 488,752) / 488,752 = -20.53 %
    assert report["deviation_pct"] == -20.53
    assert report["flagged"] is True
    assert report["likely_cause"] == "gpu_memory_utilization"
    assert "0.8" in report["cause_detail"] and "0.92" in report["cause_detail"]


def test_a_different_block_size_is_named(qwen_on_l40s):
    endpoint, key = qwen_on_l40s
    # Same memory, pages of 32 tokens: half the blocks, the same tokens, so no deviation at all.
    report = report_for(endpoint, key, num_gpu_blocks=15273, block_size=32, gpu_memory_utilization=0.92)
    assert report["flagged"] is False and report["likely_cause"] is None
    assert abs(report["deviation_pct"]) < 0.1


def test_a_gap_no_setting_explains_points_at_the_estimates(qwen_on_l40s):
    endpoint, key = qwen_on_l40s
    # 10 % fewer blocks with the planned settings: not utilisation, block size or dtype.
    report = report_for(endpoint, key, num_gpu_blocks=27492, block_size=16, gpu_memory_utilization=0.92)
    assert report["deviation_pct"] == -10.0
    assert report["likely_cause"] == "estimate"


def test_within_five_percent_is_not_flagged(qwen_on_l40s):
    endpoint, key = qwen_on_l40s
    report = report_for(endpoint, key, num_gpu_blocks=30000, block_size=16, gpu_memory_utilization=0.92)
    # (30,000 - 30,547) / 30,547 = -1.79 %
    assert (report["deviation_pct"], report["flagged"]) == (-1.79, False)


def test_the_report_api_answers_the_contract_keys(qwen_on_l40s):
    endpoint, key = qwen_on_l40s
    report_for(endpoint, key, num_gpu_blocks=24277, block_size=16, gpu_memory_utilization=0.8)
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user("oncall"))
    body = client.get(f"/api/v1/endpoints/{endpoint.pk}/report/").json()
    assert {
        "planned_num_gpu_blocks",
        "actual_num_gpu_blocks",
        "planned_kv_tokens",
        "actual_kv_tokens",
        "deviation_pct",
        "likely_cause",
    } <= set(body)
    assert (body["deviation_pct"], body["likely_cause"]) == (-20.53, "gpu_memory_utilization")
    bare = endpoint_on("gpu-a", 9002)
    assert client.get(f"/api/v1/endpoints/{bare.pk}/report/").status_code == 404


@pytest.mark.parametrize(
    ("usage", "waiting", "expected"),
    [
        # Rising 0.1 per 10 minutes and already at 1.0: full now. Flat or falling: not at this rate.
        ([(i * 600.0, 0.5 + 0.1 * i) for i in range(6)], [], 0.0),
        ([(i * 60.0, 0.4) for i in range(10)], [], None),
        ([(i * 60.0, 0.8 - 0.01 * i) for i in range(10)], [], None),
        ([(i * 60.0, 0.995) for i in range(10)], [(540.0, 3.0)], 0.0),
    ],
)
def test_time_to_saturation_follows_the_trend(usage, waiting, expected):
    estimate = time_to_saturation(usage, waiting)
    assert estimate.seconds == expected


def test_a_rising_trend_gives_the_minutes_left():
    # 0.30 -> 0.75 over 45 minutes: 0.01 per minute, so 25 minutes from 0.75 to 1.0.
    estimate = time_to_saturation([(i * 300.0, 0.30 + 0.05 * i) for i in range(10)], [])
    assert estimate.seconds == pytest.approx(25 * 60)
    assert estimate.label == "in ~25 min"
    assert time_to_saturation([(0.0, 0.5)], []).label == "not at this rate"


@pytest.mark.parametrize(
    ("up", "age", "kv", "preemptions", "state"),
    [
        (True, 5, 0.5, 0.0, "ok"),
        (True, 5, 0.9, 0.0, "warning"),
        (True, 5, 0.98, 0.0, "critical"),
        (True, 5, 0.2, 0.01, "critical"),
        (False, 5, 0.99, 0.0, "down"),
        (True, 31, 0.5, 0.0, "stale"),
        (True, None, None, None, "stale"),
    ],
)
def test_tile_states_follow_vllm_dashboard_thresholds(up, age, kv, preemptions, state):
    assert tile_state(up=up, age_s=age, kv=kv, preemptions_per_s=preemptions) == state


def test_pages_render_and_the_json_carries_the_tile_contract(client, qwen_on_l40s, settings):
    settings.KVDASH_PUBLIC_MONITOR = True
    endpoint, key = qwen_on_l40s
    # Scraped 5 s before the (frozen) clock: fresh, and fuller than vLLM's red line.
    report_for(
        endpoint, key, at=T0 + 595, kv_cache_usage=0.99, num_gpu_blocks=24277, block_size=16, gpu_memory_utilization=0.8
    )
    page = client.get("/monitor/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'data-endpoint-id="{endpoint.pk}"' in html and 'data-state="critical"' in html
    assert 'data-kv-usage="0.99"' in html
    tiles = client.get("/monitor/fleet.json").json()["tiles"]
    assert [(t["endpoint_id"], t["state"], t["kv_usage"]) for t in tiles] == [(endpoint.pk, "critical", 0.99)]
    detail = client.get(f"/monitor/endpoints/{endpoint.pk}/").content.decode()
    for range_key in ("15m", "1h", "6h", "24h", "7d", "custom"):
        assert f'data-range="{range_key}"' in detail
    assert 'data-likely-cause="gpu_memory_utilization"' in detail
    charts = client.get(f"/monitor/endpoints/{endpoint.pk}/charts.json", {"range": "15m"}).json()
    assert len(charts["figures"]) == 6
    names = [trace["name"] for trace in charts["figures"]["chart-kv-tokens"]["data"]]
    assert "plan: KV capacity" in names
    report = client.get("/monitor/report/").content.decode()
    assert 'data-likely-cause="gpu_memory_utilization"' in report


@pytest.mark.parametrize("query", [{"range": "2y"}, {"start": "nope"}, {"start": "1796083300", "end": "1796083200"}])
def test_bad_chart_windows_answer_400(client, qwen_on_l40s, settings, query):
    settings.KVDASH_PUBLIC_MONITOR = True
    endpoint, _key = qwen_on_l40s
    response = client.get(f"/monitor/endpoints/{endpoint.pk}/charts.json", query)
    assert response.status_code == 400 and "range" in response.json()


def test_pages_need_a_sign_in_when_public_access_is_off(client, qwen_on_l40s, settings):
    settings.KVDASH_PUBLIC_MONITOR = False
    endpoint, _key = qwen_on_l40s
    for path in ("/monitor/", f"/monitor/endpoints/{endpoint.pk}/", "/monitor/report/"):
        response = client.get(path)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.get("/monitor/fleet.json").status_code == 403
    assert client.get(f"/monitor/endpoints/{endpoint.pk}/charts.json").status_code == 403


def test_filters_with_nul_bytes_do_not_break_the_overview(client, qwen_on_l40s, settings):
    settings.KVDASH_PUBLIC_MONITOR = True
    assert client.get("/monitor/", {"node": "a\x00b", "state": "\x00"}).status_code == 200
    # A lone surrogate as a browser would send it (UTF-8 bytes of U+D800, percent-encoded).
    assert client.get("/monitor/fleet.json?model=%ED%A0%80").status_code == 200
