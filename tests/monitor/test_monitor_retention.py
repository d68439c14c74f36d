"""Retention drops whole day partitions on PostgreSQL (deletes rows elsewhere); late samples get rolled up."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from monitor_factories import endpoint_on, node_with_key

from monitor.ingest import samples_write
from monitor.models import EngineRollup, EngineSample
from monitor.partitions import partitions_list
from monitor.rollups import retention_apply, rollup_catch_up, rollup_recent

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def _sample(endpoint_id: int, when: dt.datetime) -> EngineSample:
    return EngineSample(endpoint_id=endpoint_id, engine=0, time=when, kv_cache_usage=0.5, num_requests_running=1)


def test_raw_samples_older_than_the_retention_go_and_newer_stay(settings):
    settings.KVDASH_RAW_RETENTION_DAYS = 30
    node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9001)
    old, kept = NOW - dt.timedelta(days=31), NOW - dt.timedelta(days=29)
    samples_write(EngineSample, [_sample(endpoint.pk, old), _sample(endpoint.pk, kept)])
    retention_apply(now=NOW)
    assert list(EngineSample.objects.values_list("time", flat=True)) == [kept]
    if connection.vendor == "postgresql":
        days = {day for _, day in partitions_list(table="monitor_enginesample")}
        # The 31-day-old partition was dropped whole; the next days' partitions exist ahead of ingest.
        assert dt.date(2026, 10, 31) not in days
        assert {dt.date(2026, 11, 2), dt.date(2026, 12, 1), dt.date(2026, 12, 2), dt.date(2026, 12, 3)} <= days


def test_a_late_sample_is_rolled_up_by_the_catch_up_sweep():
    node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9001)
    late = NOW - dt.timedelta(minutes=40)
    rollup_recent(now=NOW)
    # Stored 40 minutes late (ingest retried through an outage): the per-minute task has passed that minute.
    samples_write(EngineSample, [_sample(endpoint.pk, late)])
    rollup_recent(now=NOW)
    assert not EngineRollup.objects.filter(resolution=60, time=late).exists()
    rollup_catch_up(now=NOW)
    minute = EngineRollup.objects.get(resolution=60, time=late)
    assert (minute.samples, minute.kv_cache_usage_avg) == (1, 0.5)
    assert EngineRollup.objects.get(resolution=3600, time=NOW - dt.timedelta(hours=1)).samples == 1
