"""Alerts: rules fire from real samples, notify a real webhook on loopback, resolve, and stay quiet while
acknowledged or silenced."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from monitor_factories import T0, endpoint_entry, endpoint_on, engine_values, node_with_key, payload, sealed

from kvdash.celery import app as celery_app
from monitor import alerting
from monitor.alert_tasks import notify_alert
from monitor.alerting import alert_acknowledge, alerts_evaluate, silence_create, silence_expire
from monitor.ingest import ingest_signed
from monitor.models import Alert, AlertRule, Notification, RuleKind
from planner.models import GpuProfile, ModelProfile, Scenario
from planner.services import catalog_load

pytestmark = pytest.mark.django_db

START = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)  # T0


class _Recorder(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        server: Any = self.server
        server.received.append({"path": self.path, "json": json.loads(body), "agent": self.headers["User-Agent"]})
        status = server.statuses.pop(0) if server.statuses else 200
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def webhook(settings) -> Iterator[Any]:
    """A real HTTP server on loopback standing in for Slack; records every POSTed JSON body."""
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.received, server.statuses = [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.KVDASH_ALERT_WEBHOOK_URL = f"http://127.0.0.1:{server.server_port}/services/T0/B0/secret"
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _fresh_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    # The evaluation caches reports per process; test databases reuse ids and the pinned clock.
    monkeypatch.setattr(alerting, "_reports", {})


@pytest.fixture(autouse=True)
def eager_tasks() -> Iterator[None]:
    # The notification task runs inline once the evaluation commits, as a worker would run it right after.
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = previous


class Clock:
    now = START


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(timezone, "now", lambda: clock.now)
    return clock


class Site:
    """One node with one endpoint, scraped by a test-controlled agent."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        _node, self.key = node_with_key("gpu-a")
        self.endpoint = endpoint_on("gpu-a", 9001, name="llama-a")

    def scrape(self, offset: int, *, up: bool = True, engines: list[dict] | None = None, **values: Any) -> None:
        self.clock.now = START + dt.timedelta(seconds=offset)
        at = T0 + offset
        entry = endpoint_entry(self.endpoint.pk, at, up=up, engines=engines or [engine_values(**values)])
        outcome = ingest_signed(**sealed(payload("gpu-a", [entry], sent_at=at), self.key))
        assert outcome.refused is None

    def scrapes(self, offsets: range, **values: Any) -> None:
        for offset in offsets:
            self.scrape(offset, **values)


@pytest.fixture
def site(clock: Clock) -> Site:
    return Site(clock)


@pytest.fixture
def evaluate(clock: Clock, django_capture_on_commit_callbacks):
    def run(offset: int | None = None):
        if offset is not None:
            clock.now = START + dt.timedelta(seconds=offset)
        with django_capture_on_commit_callbacks(execute=True):
            return alerts_evaluate()

    return run


def texts(webhook: Any) -> list[str]:
    return [post["json"]["text"] for post in webhook.received]


def test_the_default_rules_are_created_by_the_migration():
    rules = list(AlertRule.objects.order_by("kind").values_list("kind", "threshold", "duration_s", "severity"))
    assert rules == [
        ("capacity_below_plan", 10.0, 0, "warning"),
        ("kv_usage_high", 0.9, 300, "warning"),
        ("preemptions_rising", 0.0, 60, "critical"),
        ("scrape_down", 3.0, 0, "critical"),
        ("waiting_while_full", 0.9, 0, "critical"),
    ]


