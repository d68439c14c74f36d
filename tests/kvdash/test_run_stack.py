from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(url: str, deadline: float) -> requests.Response:
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            return requests.get(url, timeout=2)
        except requests.RequestException as exc:
            last_error = exc
            time.sleep(0.5)
    raise AssertionError(f"{url} did not answer in time: {last_error}")


@pytest.mark.slow
def test_run_stack_serves_home_and_healthz_on_embedded_defaults_and_stops_on_ctrl_c(tmp_path):
    """What `make run` does after installing: embedded SQLite and filesystem broker, no external service."""
    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"}
    }
    env.update(KVDASH_VAR_DIR=str(tmp_path / "var"), KVDASH_ENV="dev", DJANGO_SETTINGS_MODULE="kvdash.settings")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=180,
    )
    port = _free_port()
    started = time.monotonic()
    stack = subprocess.Popen(
        [sys.executable, "manage.py", "run_stack", "--port", str(port), "--no-fleet"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        home = _wait_for(f"http://127.0.0.1:{port}/", started + 60)
        assert home.status_code == 200
        assert "kvdash" in home.text
        health = _wait_for(f"http://127.0.0.1:{port}/healthz", started + 60)
        assert health.status_code == 200
        assert health.json()["checks"]["database"]["ok"] is True
        assert time.monotonic() - started < 60
    finally:
        os.killpg(stack.pid, signal.SIGINT)
        output, _ = stack.communicate(timeout=30)
    assert stack.returncode == 0, output
    assert "stopped" in output
