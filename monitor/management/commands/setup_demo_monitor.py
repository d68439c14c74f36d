"""Register the demo fleet under node ``local`` and write a fresh key for its agent (the compose demo profile)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.demo import DEMO_NODE, demo_monitor_setup
from monitor.simulator.fleet import DEFAULT_BASE_PORT


class Command(BaseCommand):
    help = (
        "Register the simulated fleet's servers (as simulate_fleet serves them on --host from --base-port) under node "
        "local, tied to their demo scenarios, and write a new key for the local agent to --key-file (mode 0600)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="Host name the agent reaches the fleet at.")
        parser.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT)
        parser.add_argument("--key-file", required=True, help="Where to write the local agent's key.")

    def handle(self, *args: Any, host: str, base_port: int, key_file: str, **options: Any) -> None:
        path = Path(key_file)
        if not path.parent.is_dir():
            raise CommandError(f"key_file: {path.parent} is not a directory", returncode=2)
        key = demo_monitor_setup(base_port=base_port, host=host)
        # Written by a fresh file descriptor with 0600: the key is a credential, even in a demo.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(f"{key}\n")
        self.stdout.write(f"demo fleet registered on node {DEMO_NODE} at http://{host}:{base_port}+; key in {path}")
