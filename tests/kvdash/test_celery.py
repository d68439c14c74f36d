from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from kvdash.tasks import ping

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker():
    """A real Celery worker process on the configured broker (Redis in CI, the filesystem transport here)."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "kvdash",
            "worker",
            "--pool",
            "solo",
            "-l",
            "WARNING",
            "-n",
            f"test-{os.getpid()}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "kvdash.settings", "KVDASH_VAR_DIR": str(settings.VAR_DIR)},
    )
    yield process
    process.terminate()
    process.wait(timeout=20)


def test_a_task_makes_the_round_trip_through_the_broker_and_a_worker(worker):
    result = ping.delay()
    assert result.get(timeout=60) == "pong"
    assert worker.poll() is None
