"""Alerting: rules (editable in the admin), the alerts they raise per endpoint, silences, and the webhook
notifications sent for them. Evaluation lives in ``monitor/alerting.py``; sending in ``monitor/notify.py``."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from .core import Endpoint


class RuleKind(models.TextChoices):
    KV_USAGE_HIGH = "kv_usage_high", "KV cache usage high"
    WAITING_WHILE_FULL = "waiting_while_full", "Requests waiting while the KV cache is full"
    PREEMPTIONS_RISING = "preemptions_rising", "Preemptions rising"
    SCRAPE_DOWN = "scrape_down", "Scrape down"
    CAPACITY_BELOW_PLAN = "capacity_below_plan", "KV capacity below plan"


class Severity(models.TextChoices):
    WARNING = "warning", "Warning"
    CRITICAL = "critical", "Critical"


# What `threshold` means for each kind, and the values it may take (admin validation).
THRESHOLD_HELP = {
    RuleKind.KV_USAGE_HIGH: ("KV usage fraction (0–1) at or above which the rule holds", 0.0, 1.0),
    RuleKind.WAITING_WHILE_FULL: ("KV usage fraction (0–1) that counts as full", 0.0, 1.0),
    RuleKind.PREEMPTIONS_RISING: ("preemptions per second above which the rule holds", 0.0, 1e6),
    RuleKind.SCRAPE_DOWN: ("failed or missed scrape intervals in a row", 1.0, 10_000.0),
    RuleKind.CAPACITY_BELOW_PLAN: ("percent of the planned KV tokens the server may fall short by", 0.0, 100.0),
}


class AlertRule(models.Model):
    """One condition checked against every enabled endpoint each scrape interval. ``threshold`` and
    ``duration_s`` mean what the kind says (see THRESHOLD_HELP); the defaults come from migration 0004."""

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=32, choices=RuleKind.choices)
    enabled = models.BooleanField(default=True)
    severity = models.CharField(max_length=16, choices=Severity.choices, default=Severity.WARNING)
    threshold = models.FloatField(
        help_text="kv_usage_high / waiting_while_full: KV usage fraction (0.9); preemptions_rising: preemptions "
        "per second (0); scrape_down: intervals in a row (3); capacity_below_plan: percent below plan (10)."
    )
    duration_s = models.PositiveIntegerField(
        default=0,
        help_text="kv_usage_high / waiting_while_full: how long the condition must hold before the alert fires; "
        "preemptions_rising: the window the rate is measured over; ignored by the other kinds.",
    )
    repeat_interval_s = models.PositiveIntegerField(
        default=4 * 3600,
        help_text="Notify again after this long while the alert still fires, unacknowledged and not silenced "
        "(0: never).",
    )
    webhook_url = models.URLField(
        max_length=500, blank=True, help_text="Overrides KVDASH_ALERT_WEBHOOK_URL for this rule's notifications."
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        bounds = THRESHOLD_HELP.get(self.kind)
        if bounds is not None and self.threshold is not None:
            meaning, low, high = bounds
            if not low <= self.threshold <= high:
                raise ValidationError({"threshold": f"{meaning}: between {low:g} and {high:g}"})
        if self.kind == RuleKind.PREEMPTIONS_RISING and not self.duration_s:
            raise ValidationError({"duration_s": "preemptions are counted over a window: give it in seconds"})


class AlertState(models.TextChoices):
    FIRING = "firing", "Firing"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    RESOLVED = "resolved", "Resolved"


class Alert(models.Model):
    """One rule's condition on one endpoint, from when it fired until it cleared. At most one open
    (unresolved) alert per rule and endpoint, so an evaluation delivered twice raises nothing twice."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="alerts")
    state = models.CharField(max_length=16, choices=AlertState.choices, default=AlertState.FIRING)
    started_at = models.DateTimeField(help_text="When the condition had held long enough to fire.")
    since = models.DateTimeField(null=True, blank=True, help_text="When the condition began to hold.")
    last_seen_at = models.DateTimeField(help_text="The latest evaluation that found the condition.")
    resolved_at = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    value = models.FloatField(null=True, blank=True, help_text="The measured value at the latest evaluation.")
    message = models.CharField(max_length=500)
    last_notified_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "endpoint"], condition=Q(resolved_at__isnull=True), name="alert_one_open_per_rule"
            )
        ]
        indexes = [
            # The page and the API list by state, newest first.
            models.Index(fields=["state", "-started_at"], name="alert_state_started"),
        ]

    def __str__(self) -> str:
        return f"{self.rule.name} on {self.endpoint.display_name} ({self.state})"

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None


class Silence(models.Model):
    """Mutes notifications for a rule, an endpoint, or both, until ``ends_at``. Alerts are still recorded
    and listed; only their webhook messages are held back."""

    rule = models.ForeignKey(AlertRule, null=True, blank=True, on_delete=models.CASCADE, related_name="silences")
    endpoint = models.ForeignKey(Endpoint, null=True, blank=True, on_delete=models.CASCADE, related_name="silences")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    comment = models.CharField(max_length=500, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-ends_at"]
        indexes = [
            # Evaluation reads the silences still running.
            models.Index(fields=["ends_at"], name="silence_ends_at"),
        ]

    def __str__(self) -> str:
        what = " / ".join(str(x) for x in (self.rule, self.endpoint) if x is not None) or "everything"
        return f"silence {what} until {self.ends_at:%Y-%m-%d %H:%M}"

    def matches(self, *, rule_id: int, endpoint_id: int, at: dt.datetime) -> bool:
        return (
            self.starts_at <= at < self.ends_at
            and self.rule_id in (None, rule_id)
            and self.endpoint_id in (None, endpoint_id)
        )


class NotificationEvent(models.TextChoices):
    FIRING = "firing", "Firing"
    REPEAT = "repeat", "Still firing"
    RESOLVED = "resolved", "Resolved"


class NotificationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped"


class Notification(models.Model):
    """One webhook message for an alert. Created by the evaluation, sent by the ``monitor.notify_alert``
    task, which takes its id: a task delivered twice finds it sent and posts nothing twice. The URL is
    looked up when sending and never stored or logged here: a webhook URL is a secret."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="notifications")
    event = models.CharField(max_length=16, choices=NotificationEvent.choices)
    status = models.CharField(max_length=16, choices=NotificationStatus.choices, default=NotificationStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    created = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return f"{self.event} for alert {self.alert_id}: {self.status}"