def test_kv_usage_high_fires_after_five_minutes_notifies_the_webhook_and_resolves(site, evaluate, webhook):
    site.scrapes(range(0, 300, 10), kv_cache_usage=0.95)
    assert evaluate().fired == 0  # 290 s at 95%: not yet five minutes
    assert webhook.received == []

    site.scrape(300, kv_cache_usage=0.95)
    outcome = evaluate()

    assert outcome.fired == 1
    alert = Alert.objects.get()
    assert (alert.rule.kind, alert.state, alert.endpoint_id, alert.value) == (
        "kv_usage_high",
        "firing",
        site.endpoint.pk,
        0.95,
    )
    assert alert.since == START
    assert alert.started_at == START + dt.timedelta(minutes=5)
    assert len(webhook.received) == 1
    post = webhook.received[0]
    assert post["path"] == "/services/T0/B0/secret"
    assert post["agent"] == "kvdash-alerts/1"
    assert post["json"]["text"] == (
        "[FIRING] KV cache usage high (warning): llama-a on gpu-a: "
        "KV cache usage 95%, at or above 90% for 5 min (since 00:00:00 UTC)"
    )
    assert post["json"]["blocks"][0]["text"]["text"] == (
        ":large_orange_circle: *FIRING: KV cache usage high* (warning)\n*llama-a on gpu-a*\n"
        "KV cache usage 95%, at or above 90% for 5 min (since 00:00:00 UTC)"
    )
    assert Notification.objects.get().status == "sent"

    site.scrape(310, kv_cache_usage=0.5)
    outcome = evaluate()

    assert (outcome.fired, outcome.resolved) == (0, 1)
    alert.refresh_from_db()
    assert (alert.state, alert.resolved_at) == ("resolved", START + dt.timedelta(seconds=310))
    assert texts(webhook)[1] == (
        "[RESOLVED] KV cache usage high (warning): llama-a on gpu-a: "
        "KV cache usage 95%, at or above 90% for 5 min (since 00:00:00 UTC)"
    )
    assert "resolved 2026-12-01 00:05:10 UTC" in webhook.received[1]["json"]["blocks"][1]["elements"][0]["text"]


def test_a_gap_in_the_samples_restarts_the_five_minutes(site, evaluate, webhook):
    site.scrapes(range(0, 100, 10), kv_cache_usage=0.95)
    # No scrape from 100 to 170 s: the run before the gap does not count.
    site.scrapes(range(170, 470, 10), kv_cache_usage=0.95)
    assert evaluate().fired == 0

    site.scrape(470, kv_cache_usage=0.95)
    assert evaluate().fired == 1
    assert Alert.objects.get().since == START + dt.timedelta(seconds=170)


def test_evaluating_twice_fires_once_and_notifies_once(site, evaluate, webhook):
    site.scrapes(range(0, 310, 10), kv_cache_usage=0.92)
    first, second = evaluate(), evaluate()

    assert (first.fired, second.fired, second.firing) == (1, 0, 1)
    assert Alert.objects.count() == 1
    assert len(webhook.received) == 1


def test_an_acknowledged_alert_stays_quiet_until_it_resolves(site, evaluate, webhook):
    AlertRule.objects.filter(kind=RuleKind.KV_USAGE_HIGH).update(repeat_interval_s=60)
    site.scrapes(range(0, 310, 10), kv_cache_usage=0.97)
    evaluate()
    alert = Alert.objects.get()
    assert len(webhook.received) == 1

    oncall = get_user_model().objects.create_user("oncall")
    alert_acknowledge(alert=alert, user=oncall)
    site.scrapes(range(310, 500, 10), kv_cache_usage=0.97)
    for offset in (370, 430, 490):
        evaluate(offset)

    alert.refresh_from_db()
    assert (alert.state, alert.acknowledged_by.username) == ("acknowledged", "oncall")
    assert len(webhook.received) == 1  # no second POST while acknowledged

    site.scrape(500, kv_cache_usage=0.4)
    evaluate()
    alert.refresh_from_db()
    assert alert.state == "resolved"
    assert texts(webhook)[1].startswith("[RESOLVED] KV cache usage high")


def test_an_unacknowledged_alert_is_notified_again_after_the_repeat_interval(site, evaluate, webhook):
    AlertRule.objects.filter(kind=RuleKind.KV_USAGE_HIGH).update(repeat_interval_s=60)
    site.scrapes(range(0, 370, 10), kv_cache_usage=0.97)
    evaluate(300)
    evaluate(350)
    assert len(webhook.received) == 1
    evaluate(360)
    assert texts(webhook)[1].startswith("[STILL FIRING] KV cache usage high (warning): llama-a on gpu-a")


