"""Monitor tasks. Central ones (schedule, ingest, rollup, prune, ...) run on the central worker; ``scrape_node``
runs on the node's agent (queue ``agent.<node>``), which has no database.

Every task is safe to run twice: ingest ignores samples it already has, rollups recompute whole buckets.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import InterfaceError, OperationalError

from monitor.agent import AgentConfig, HistogramPacer, agent_config_from_env, agent_round, payload_seal
from monitor.models import agent_queue
from monitor.scrape import NvmlReader, VllmScraper

log = logging.getLogger(__name__)

_agent: dict[str, Any] = {}


def _agent_state() -> tuple[AgentConfig, VllmScraper, NvmlReader, HistogramPacer]:
    """The agent's per-process state: its key, one HTTP session, the NVML reader, the histogram pacer."""
    if not _agent:
        _agent.update(
            config=agent_config_from_env(),
            scraper=VllmScraper(timeout=settings.KVDASH_SCRAPE_TIMEOUT),
            nvml=NvmlReader(),
            pacer=HistogramPacer(),
        )
    return _agent["config"], _agent["scraper"], _agent["nvml"], _agent["pacer"]


@shared_task(name="monitor.schedule_scrapes", ignore_result=True, soft_time_limit=20, time_limit=30)
def schedule_scrapes() -> int:
    """Beat, every interval: one scrape per node on its agent's queue. Expires after one interval, so an
    agent that was away does not wake up to a backlog of stale scrapes."""
    from monitor.selectors import scrape_plan

    plan = scrape_plan()
    for node_name, targets in plan.items():
        scrape_node.apply_async(
            args=[node_name, targets], queue=agent_queue(node_name), expires=float(settings.KVDASH_SCRAPE_INTERVAL)
        )
    return len(plan)


@shared_task(
    name="monitor.scrape_node",
    ignore_result=True,
    soft_time_limit=max(1.0, settings.KVDASH_SCRAPE_TIMEOUT + 2),
    time_limit=settings.KVDASH_SCRAPE_TIMEOUT + 10,
)
def scrape_node(node_name: str, targets: list[dict[str, Any]]) -> int:
    """On the agent: scrape the node's servers and GPUs, sign, and hand the batch to central ingest."""
    config, scraper, nvml, pacer = _agent_state()
    if config.node != node_name:
        log.error("agent %s got a scrape for node %s: check the worker's queue", config.node, node_name)
        return 0
    payload = agent_round(config=config, targets=targets, scraper=scraper, nvml=nvml, pacer=pacer)
    sealed = payload_seal(payload=payload, key=config.key)
    ingest_batch.apply_async(args=[sealed.body, sealed.key_id, sealed.signature])
    return len(targets)


@shared_task(
    name="monitor.ingest_batch",
    ignore_result=True,
    # Acknowledged only once stored: a worker killed mid-task leaves the batch in the broker for another.
    acks_late=True,
    reject_on_worker_lost=True,
    # The database away: wait for it with backoff (about 25 minutes in all) while the batch stays queued.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    retry_backoff_max=settings.KVDASH_INGEST_RETRY_MAX_S,
    retry_jitter=True,
    max_retries=30,
    soft_time_limit=60,
    time_limit=90,
)
def ingest_batch(body: str, key_id: str, signature: str) -> dict[str, Any]:
    from monitor.ingest import ingest_signed

    outcome = ingest_signed(body=body, key_id=key_id, signature=signature)
    return {"node": outcome.node, "refused": outcome.refused, "rows": outcome.engine_rows, "dropped": outcome.dropped}


@shared_task(name="monitor.rollup", ignore_result=True, soft_time_limit=50, time_limit=58)
def rollup() -> dict[str, int]:
    from monitor.rollups import rollup_recent

    return rollup_recent()


@shared_task(name="monitor.rollup_catch_up", ignore_result=True, soft_time_limit=600, time_limit=800)
def rollup_catch_up() -> dict[str, int]:
    from monitor.rollups import rollup_catch_up as catch_up

    return catch_up()


@shared_task(name="monitor.prune", ignore_result=True, soft_time_limit=600, time_limit=900)
def prune() -> dict[str, int]:
    from monitor.rollups import retention_apply

    return retention_apply()


def agent_hello() -> None:
    """Register this agent with the centre at start: a batch with no endpoints, only NVML and the heartbeat."""
    config, _scraper, nvml, pacer = _agent_state()
    payload = agent_round(config=config, targets=[], scraper=_scraper, nvml=nvml, pacer=pacer)
    sealed = payload_seal(payload=payload, key=config.key)
    ingest_batch.apply_async(args=[sealed.body, sealed.key_id, sealed.signature])


@worker_ready.connect
def _on_worker_ready(**_kwargs: Any) -> None:
    if os.environ.get("KVDASH_AGENT_NODE"):
        try:
            agent_hello()
        except Exception:  # the agent must come up even if its first hello fails; scrapes will heartbeat
            log.exception("agent hello failed")
