"""Alert tasks: ``monitor.evaluate_alerts`` (beat, every scrape interval) and ``monitor.notify_alert`` (one
webhook message, retried with backoff). Imported by MonitorConfig.ready(): Celery autodiscovers tasks.py only.
"""

from __future__ import annotations

import random
from typing import Any

from celery import shared_task

# Backoff between webhook attempts: 2, 4, 8, ... seconds up to this, with jitter; 8 tries span ~10 minutes.
NOTIFY_RETRY_MAX_S = 300
NOTIFY_MAX_RETRIES = 8


@shared_task(name="monitor.evaluate_alerts", ignore_result=True, soft_time_limit=60, time_limit=90)
def evaluate_alerts() -> dict[str, Any]:
    from monitor.alerting import alerts_evaluate

    outcome = alerts_evaluate()
    return {
        "fired": outcome.fired,
        "firing": outcome.firing,
        "resolved": outcome.resolved,
        "notifications": len(outcome.notifications),
    }


@shared_task(
    bind=True,
    name="monitor.notify_alert",
    ignore_result=True,
    max_retries=NOTIFY_MAX_RETRIES,
    soft_time_limit=30,
    time_limit=45,
)
def notify_alert(self: Any, notification_id: int) -> str:
    from monitor.notify import WebhookError, notification_send

    try:
        return notification_send(
            notification_id=notification_id, final_attempt=self.request.retries >= self.max_retries
        )
    except WebhookError as error:
        backoff = min(2 ** (self.request.retries + 1), NOTIFY_RETRY_MAX_S)
        raise self.retry(exc=error, countdown=backoff * random.uniform(0.5, 1.0)) from None
