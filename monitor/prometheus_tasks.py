"""Central tasks that read Prometheus-sourced endpoints (``monitor/prometheus_sources.py``).

``monitor.pull_prometheus`` runs every scrape interval (beat) and queues one ``monitor.pull_prometheus_target``
per target, so one slow Prometheus delays only its own targets. Both expire after one interval: a worker that
was away does not wake up to a backlog, and the next pull's window covers what was missed.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

log = logging.getLogger(__name__)


@shared_task(name="monitor.pull_prometheus", ignore_result=True, soft_time_limit=20, time_limit=30)
def pull_prometheus() -> int:
    from monitor.prometheus_sources import prometheus_target_ids

    target_ids = prometheus_target_ids()
    for target_id in target_ids:
        pull_prometheus_target.apply_async(args=[target_id], expires=float(settings.KVDASH_SCRAPE_INTERVAL))
    return len(target_ids)


@shared_task(
    name="monitor.pull_prometheus_target",
    ignore_result=True,
    # The database away: retried briefly; the next round's window re-reads what this one missed.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    max_retries=3,
    # Each of the ~20 queries has the scrape timeout; a source slower than that is down for this round.
    soft_time_limit=max(5.0, settings.KVDASH_SCRAPE_TIMEOUT * 6),
    time_limit=max(10.0, settings.KVDASH_SCRAPE_TIMEOUT * 6 + 10),
)
def pull_prometheus_target(target_id: int) -> dict[str, Any]:
    from monitor.prometheus_sources import PrometheusPullError, prometheus_target_pull

    try:
        outcome = prometheus_target_pull(target_id=target_id)
    except PrometheusPullError as error:
        log.info("Prometheus pull skipped: %s", error)
        return {"target": target_id, "skipped": str(error)}
    return {"target": target_id, "up": outcome.up, "points": outcome.points, "error": outcome.error}
