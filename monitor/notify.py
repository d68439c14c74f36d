"""Alert notifications: a Slack-compatible incoming-webhook message (``text`` plus ``blocks``), POSTed as JSON.

Mattermost, Rocket.Chat and most chat tools accept the same body. The webhook URL is a secret (Slack's carry
their token in the path): it is read from the rule or the settings when sending and never logged or stored.
"""

from __future__ import annotations

import logging
from typing import Any

import requests
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from monitor.alerting import alert_silenced, silences_active
from monitor.models import Alert, AlertState, Notification
from monitor.models.alerts import NotificationEvent, NotificationStatus

log = logging.getLogger(__name__)

USER_AGENT = "kvdash-alerts/1"


class WebhookError(Exception):
    """A message not delivered; ``retry`` says whether trying again later may help."""

    def __init__(self, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


class Webhook:
    """One incoming-webhook URL."""

    def __init__(self, url: str, *, timeout: float, session: requests.Session | None = None) -> None:
        self.url = url
        self.timeout = timeout
        self.session = session or requests.Session()

    def post(self, payload: dict[str, Any]) -> None:
        try:
            response = self.session.post(
                self.url,
                json=payload,
                timeout=self.timeout,
                # A redirect would resend the body somewhere the operator did not configure.
                allow_redirects=False,
                headers={"User-Agent": USER_AGENT},
            )
        except requests.Timeout:
            raise WebhookError("timed out", retry=True) from None
        except requests.RequestException as error:
            # The class name only: requests' messages repeat the URL, and the URL is the secret.
            raise WebhookError(type(error).__name__, retry=True) from None
        status = response.status_code
        if status == 429 or status >= 500:
            raise WebhookError(f"HTTP {status}", retry=True)
        if not 200 <= status < 300:
            raise WebhookError(f"HTTP {status}", retry=False)


def _mrkdwn(text: str) -> str:
    # Slack's escaping: names are user input, and "<...>" would become a link or a mention.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_HEADLINE = {
    NotificationEvent.FIRING: "FIRING",
    NotificationEvent.REPEAT: "STILL FIRING",
    NotificationEvent.RESOLVED: "RESOLVED",
}
_ICON = {"critical": ":red_circle:", "warning": ":large_orange_circle:"}


def alert_payload(*, alert: Alert, event: str) -> dict[str, Any]:
    """The webhook body for one alert event: ``text`` for notifications and plain clients, ``blocks`` for Slack."""
    rule, endpoint = alert.rule, alert.endpoint
    headline = _HEADLINE.get(event, event.upper())
    where = f"{endpoint.display_name} on {endpoint.node.name}"
    text = f"[{headline}] {rule.name} ({rule.severity}): {where}: {alert.message}"
    icon = ":large_green_circle:" if event == NotificationEvent.RESOLVED else _ICON.get(rule.severity, ":bell:")
    moments = [f"started {alert.started_at:%Y-%m-%d %H:%M:%S} UTC"]
    if alert.resolved_at is not None:
        moments.append(f"resolved {alert.resolved_at:%Y-%m-%d %H:%M:%S} UTC")
    return {
        "text": text,
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f"{icon} *{headline}: {_mrkdwn(rule.name)}* ({rule.severity})\n"
                    f"*{_mrkdwn(where)}*\n{_mrkdwn(alert.message)}",
                },
            },
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": f"{' · '.join(moments)} · rule `{rule.kind}` · kvdash alert {alert.pk}"}
                ],
            },
        ],
    }


def _silenced(alert: Alert) -> bool:
    now = timezone.now()
    return alert_silenced(alert=alert, silences=silences_active(now=now), now=now)


def _finish(notification: Notification, status: str, error: str = "") -> str:
    changes: dict[str, Any] = {"status": status, "last_error": error[:500]}
    if status == NotificationStatus.SENT:
        changes["sent_at"] = timezone.now()
    Notification.objects.filter(pk=notification.pk).update(**changes)
    return status


def notification_send(*, notification_id: int, final_attempt: bool = True) -> str:
    """Send one queued notification; returns its status. Raises WebhookError when the caller should retry
    (a retryable failure and not ``final_attempt``). Checked again at sending time: an alert acknowledged or
    silenced since it was queued is not announced."""
    notification = (
        Notification.objects.select_related("alert__rule", "alert__endpoint__node").filter(pk=notification_id).first()
    )
    if notification is None or notification.status != NotificationStatus.PENDING:
        return notification.status if notification else "missing"
    alert = notification.alert
    if notification.event != NotificationEvent.RESOLVED and alert.state == AlertState.ACKNOWLEDGED:
        return _finish(notification, NotificationStatus.SKIPPED, "acknowledged")
    if _silenced(alert):
        return _finish(notification, NotificationStatus.SKIPPED, "silenced")
    url = alert.rule.webhook_url or settings.KVDASH_ALERT_WEBHOOK_URL
    if not url:
        return _finish(notification, NotificationStatus.SKIPPED, "no webhook URL")
    Notification.objects.filter(pk=notification.pk).update(attempts=F("attempts") + 1)
    try:
        Webhook(url, timeout=settings.KVDASH_ALERT_WEBHOOK_TIMEOUT).post(
            alert_payload(alert=alert, event=notification.event)
        )
    except WebhookError as error:
        log.warning("alert %s: webhook %s failed: %s", alert.pk, notification.event, error)
        if error.retry and not final_attempt:
            Notification.objects.filter(pk=notification.pk).update(last_error=str(error)[:500])
            raise
        return _finish(notification, NotificationStatus.FAILED, str(error))
    return _finish(notification, NotificationStatus.SENT)
