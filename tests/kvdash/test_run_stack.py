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
        assert health.json()["checks"]["database"]["detail"] == "sqlite"
        assert time.monotonic() - started < 60
    finally:
        os.killpg(stack.pid, signal.SIGINT)
        output, _ = stack.communicate(timeout=30)
    assert stack.returncode == 0, output
    assert "stopped" in output


@pytest.mark.slow
def test_make_run_shows_every_simulated_server_and_the_overloaded_one_first_and_critical(tmp_path):
    """`make run`'s stack end to end on embedded defaults: the fleet registered under node `local`, its agent
    scraping, the overview listing every server within two scrape intervals of the first scrape, the
    overloaded server first and critical once its cache fills, and its page's six charts."""
    from monitor.simulator.fleet import DEMO_FLEET

    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"}
    }
    env.update(KVDASH_VAR_DIR=str(tmp_path / "var"), KVDASH_ENV="dev", DJANGO_SETTINGS_MODULE="kvdash.settings")
    env.update(KVDASH_SCRAPE_INTERVAL="2")
    for command in (["migrate", "--noinput"], ["load_catalog"]):
        subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True, capture_output=True)
    port, fleet_port = _free_port(), _free_fleet_ports(len(DEMO_FLEET))
    stack = subprocess.Popen(
        [sys.executable, "manage.py", "run_stack", "--port", str(port), "--fleet-base-port", str(fleet_port),
         "--fleet-time-scale", "4"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(f"{base}/healthz", time.monotonic() + 90)

        def tiles() -> list[dict]:
            return requests.get(f"{base}/monitor/fleet.json", timeout=5).json()["tiles"]

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(t["last_scrape_at"] for t in tiles()):
            time.sleep(0.5)
        first_scrape = time.monotonic()
        while time.monotonic() < deadline:
            current = tiles()
            if len({t["endpoint_id"] for t in current if t["last_scrape_at"]}) == len(DEMO_FLEET):
                break
            time.sleep(0.5)
        assert len({t["endpoint_id"] for t in current if t["last_scrape_at"]}) == len(DEMO_FLEET), current
        assert time.monotonic() - first_scrape <= 2 * 2 + 1  # two intervals, and a polling step
        overloaded = "Demo: Qwen3 8B on L4 (overloaded)"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            current = tiles()
            if current[0]["scenario"] == overloaded and current[0]["state"] == "critical":
                break
            time.sleep(2)
        assert (current[0]["scenario"], current[0]["state"]) == (overloaded, "critical"), current[:2]
        charts = requests.get(f"{base}/monitor/endpoints/{current[0]['endpoint_id']}/charts.json", timeout=30).json()
        assert len(charts["figures"]) == 6
        assert any(v is not None for v in charts["figures"]["chart-kv-usage"]["data"][0]["y"])
    finally:
        os.killpg(stack.pid, signal.SIGINT)
        output, _ = stack.communicate(timeout=60)
    assert "stopped" in output


def _free_fleet_ports(count: int) -> int:
    """A base port with `count` free consecutive ports above it."""
    for _ in range(50):
        base = _free_port()
        if base + count > 65535:
            continue
        try:
            sockets = [socket.create_server(("127.0.0.1", base + i)) for i in range(count)]
        except OSError:
            continue
        for sock in sockets:
            sock.close()
        return base
    raise AssertionError("no free run of ports")