def test_a_notification_queued_before_the_acknowledgement_is_not_sent(site, evaluate, webhook, settings):
    settings.KVDASH_ALERT_WEBHOOK_URL = ""
    site.scrapes(range(0, 310, 10), kv_cache_usage=0.97)
    evaluate()
    alert = Alert.objects.get()
    queued = Notification.objects.create(alert=alert, event="firing", created=timezone.now())
    settings.KVDASH_ALERT_WEBHOOK_URL = f"http://127.0.0.1:{webhook.server_port}/hook"
    alert_acknowledge(alert=alert, user=get_user_model().objects.create_user("oncall"))

    notify_alert.apply(args=[queued.pk])

    queued.refresh_from_db()
    assert (queued.status, queued.last_error, queued.attempts) == ("skipped", "acknowledged", 0)
    assert webhook.received == []


def test_a_silence_holds_notifications_back_but_the_alert_is_recorded(site, evaluate, webhook):
    rule = AlertRule.objects.get(kind=RuleKind.KV_USAGE_HIGH)
    silence = silence_create(user=None, duration=dt.timedelta(hours=1), rule=rule, endpoint=site.endpoint)
    site.scrapes(range(0, 310, 10), kv_cache_usage=0.95)

    assert evaluate().fired == 1
    assert Alert.objects.get().state == "firing"
    assert webhook.received == []
    assert Notification.objects.count() == 0

    silence_expire(silence=silence)
    evaluate()
    # Never told while silenced: told once the silence ends, as a firing alert.
    assert texts(webhook) == [
        "[FIRING] KV cache usage high (warning): llama-a on gpu-a: "
        "KV cache usage 95%, at or above 90% for 5 min (since 00:00:00 UTC)"
    ]


def test_waiting_while_full_looks_at_each_engine(site, evaluate, webhook):
    site.scrape(
        0,
        engines=[
            engine_values("0", kv_cache_usage=0.95, num_requests_waiting=0),
            engine_values("1", kv_cache_usage=0.30, num_requests_waiting=5),
        ],
    )
    evaluate()
    assert not Alert.objects.filter(rule__kind=RuleKind.WAITING_WHILE_FULL).exists()

    site.scrape(
        10,
        engines=[
            engine_values("0", kv_cache_usage=0.95, num_requests_waiting=0),
            engine_values("1", kv_cache_usage=0.99, num_requests_waiting=7),
        ],
    )
    evaluate()
    alert = Alert.objects.get(rule__kind=RuleKind.WAITING_WHILE_FULL)
    assert (alert.value, alert.message) == (7.0, "7 requests waiting while KV cache usage is 99% (engine 1)")
    assert texts(webhook) == [
        "[FIRING] Requests waiting on a full KV cache (critical): llama-a on gpu-a: "
        "7 requests waiting while KV cache usage is 99% (engine 1)"
    ]


def test_preemptions_rising_fires_while_the_counter_grows_and_resolves_a_window_later(site, evaluate, webhook):
    site.scrape(0, num_preemptions_total=0)
    site.scrape(10, num_preemptions_total=0)
    evaluate()
    assert not Alert.objects.exists()

    site.scrape(20, num_preemptions_total=3)
    evaluate()
    alert = Alert.objects.get()
    assert (alert.rule.kind, alert.value, alert.message) == (
        "preemptions_rising",
        0.05,
        "3 preemptions in the last 1 min (0.05/s)",
    )
    assert alert.started_at == START + dt.timedelta(seconds=20)

    site.scrapes(range(30, 80, 10), num_preemptions_total=3)
    evaluate()
    assert Alert.objects.get().state == "firing"  # the rise at 20 s is still inside the last minute
    site.scrape(80, num_preemptions_total=3)
    evaluate()
    assert Alert.objects.get().state == "resolved"
    assert [text.split(":")[0] for text in texts(webhook)] == [
        "[FIRING] Preemptions rising (critical)",
        "[RESOLVED] Preemptions rising (critical)",
    ]


