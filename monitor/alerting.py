"""Alerts: each enabled rule checked against each enabled endpoint every scrape interval, and the writes that
acknowledge and silence them.

Conditions are read from the stored samples, not from the evaluator's memory: "KV usage ≥ 0.9 for 5 min"
holds when every scrape of the last five minutes says so, with no gap longer than ``GAP_INTERVALS``
intervals (Prometheus' ``for``, without its in-memory pending state). So an evaluation that runs twice, late,
or on another worker finds the same alerts, and one open alert per rule and endpoint (a partial unique
constraint) makes two evaluations racing harmless. Data older than ``STALE_INTERVALS`` intervals holds no
sample condition: the endpoint's samples went stale, and ``scrape_down`` speaks for it instead.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from monitor.models import Alert, AlertRule, AlertState, Endpoint, EngineSample, Notification, RuleKind, Silence
from monitor.models.alerts import NotificationEvent
from monitor.report import endpoint_report
from monitor.rollups import COUNTER_LOOKBACK_S, counter_increase
from monitor.services import MonitorInputError

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

STALE_INTERVALS = 3
GAP_INTERVALS = 3
SAMPLE_KINDS = (RuleKind.KV_USAGE_HIGH, RuleKind.WAITING_WHILE_FULL, RuleKind.PREEMPTIONS_RISING)
# The report re-plans the scenario: cheap, but not worth redoing for every endpoint every 10 s.
REPORT_TTL_S = 60.0
SILENCE_MAX = dt.timedelta(days=30)
RESOLVED_SHOWN = 50


@dataclass(frozen=True)
class EngineReading:
    kv_cache_usage: float | None
    num_requests_waiting: int | None
    num_preemptions_total: int | None


@dataclass(frozen=True)
class Scrape:
    """One scrape of one endpoint: its engines' readings at one time."""

    time: dt.datetime
    engines: Mapping[int, EngineReading]

    @property
    def kv_max(self) -> float | None:
        values = [e.kv_cache_usage for e in self.engines.values() if e.kv_cache_usage is not None]
        return max(values) if values else None


@dataclass(frozen=True)
class Finding:
    """A rule that holds for an endpoint: the measured value, what to tell on-call, and since when."""

    value: float
    message: str
    since: dt.datetime | None = None
    fired_at: dt.datetime | None = None


@dataclass
class EvaluationOutcome:
    fired: int = 0
    resolved: int = 0
    firing: int = 0
    notifications: list[int] = field(default_factory=list)


# --- reads ---------------------------------------------------------------------------------------------


def endpoint_scrapes(*, windows: Mapping[int, dt.timedelta], now: dt.datetime) -> dict[int, list[Scrape]]:
    """Per endpoint id, its scrapes within its own look-back window ending at ``now``, oldest first."""
    if not windows:
        return {}
    by_window: dict[dt.timedelta, list[int]] = defaultdict(list)
    for endpoint_id, window in windows.items():
        by_window[window].append(endpoint_id)
    condition = Q()
    for window, ids in by_window.items():
        condition |= Q(endpoint_id__in=ids, time__gte=now - window)
    rows = (
        EngineSample.objects.filter(condition, time__lte=now)
        .order_by("endpoint_id", "time", "engine")
        .values_list("endpoint_id", "time", "engine", "kv_cache_usage", "num_requests_waiting", "num_preemptions_total")
    )
    grouped: dict[int, dict[dt.datetime, dict[int, EngineReading]]] = defaultdict(dict)
    for endpoint_id, when, engine, kv, waiting, preemptions in rows:
        grouped[endpoint_id].setdefault(when, {})[engine] = EngineReading(kv, waiting, preemptions)
    return {
        endpoint_id: [Scrape(time=when, engines=engines) for when, engines in per_time.items()]
        for endpoint_id, per_time in grouped.items()
    }


def alert_queryset() -> QuerySet[Alert]:
    return Alert.objects.select_related("rule", "endpoint", "endpoint__node", "acknowledged_by")


def alerts_list(*, state: str | None = None, endpoint_id: int | None = None) -> QuerySet[Alert]:
    alerts = alert_queryset()
    if state:
        alerts = alerts.filter(state=state)
    if endpoint_id is not None:
        alerts = alerts.filter(endpoint_id=endpoint_id)
    return alerts.order_by("-started_at", "-pk")


def silences_active(*, now: dt.datetime | None = None) -> list[Silence]:
    now = now or timezone.now()
    return list(
        Silence.objects.filter(starts_at__lte=now, ends_at__gt=now).select_related("rule", "endpoint", "created_by")
    )


