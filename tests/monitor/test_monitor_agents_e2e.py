"""The data path end to end on the real stack: PostgreSQL, Redis, two agents as two nodes (no database
credentials), a central ingest worker, simulated vLLM servers."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from stack import Relay, Workers, real_stack_available, sim_server, wait_for, worker_database_url

from monitor.models import Endpoint, EngineSample, IngestDrop, Node
from monitor.services import endpoint_register, node_key_create
from monitor.signing import payload_sign
from monitor.tasks import ingest_batch, schedule_scrapes

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not real_stack_available(), reason="runs on PostgreSQL and Redis (DATABASE_URL, CELERY_BROKER_URL)"
    ),
]


@pytest.fixture
def base_env() -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "kvdash.settings",
        "KVDASH_VAR_DIR": str(settings.VAR_DIR),
        "DATABASE_URL": worker_database_url(),
        # A task whose worker was killed comes back after 5 s instead of an hour.
        "CELERY_VISIBILITY_TIMEOUT": "5",
        "KVDASH_INGEST_RETRY_MAX_S": "4",
    }


@pytest.fixture
def workers(base_env):
    running = Workers(base_env)
    yield running
    running.stop_all()


@pytest.fixture
def servers():
    started = {"a": sim_server(), "b": sim_server()}
    yield started
    for server in started.values():
        server.stop()


def rows(endpoint: Endpoint) -> int:
    return EngineSample.objects.filter(endpoint=endpoint).count()


def round_and_wait(expected: dict[Endpoint, int], timeout: float = 30) -> None:
    schedule_scrapes.apply()
    wait_for(
        lambda: all(rows(endpoint) >= count for endpoint, count in expected.items()),
        timeout=timeout,
        what=f"rows {[(e.pk, c) for e, c in expected.items()]}",
    )


def test_two_nodes_flow_a_server_down_leaves_a_gap_and_a_killed_worker_loses_and_duplicates_nothing(
    workers, servers, base_env
):
    keys = {name: node_key_create(name=f"node-{name}") for name in ("a", "b")}
    a, _ = endpoint_register(url=servers["a"].url, node="node-a")
    b, _ = endpoint_register(url=servers["b"].url, node="node-b")
    workers.central()
    for name in ("a", "b"):
        workers.agent(f"node-{name}", str(keys[name]))
    # Both agents said hello (registration and heartbeat) before any scrape was asked of them.
    wait_for(lambda: Node.objects.filter(last_heartbeat_at__isnull=False).count() == 2, timeout=60, what="hellos")
    assert None not in set(Node.objects.values_list("nvml_available", flat=True))

    for n in range(1, 4):
        round_and_wait({a: n, b: n})

    # Server a stops: its scrapes record up=false and store nothing; b keeps flowing.
    port = servers["a"].port
    servers["a"].stop()
    stopped_at = dt.datetime.now(dt.UTC)
    for n in range(4, 6):
        round_and_wait({b: n})
    wait_for(lambda: Endpoint.objects.get(pk=a.pk).consecutive_failures >= 2, timeout=20, what="a down twice")
    a.refresh_from_db()
    assert a.up is False and "refused" in a.last_error.lower()
    assert rows(a) == 3
    down_since = a.last_success_at

    # Restarted on the same port, it resumes; the stored series has a hole where it was down.
    restarted_at = dt.datetime.now(dt.UTC)
    servers["a"] = sim_server(port)
    round_and_wait({a: 4, b: 6})
    times = list(EngineSample.objects.filter(endpoint=a).order_by("time").values_list("time", flat=True))
    assert times[2] == down_since
    # While a was stopped: no row of a (a gap, not zeros), and b's scrapes of those rounds are stored.
    window = {"time__gt": stopped_at, "time__lt": restarted_at}
    assert not EngineSample.objects.filter(endpoint=a, **window).exists()
    assert EngineSample.objects.filter(endpoint=b, **window).count() == 2
    assert Endpoint.objects.get(pk=a.pk).up is True

    # The central worker is killed with SIGKILL in the middle of storing b's batch (held on a row lock):
    # the batch was never acknowledged, so it comes back to the next worker and is stored exactly once.
    with psycopg.connect(worker_database_url(), autocommit=False) as blocker:
        blocker.execute("SELECT 1 FROM monitor_endpoint WHERE id = %s FOR UPDATE", [b.pk])
        schedule_scrapes.apply()
        wait_for(lambda: _waiting_on_lock(), timeout=30, what="ingest blocked on the row lock")
        workers.kill("central")
        blocker.rollback()
    workers.central("central-2")
    wait_for(lambda: rows(a) >= 5 and rows(b) >= 7, timeout=60, what="the killed batch redelivered")
    round_and_wait({a: 6, b: 8})
    assert (rows(a), rows(b)) == (6, 8)
    for endpoint in (a, b):
        times = list(EngineSample.objects.filter(endpoint=endpoint).values_list("time", flat=True))
        assert len(times) == len(set(times))

    # A payload signed by node a's key cannot write node b's endpoint, nor can a forged signature.
    body = json.dumps(
        {
            "v": 1,
            "node": "node-a",
            "endpoints": [{"id": b.pk, "up": True, "scraped_at": dt.datetime.now(dt.UTC).timestamp(), "engines": []}],
        }
    )
    ingest_batch.apply_async(args=[body, keys["a"].key_id, payload_sign(body=body, secret=keys["a"].secret)])
    ingest_batch.apply_async(args=[body, keys["a"].key_id, payload_sign(body=body, secret="guessed")])
    wait_for(lambda: IngestDrop.objects.filter(node_name="node-a").count() == 2, timeout=30, what="drops counted")
    assert dict(IngestDrop.objects.filter(node_name="node-a").values_list("reason", "count")) == {
        "foreign_endpoint": 1,
        "bad_signature": 1,
    }
    assert rows(b) == 8


def _waiting_on_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0] > 0


def test_postgresql_away_for_30_s_loses_no_sample(workers, servers, base_env):
    """Beat and the agents keep scraping while the central worker cannot reach PostgreSQL; the batches wait
    in Redis (ingest retries with backoff) and land when it is back: no hole in the series."""
    interval = 2
    key = node_key_create(name="node-a")
    endpoint, _ = endpoint_register(url=servers["a"].url, node="node-a")
    db = connection.settings_dict
    relay = Relay((db.get("HOST") or "127.0.0.1", int(db.get("PORT") or 5432)))
    try:
        workers.central(
            database_url=worker_database_url(port=relay.port), beat=True, KVDASH_SCRAPE_INTERVAL=str(interval)
        )
        workers.agent("node-a", str(key))
        wait_for(lambda: rows(endpoint) >= 3, timeout=60, what="samples before the outage")

        outage_start = dt.datetime.now(dt.UTC)
        relay.go_down()
        time.sleep(30)
        during = rows(endpoint)
        relay.come_back()
        outage_end = dt.datetime.now(dt.UTC)
        wait_for(
            lambda: EngineSample.objects.filter(endpoint=endpoint, time__gt=outage_end).exists(),
            timeout=90,
            what="samples after the outage",
        )
        # Everything scraped during the outage arrives (retries back off to 4 s in this test).
        wait_for(
            lambda: (
                EngineSample.objects.filter(endpoint=endpoint, time__gte=outage_start, time__lt=outage_end).count()
                >= 30 // interval - 2
            ),
            timeout=60,
            what="the outage's samples",
        )
        times = list(EngineSample.objects.filter(endpoint=endpoint).order_by("time").values_list("time", flat=True))
        gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(times)]
        # The tick that meets the cut can be a tick or two late (the solo worker is failing its first ingest);
        # every later one was scraped and is stored.
        late = [(str(t), g) for t, g in zip(times[1:], gaps, strict=True) if g > interval * 1.5]
        assert max(gaps) <= 4 * interval, late
        assert during <= rows(endpoint)
    finally:
        relay.close()