def test_scrape_down_after_three_failed_scrapes(site, evaluate, webhook):
    site.scrape(0)
    site.scrape(10, up=False)
    site.scrape(20, up=False)
    evaluate()
    assert not Alert.objects.exists()

    site.scrape(30, up=False)
    evaluate()
    alert = Alert.objects.get()
    assert (alert.rule.kind, alert.value, alert.message) == (
        "scrape_down",
        3.0,
        "3 scrapes in a row failed: connection refused",
    )
    site.scrape(40)
    evaluate()
    assert Alert.objects.get().state == "resolved"


def test_scrape_down_when_the_agent_goes_silent(site, evaluate, webhook):
    site.scrape(0)
    evaluate(39)
    assert not Alert.objects.exists()

    evaluate(40)
    alert = Alert.objects.get()
    assert alert.message == "no scrape for 3 intervals (last scrape 00:00:00 UTC): is the agent on gpu-a running?"


def test_capacity_below_plan_fires_from_the_report(clock, evaluate, webhook):
    catalog_load()
    scenario = Scenario.objects.create(
        name="Llama 8B on H100",
        owner=get_user_model().objects.create_user("planner-owner"),
        model=ModelProfile.objects.get(slug="llama-3.1-8b"),
        gpu=GpuProfile.objects.get(slug="h100-sxm"),
        max_model_len=32768,
        concurrency=12,
        engine_version="0.19",  # the figures below are v0.19's profile ("latest" now adds the CUDA-graph reserve)
    )
    site = Site(clock)
    site.endpoint.scenario = scenario
    site.endpoint.save()
    site.scrape(0, num_gpu_blocks=1000, block_size=16)

    evaluate()

    alert = Alert.objects.get()
    assert alert.rule.kind == "capacity_below_plan"
    # 16 x 1,000 = 16,000 tokens against the plan's 457,280: (16,000 - 457,280) / 457,280 = -96.5%.
    assert alert.value == -96.5
    assert alert.message.startswith("KV capacity 16,000 tokens is 96.5% below the plan's 457,280; likely cause: ")
    assert texts(webhook)[0].startswith("[FIRING] KV capacity below plan (warning): llama-a on gpu-a: KV capacity")


def test_a_failing_webhook_is_retried_and_a_refusing_one_is_not(site, evaluate, webhook):
    webhook.statuses = [500]
    site.scrapes(range(0, 310, 10), kv_cache_usage=0.95)
    evaluate()
    notification = Notification.objects.get()
    assert (notification.status, notification.attempts) == ("sent", 2)
    assert len(webhook.received) == 2

    webhook.statuses = [404]
    site.scrape(310, kv_cache_usage=0.1)
    evaluate()
    resolved = Notification.objects.get(event="resolved")
    assert (resolved.status, resolved.attempts, resolved.last_error) == ("failed", 1, "HTTP 404")
    assert len(webhook.received) == 3


def test_no_webhook_configured_means_no_notification(site, evaluate, settings):
    settings.KVDASH_ALERT_WEBHOOK_URL = ""
    site.scrapes(range(0, 310, 10), kv_cache_usage=0.95)
    assert evaluate().fired == 1
    assert Notification.objects.count() == 0


def test_a_rule_refuses_a_threshold_outside_its_range():
    rule = AlertRule(name="too high", kind=RuleKind.KV_USAGE_HIGH, threshold=90, duration_s=300)
    with pytest.raises(ValidationError) as raised:
        rule.full_clean()
    assert raised.value.message_dict == {
        "threshold": ["KV usage fraction (0–1) at or above which the rule holds: between 0 and 1"]
    }


def test_an_evaluation_runs_a_fixed_number_of_queries_however_many_endpoints(clock, webhook, settings):
    settings.KVDASH_ALERT_WEBHOOK_URL = ""
    _node, key = node_with_key("gpu-a")

    def queries_with(endpoints: int) -> int:
        entries = []
        for port in range(9100, 9100 + endpoints):
            endpoint = endpoint_on("gpu-a", port)
            entries.append(endpoint_entry(endpoint.pk, T0, engines=[engine_values(kv_cache_usage=0.5)]))
        clock.now = START
        ingest_signed(**sealed(payload("gpu-a", entries), key))
        with CaptureQueriesContext(connection) as captured:
            alerts_evaluate()
        return len(captured.captured_queries)

    assert queries_with(2) == queries_with(6)