def alert_silenced(*, alert: Alert, silences: Iterable[Silence], now: dt.datetime) -> bool:
    return any(s.matches(rule_id=alert.rule_id, endpoint_id=alert.endpoint_id, at=now) for s in silences)


def alerts_overview(*, state: str = "", now: dt.datetime | None = None) -> dict[str, Any]:
    """What /monitor/alerts/ lists: open alerts (firing, then acknowledged), the latest resolved ones, and
    the silences running now; each alert as {"alert", "silenced"}. ``state`` narrows to one state."""
    now = now or timezone.now()
    silences = silences_active(now=now)
    open_alerts: list[Alert] = []
    resolved: list[Alert] = []
    if state in ("", AlertState.FIRING, AlertState.ACKNOWLEDGED):
        open_alerts = list(alerts_list(state=state or None).filter(resolved_at__isnull=True))
        # Firing before acknowledged: what still needs someone comes first.
        open_alerts.sort(key=lambda a: a.state != AlertState.FIRING)
    if state in ("", AlertState.RESOLVED):
        resolved = list(alerts_list(state=AlertState.RESOLVED).order_by("-resolved_at", "-pk")[:RESOLVED_SHOWN])

    def rows(alerts: list[Alert]) -> list[dict[str, Any]]:
        return [{"alert": a, "silenced": alert_silenced(alert=a, silences=silences, now=now)} for a in alerts]

    return {"open": rows(open_alerts), "resolved": rows(resolved), "silences": silences}


# --- rule checks: pure functions of the scrapes (or the endpoint row) --------------------------------------


def _fresh(scrapes: list[Scrape], now: dt.datetime, interval: int) -> bool:
    return bool(scrapes) and (now - scrapes[-1].time).total_seconds() <= STALE_INTERVALS * interval


def _held_since(scrapes: list[Scrape], holds: Callable[[Scrape], bool], *, gap_s: float) -> dt.datetime | None:
    """The start of the unbroken run of scrapes, ending with the latest, for which ``holds`` is true."""
    since: dt.datetime | None = None
    for scrape in reversed(scrapes):
        if not holds(scrape) or (since is not None and (since - scrape.time).total_seconds() > gap_s):
            break
        since = scrape.time
    return since


