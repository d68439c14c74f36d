"""Make a signing key for a GPU node's agent (creating the node if needed) and print it once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.services import MonitorInputError, node_key_create


class Command(BaseCommand):
    help = (
        "Create a node key for NAME and print it once (KVDASH_NODE_KEY=...). The node's previous key stays "
        "valid until --revoke-others or the next rotation, so agents can switch without a gap."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="Node name: its agent's queue is agent.<name>.")
        parser.add_argument("--revoke-others", action="store_true", help="Revoke the node's other keys now.")
        parser.add_argument("--quiet", action="store_true", help="Print the bare key only (for scripts).")

    def handle(self, *args: Any, name: str, revoke_others: bool, quiet: bool, **options: Any) -> None:
        try:
            key = node_key_create(name=name, revoke_others=revoke_others)
        except MonitorInputError as error:
            raise CommandError(str(error), returncode=2) from None
        if quiet:
            self.stdout.write(str(key))
            return
        self.stdout.write(f"KVDASH_NODE_KEY={key}")
        self.stderr.write(
            f"Key {key.key_id} for node {name}: give it to that node's agent only (run_agent reads KVDASH_NODE_KEY "
            "or KVDASH_NODE_KEY_FILE). It is not shown again."
        )
