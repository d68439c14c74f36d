from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from monitor.ingest import ingest_caches_clear
from monitor.partitions import forget_known_partitions


@pytest.fixture(autouse=True)
def _forget_partitions() -> None:
    # Test databases are created and rolled back: process-wide caches must not outlive them.
    forget_known_partitions()
    ingest_caches_clear()


@pytest.fixture
def frozen_now(monkeypatch: pytest.MonkeyPatch) -> dt.datetime:
    """timezone.now() pinned to 2026-12-01T00:10:00Z, ten minutes after the factories' T0."""
    moment = dt.datetime(2026, 12, 1, 0, 10, tzinfo=dt.UTC)
    monkeypatch.setattr(timezone, "now", lambda: moment)
    return moment
