"""Start the whole embedded stack for `make run`: web server, the central Celery worker with beat, the
simulated fleet registered under node ``local`` and that node's agent.

Ctrl-C (or any child exiting) stops all of it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management import get_commands
from django.core.management.base import BaseCommand

from monitor.demo import DEMO_NODE, demo_monitor_setup
from monitor.simulator.fleet import DEFAULT_BASE_PORT


class Command(BaseCommand):
    help = "Run the web server, a Celery worker with beat and (when available) the simulated vLLM fleet."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-fleet", action="store_true", help="Do not start the simulated fleet.")
        parser.add_argument("--fleet-base-port", type=int, default=DEFAULT_BASE_PORT)
        parser.add_argument("--fleet-time-scale", type=float, default=1.0, help="Simulated seconds per second.")

    def handle(self, *args, host: str, port: int, no_fleet: bool, **options) -> None:
        base_port, time_scale = options["fleet_base_port"], options["fleet_time_scale"]
        python = sys.executable
        manage = str(Path(__file__).resolve().parents[3] / "manage.py")
        queues = f"celery,{settings.KVDASH_INGEST_QUEUE}"
        worker = [
            python,
            "-m",
            "celery",
            "-A",
            "kvdash",
            "worker",
            "-B",
            "-Q",
            queues,
            "-l",
            "INFO",
            "--concurrency",
            "2",
        ]
        commands: dict[str, list[str]] = {
            "worker": worker,
            "web": [python, manage, "runserver", f"{host}:{port}", "--noreload"],
        }
        env = dict(os.environ)
        if not no_fleet and "simulate_fleet" in get_commands():
            commands["fleet"] = [
                python, manage, "simulate_fleet", "--base-port", str(base_port), "--time-scale", str(time_scale),
            ]  # fmt: skip
            key = demo_monitor_setup(base_port=base_port)
            # The local agent gets its key through the environment, as a GPU node's would.
            env["KVDASH_NODE_KEY"] = str(key)
            commands["agent"] = [python, manage, "run_agent", "--node", DEMO_NODE, "--concurrency", "1"]

        children: dict[str, subprocess.Popen] = {}
        stopping = False

        def stop(*_args: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        for name, command in commands.items():
            self.stdout.write(f"starting {name}: {' '.join(command[1:])}")
            children[name] = subprocess.Popen(command, env=env)
        self.stdout.write(self.style.SUCCESS(f"kvdash is up on http://{host}:{port}/ — Ctrl-C stops everything"))
        try:
            while not stopping:
                exited = [name for name, child in children.items() if child.poll() is not None]
                if exited:
                    self.stderr.write(f"{', '.join(exited)} exited; stopping the rest")
                    break
                time.sleep(0.5)
        finally:
            for child in children.values():
                if child.poll() is None:
                    child.terminate()
            deadline = time.monotonic() + 10
            for child in children.values():
                try:
                    child.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.kill()
            self.stdout.write("stopped")
