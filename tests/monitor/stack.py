"""A real monitor stack for the end-to-end tests: Celery workers as subprocesses (central ingest, one agent
per node), simulated vLLM servers in threads, and a TCP relay that can cut the central worker off from
PostgreSQL. Needs PostgreSQL and Redis (what the monitor runs on in production and in CI)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from monitor.simulator.load import LengthDistribution, LoadSpec
from monitor.simulator.server import SimulatorServer
from monitor.simulator.spec import ServerSpec, build_server

ROOT = Path(__file__).resolve().parents[2]


def real_stack_available() -> bool:
    return connection.vendor == "postgresql" and settings.CELERY_BROKER_URL.startswith("redis")


def worker_database_url(*, host: str = "127.0.0.1", port: int | None = None) -> str:
    """The URL of the database pytest-django made for this run, for the worker subprocesses."""
    db = connection.settings_dict
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{host}:{port or db.get('PORT') or 5432}/{db['NAME']}"


def wait_for(condition: Callable[[], Any], *, timeout: float, every: float = 0.25, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(every)
    raise AssertionError(f"{what} not met within {timeout} s")


def sim_server(port: int = 0) -> SimulatorServer:
    spec = ServerSpec(
        num_gpu_blocks=2000,
        block_size=16,
        max_model_len=8192,
        model_name="sim/e2e",
        load=LoadSpec(
            rate=4.0, prompt=LengthDistribution("fixed", 500), output=LengthDistribution("fixed", 100), seed=5
        ),
        time_scale=2.0,
        port=port,
    )
    return build_server(spec).start()


class Workers:
    """Celery worker subprocesses, stopped (or killed) at the end whatever happened."""

    def __init__(self, base_env: dict[str, str]) -> None:
        self.base_env = base_env
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def central(
        self, name: str = "central", *, database_url: str | None = None, beat: bool = False, **env_extra: str
    ) -> subprocess.Popen[bytes]:
        env = {**self.base_env, "DATABASE_URL": database_url or self.base_env["DATABASE_URL"], **env_extra}
        queues = f"celery,{settings.KVDASH_INGEST_QUEUE}"
        command = [sys.executable, "-m", "celery", "-A", "kvdash", "worker", "--pool", "solo", "-Q", queues]
        if beat:
            command.append("-B")
        return self._start(name, [*command, "-n", f"{name}-{os.getpid()}@%h", *_QUIET], env)

    def agent(self, node: str, key: str) -> subprocess.Popen[bytes]:
        # The agent gets a database URL that cannot work: it must never need one.
        env = {**self.base_env, "KVDASH_NODE_KEY": key, "DATABASE_URL": "postgres://nobody@127.0.0.1:9/none"}
        command = [
            sys.executable,
            "manage.py",
            "run_agent",
            "--node",
            node,
            "--concurrency",
            "2",
            "--loglevel",
            "WARNING",
        ]
        return self._start(f"agent-{node}", command, env)

    def _start(self, name: str, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(command, cwd=ROOT, env=env)
        self.processes[name] = process
        return process

    def kill(self, name: str) -> None:
        process = self.processes.pop(name)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        self.processes.clear()


_QUIET = ["-l", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"]


class Relay:
    """A TCP relay from a loopback port to PostgreSQL that can go down: cutting every connection and
    refusing new ones, as a database restart or a network partition does."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.up = True
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.close()

    def go_down(self) -> None:
        self.up = False
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            except OSError:
                pass

    def come_back(self) -> None:
        self.up = True

    def close(self) -> None:
        self._closed = True
        self.go_down()
        self.listener.close()