def _span(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def _clock(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%H:%M:%S UTC")


def _held_for(
    scrapes: list[Scrape], holds: Callable[[Scrape], bool], rule: AlertRule, interval: int
) -> tuple[dt.datetime, dt.datetime] | None:
    since = _held_since(scrapes, holds, gap_s=GAP_INTERVALS * interval)
    if since is None or (scrapes[-1].time - since).total_seconds() < rule.duration_s:
        return None
    return since, since + dt.timedelta(seconds=rule.duration_s)


def check_kv_usage_high(rule: AlertRule, scrapes: list[Scrape], now: dt.datetime, interval: int) -> Finding | None:
    if not _fresh(scrapes, now, interval):
        return None
    held = _held_for(scrapes, lambda s: (s.kv_max or 0.0) >= rule.threshold, rule, interval)
    if held is None:
        return None
    usage = scrapes[-1].kv_max or 0.0
    lasting = f" for {_span(rule.duration_s)}" if rule.duration_s else ""
    return Finding(
        value=usage,
        message=f"KV cache usage {usage:.0%}, at or above {rule.threshold:.0%}{lasting} (since {_clock(held[0])})",
        since=held[0],
        fired_at=held[1],
    )


def _full_and_waiting(scrape: Scrape, threshold: float) -> list[tuple[int, EngineReading]]:
    # Per engine: with data parallelism a queue on one engine and a full cache on another is no shortage.
    return [
        (index, e)
        for index, e in sorted(scrape.engines.items())
        if e.kv_cache_usage is not None and e.kv_cache_usage >= threshold and (e.num_requests_waiting or 0) > 0
    ]


def check_waiting_while_full(rule: AlertRule, scrapes: list[Scrape], now: dt.datetime, interval: int) -> Finding | None:
    if not _fresh(scrapes, now, interval):
        return None
    held = _held_for(scrapes, lambda s: bool(_full_and_waiting(s, rule.threshold)), rule, interval)
    if held is None:
        return None
    engines = _full_and_waiting(scrapes[-1], rule.threshold)
    waiting = sum(e.num_requests_waiting or 0 for _, e in engines)
    usage = max(e.kv_cache_usage or 0.0 for _, e in engines)
    which = ", ".join(str(index) for index, _ in engines)
    return Finding(
        value=float(waiting),
        message=f"{waiting} requests waiting while KV cache usage is {usage:.0%} (engine {which})",
        since=held[0],
        fired_at=held[1],
    )


def check_preemptions_rising(rule: AlertRule, scrapes: list[Scrape], now: dt.datetime, interval: int) -> Finding | None:
    """Preemptions per second over the rule's window (Prometheus' increase() over the window, divided by it;
    a counter that went down is a restart, and its new value the increase)."""
    if not _fresh(scrapes, now, interval) or rule.duration_s <= 0:
        return None
    start = now - dt.timedelta(seconds=rule.duration_s)
    increase = 0.0
    first_rise: dt.datetime | None = None
    previous: dict[int, tuple[dt.datetime, int | None]] = {}
    for scrape in scrapes:
        for engine, reading in scrape.engines.items():
            before = previous.get(engine)
            previous[engine] = (scrape.time, reading.num_preemptions_total)
            if before is None or scrape.time <= start:
                continue
            if (scrape.time - before[0]).total_seconds() > COUNTER_LOOKBACK_S:
                continue
            step = counter_increase(before[1], reading.num_preemptions_total) or 0.0
            if step > 0:
                increase += step
                first_rise = first_rise or scrape.time
    rate = increase / rule.duration_s
    if increase <= 0 or rate <= rule.threshold:
        return None
    return Finding(
        value=rate,
        message=f"{increase:g} preemptions in the last {_span(rule.duration_s)} ({rate:.3g}/s)",
        since=first_rise,
        fired_at=first_rise,
    )


def check_scrape_down(rule: AlertRule, endpoint: Endpoint, now: dt.datetime, interval: int) -> Finding | None:
    needed = max(1, int(rule.threshold))
    if endpoint.consecutive_failures >= needed:
        error = f": {endpoint.last_error}" if endpoint.last_error else ""
        return Finding(
            value=float(endpoint.consecutive_failures),
            message=f"{endpoint.consecutive_failures} scrapes in a row failed{error}"[:500],
            since=endpoint.last_success_at,
        )
    # An agent that stopped reporting leaves the failure count alone: its silence is measured instead.
    last = endpoint.last_scrape_at or endpoint.created
    missed = int((now - last).total_seconds() // interval) - 1
    if missed < needed:
        return None
    heard = f"last scrape {_clock(last)}" if endpoint.last_scrape_at else "never scraped"
    return Finding(
        value=float(missed),
        message=f"no scrape for {missed} intervals ({heard}): is the agent on {endpoint.node.name} running?",
        since=last,
    )


_reports: dict[tuple[Any, ...], tuple[float, dict[str, Any] | None]] = {}
_CONFIG_KEYS = ("num_gpu_blocks", "block_size", "gpu_memory_utilization", "cache_dtype")


def _report(endpoint: Endpoint) -> dict[str, Any] | None:
    latest = endpoint.latest if isinstance(endpoint.latest, dict) else {}
    # Keyed by what the report reads (the plan and the server's cache config), not the moving gauges.
    config = sorted(
        (engine, tuple(str(values.get(name)) for name in _CONFIG_KEYS))
        for engine, values in latest.items()
        if isinstance(values, dict)
    )
    scenario = endpoint.scenario
    key = (endpoint.pk, endpoint.scenario_id, scenario.updated if scenario else None, repr(config))
    cached = _reports.get(key)
    if cached is not None and time.monotonic() - cached[0] < REPORT_TTL_S:
        return cached[1]
    report = endpoint_report(endpoint=endpoint)
    if len(_reports) > 10_000:
        _reports.clear()
    _reports[key] = (time.monotonic(), report)
    return report


def check_capacity_below_plan(rule: AlertRule, endpoint: Endpoint) -> Finding | None:
    if endpoint.scenario_id is None:
        return None
    report = _report(endpoint)
    deviation = report.get("deviation_pct") if report else None
    if report is None or deviation is None or deviation >= -rule.threshold:
        return None
    cause = f"; likely cause: {report['cause_detail']}" if report.get("cause_detail") else ""
    return Finding(
        value=float(deviation),
        message=(
            f"KV capacity {report['actual_kv_tokens']:,} tokens is {-deviation:.1f}% below the plan's "
            f"{report['planned_kv_tokens']:,}{cause}"
        )[:500],
    )


def rule_check(
    *, rule: AlertRule, endpoint: Endpoint, scrapes: list[Scrape], now: dt.datetime, interval: int
) -> Finding | None:
    if rule.kind == RuleKind.KV_USAGE_HIGH:
        return check_kv_usage_high(rule, scrapes, now, interval)
    if rule.kind == RuleKind.WAITING_WHILE_FULL:
        return check_waiting_while_full(rule, scrapes, now, interval)
    if rule.kind == RuleKind.PREEMPTIONS_RISING:
        return check_preemptions_rising(rule, scrapes, now, interval)
    if rule.kind == RuleKind.SCRAPE_DOWN:
        return check_scrape_down(rule, endpoint, now, interval)
    if rule.kind == RuleKind.CAPACITY_BELOW_PLAN:
        return check_capacity_below_plan(rule, endpoint)
    return None


# --- evaluation ----------------------------------------------------------------------------------------


def _lookbacks(
    rules: list[AlertRule], endpoint_ids: list[int], now: dt.datetime, interval: int
) -> dict[int, list[Scrape]]:
    """Two reads instead of one long one: a short window for every endpoint (freshness, preemptions), then
    the rules' full ``for`` windows only for endpoints whose latest scrape could satisfy them. At 10,000
    GPUs most endpoints are not near full, and five minutes of all their rows every 10 s is a lot of rows."""
    margin = dt.timedelta(seconds=(STALE_INTERVALS + 1) * interval)
    short = margin + dt.timedelta(
        seconds=max([r.duration_s for r in rules if r.kind == RuleKind.PREEMPTIONS_RISING], default=0)
    )
    scrapes = endpoint_scrapes(windows=dict.fromkeys(endpoint_ids, short), now=now)
    full_rules = [r for r in rules if r.kind in (RuleKind.KV_USAGE_HIGH, RuleKind.WAITING_WHILE_FULL)]
    if not full_rules:
        return scrapes
    long = margin + dt.timedelta(seconds=max(r.duration_s for r in full_rules))
    lowest = min(r.threshold for r in full_rules)
    candidates = [
        endpoint_id
        for endpoint_id, points in scrapes.items()
        if _fresh(points, now, interval) and (points[-1].kv_max or 0.0) >= lowest
    ]
    if long > short and candidates:
        scrapes.update(endpoint_scrapes(windows=dict.fromkeys(candidates, long), now=now))
    return scrapes


def alerts_evaluate(*, now: dt.datetime | None = None) -> EvaluationOutcome:
    """Check every enabled rule against every enabled endpoint; open, update and resolve alerts; queue their
    notifications (sent by ``monitor.notify_alert`` once this commits)."""
    now = now or timezone.now()
    interval = int(settings.KVDASH_SCRAPE_INTERVAL)
    rules = list(AlertRule.objects.filter(enabled=True))
    endpoints = list(
        Endpoint.objects.filter(enabled=True).select_related("node", "scenario", "scenario__model", "scenario__gpu")
    )
    sample_rules = [r for r in rules if r.kind in SAMPLE_KINDS]
    scrapes = _lookbacks(sample_rules, [e.pk for e in endpoints], now, interval) if sample_rules else {}
    findings: dict[tuple[int, int], Finding] = {}
    for endpoint in endpoints:
        for rule in rules:
            finding = rule_check(
                rule=rule, endpoint=endpoint, scrapes=scrapes.get(endpoint.pk, []), now=now, interval=interval
            )
            if finding is not None:
                findings[(rule.pk, endpoint.pk)] = finding
    return _apply(findings, {r.pk: r for r in rules}, now)


def _webhook_url(rule: AlertRule) -> str:
    return rule.webhook_url or settings.KVDASH_ALERT_WEBHOOK_URL


def _queue(alert: Alert, rule: AlertRule, event: str, now: dt.datetime, outcome: EvaluationOutcome) -> None:
    if not _webhook_url(rule):
        return
    notification = Notification.objects.create(alert=alert, event=event, created=now)
    alert.last_notified_at = now
    outcome.notifications.append(notification.pk)


def _apply(
    findings: dict[tuple[int, int], Finding], rules: dict[int, AlertRule], now: dt.datetime
) -> EvaluationOutcome:
    outcome = EvaluationOutcome()
    with transaction.atomic():
        silences = silences_active(now=now)
        # Locked: an evaluation running alongside waits here instead of notifying the same alerts again.
        open_alerts = {
            (a.rule_id, a.endpoint_id): a
            for a in Alert.objects.select_for_update(of=("self",))
            .filter(resolved_at__isnull=True)
            .select_related("rule")
        }
        changed: list[Alert] = []
        for key, finding in findings.items():
            rule = rules[key[0]]
            alert = open_alerts.pop(key, None)
            if alert is None:
                alert = _open(rule, key[1], finding, now)
                if alert is None:
                    continue
                outcome.fired += 1
                if not alert_silenced(alert=alert, silences=silences, now=now):
                    _queue(alert, rule, NotificationEvent.FIRING, now, outcome)
            else:
                outcome.firing += 1
                alert.last_seen_at, alert.value, alert.message = now, finding.value, finding.message[:500]
                event = _renotify(alert, rule, now)
                if event and not alert_silenced(alert=alert, silences=silences, now=now):
                    _queue(alert, rule, event, now, outcome)
            changed.append(alert)
        for alert in open_alerts.values():
            alert.state, alert.resolved_at = AlertState.RESOLVED, now
            outcome.resolved += 1
            if alert.last_notified_at is not None and not alert_silenced(alert=alert, silences=silences, now=now):
                _queue(alert, alert.rule, NotificationEvent.RESOLVED, now, outcome)
            changed.append(alert)
        Alert.objects.bulk_update(
            changed, ["state", "resolved_at", "last_seen_at", "value", "message", "last_notified_at"], batch_size=500
        )
        ids = list(outcome.notifications)
        if ids:
            transaction.on_commit(lambda: _send(ids))
    return outcome


def _open(rule: AlertRule, endpoint_id: int, finding: Finding, now: dt.datetime) -> Alert | None:
    fired_at = min(finding.fired_at or now, now)
    try:
        with transaction.atomic():
            return Alert.objects.create(
                rule=rule,
                endpoint_id=endpoint_id,
                state=AlertState.FIRING,
                started_at=fired_at,
                since=finding.since,
                last_seen_at=now,
                value=finding.value,
                message=finding.message[:500],
            )
    except IntegrityError:
        # Another evaluation opened it a moment ago: it notifies, this one stays quiet.
        return None


def _renotify(alert: Alert, rule: AlertRule, now: dt.datetime) -> str | None:
    """Whether a still-open alert is told again: never while acknowledged; once if it was never told (it fired
    during a silence, or before a webhook was set); then every repeat interval."""
    if alert.state != AlertState.FIRING:
        return None
    if alert.last_notified_at is None:
        return NotificationEvent.FIRING
    if rule.repeat_interval_s and (now - alert.last_notified_at).total_seconds() >= rule.repeat_interval_s:
        return NotificationEvent.REPEAT
    return None


def _send(notification_ids: list[int]) -> None:
    from monitor.alert_tasks import notify_alert

    for notification_id in notification_ids:
        notify_alert.apply_async(args=[notification_id])


# --- writes from people ----------------------------------------------------------------------------------


def alert_acknowledge(*, alert: Alert, user: AbstractBaseUser) -> Alert:
    """Mark an open alert as being handled: it stays listed, and is not notified again until it resolves."""
    if alert.state == AlertState.ACKNOWLEDGED:
        return alert
    updated = Alert.objects.filter(pk=alert.pk, resolved_at__isnull=True).update(
        state=AlertState.ACKNOWLEDGED, acknowledged_at=timezone.now(), acknowledged_by=user
    )
    if not updated:
        raise MonitorInputError({"state": "this alert has resolved: there is nothing to acknowledge"})
    return alert_queryset().get(pk=alert.pk)


def silence_create(
    *,
    user: AbstractBaseUser | None,
    duration: dt.timedelta,
    rule: AlertRule | None = None,
    endpoint: Endpoint | None = None,
    comment: str = "",
) -> Silence:
    """Hold back notifications for a rule and/or an endpoint for ``duration`` (alerts are still recorded)."""
    if not dt.timedelta(minutes=1) <= duration <= SILENCE_MAX:
        raise MonitorInputError({"duration": f"between 1 minute and {SILENCE_MAX.days} days"})
    if rule is None and endpoint is None:
        raise MonitorInputError({"rule": "silence a rule, an endpoint, or both"})
    now = timezone.now()
    return Silence.objects.create(
        rule=rule, endpoint=endpoint, starts_at=now, ends_at=now + duration, created_by=user, comment=comment[:500]
    )


def silence_expire(*, silence: Silence) -> Silence:
    now = timezone.now()
    if silence.ends_at > now:
        silence.ends_at = max(now, silence.starts_at)
        silence.save(update_fields=["ends_at"])
    return silence
