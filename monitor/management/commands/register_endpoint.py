"""Register a vLLM server for its node's agent to scrape."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.services import MonitorInputError, endpoint_register


class Command(BaseCommand):
    help = "Register the vLLM server at URL on node NAME (created if missing), optionally tied to a scenario."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("url", help="The server's base URL, e.g. http://10.0.0.7:8000")
        parser.add_argument("--node", required=True)
        parser.add_argument("--scenario", type=int, default=None, help="Id of the planner scenario it follows.")
        parser.add_argument("--name", default="", help="Display name.")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, url: str, node: str, scenario: int | None, name: str, **options: Any) -> None:
        try:
            endpoint, created = endpoint_register(url=url, node=node, name=name, scenario_id=scenario)
        except MonitorInputError as error:
            raise CommandError(str(error), returncode=2) from None
        row = {"id": endpoint.pk, "url": endpoint.url, "node": node, "scenario": scenario, "created": created}
        if options["json"]:
            self.stdout.write(json.dumps(row))
        else:
            verb = "registered" if created else "updated"
            self.stdout.write(f"{verb} endpoint {endpoint.pk}: {endpoint.url} on node {node}")
