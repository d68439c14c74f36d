"""Run a GPU node's agent: a Celery worker on the node's own queue, with broker access and the node key only."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.models import agent_queue
from monitor.services import MonitorInputError, node_name_clean
from monitor.signing import InvalidNodeKey, node_key_parse


class Command(BaseCommand):
    help = (
        "Start the agent of node NAME: a Celery worker consuming agent.NAME that scrapes the node's vLLM servers "
        "and NVML and sends signed batches to central ingest. Needs CELERY_BROKER_URL and KVDASH_NODE_KEY (or "
        "--key-file / KVDASH_NODE_KEY_FILE); never database credentials."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--node", required=True)
        parser.add_argument("--key-file", default=None, help="File holding the node key (else KVDASH_NODE_KEY).")
        parser.add_argument("--concurrency", type=int, default=2)
        parser.add_argument("--loglevel", default="INFO")

    def handle(self, *args: Any, node: str, key_file: str | None, concurrency: int, loglevel: str, **opts: Any) -> None:
        try:
            node = node_name_clean(node)
        except MonitorInputError as error:
            raise CommandError(str(error), returncode=2) from None
        env = dict(os.environ)
        if key_file:
            env["KVDASH_NODE_KEY_FILE"] = key_file
        try:
            key_text = env.get("KVDASH_NODE_KEY") or (
                Path(env["KVDASH_NODE_KEY_FILE"]).read_text() if env.get("KVDASH_NODE_KEY_FILE") else ""
            )
            node_key_parse(key_text)
        except (InvalidNodeKey, OSError):
            raise CommandError(
                f"node {node}: no valid node key; make one with `manage.py create_node_key {node}` and pass it in "
                "KVDASH_NODE_KEY or --key-file",
                returncode=2,
            ) from None
        if not 1 <= concurrency <= 64:
            raise CommandError("concurrency: 1 to 64", returncode=2)
        env["KVDASH_AGENT_NODE"] = node
        command = [
            sys.executable, "-m", "celery", "-A", "kvdash", "worker",
            "-Q", agent_queue(node), "-n", f"agent-{node}@%h", "--concurrency", str(concurrency),
            "-l", loglevel, "--without-gossip", "--without-mingle",
        ]  # fmt: skip
        self.stdout.write(f"agent for node {node} consuming {agent_queue(node)}")
        self.stdout.flush()
        os.execvpe(command[0], command, env)  # noqa: S606 - replace this process: signals reach the worker
