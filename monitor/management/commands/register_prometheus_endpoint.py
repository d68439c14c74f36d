"""Register an endpoint read from an existing Prometheus instead of an agent."""

from __future__ import annotations

import json
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from monitor.prometheus_sources import prometheus_endpoint_register, prometheus_source_save
from monitor.services import MonitorInputError


class Command(BaseCommand):
    help = (
        "Register endpoint NAME whose vLLM series are read from the Prometheus at --source (its base URL) through "
        "--selector, e.g. '{instance=\"10.0.0.7:8000\"}'. The source is created if missing (named --source-name); "
        "its bearer token comes from --token-env (an environment variable's name), never the command line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="The endpoint's display name.")
        parser.add_argument("--source", required=True, help="The query API's base URL, e.g. http://prometheus:9090")
        parser.add_argument("--source-name", default="prometheus", help="Name of the source (default: prometheus).")
        parser.add_argument("--selector", required=True, help='Label matchers, e.g. {instance="10.0.0.7:8000"}')
        parser.add_argument("--scenario", type=int, default=None, help="Id of the planner scenario it follows.")
        parser.add_argument("--node", default=None, help="Node it is listed under (default: the source's name).")
        parser.add_argument("--url", default=None, help="The server's URL (default: http://<instance label>).")
        parser.add_argument("--token-env", default=None, help="Environment variable holding the bearer token.")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, name: str, source: str, source_name: str, selector: str, **options: Any) -> None:
        token = None
        if options["token_env"]:
            token = os.environ.get(options["token_env"])
            if not token:
                raise CommandError(f"token_env: ${options['token_env']} is empty", returncode=2)
        try:
            with transaction.atomic():
                source_row, _ = prometheus_source_save(name=source_name, base_url=source, bearer_token=token)
                target, created = prometheus_endpoint_register(
                    name=name,
                    source=source_row.name,
                    selector=selector,
                    node=options["node"],
                    url=options["url"],
                    scenario_id=options["scenario"],
                )
        except MonitorInputError as error:
            raise CommandError(str(error), returncode=2) from None
        endpoint = target.endpoint
        row = {
            "id": endpoint.pk,
            "target": target.pk,
            "source": source_row.name,
            "selector": target.selector,
            "url": endpoint.url,
            "scenario": endpoint.scenario_id,
            "created": created,
        }
        if options["json"]:
            self.stdout.write(json.dumps(row))
        else:
            verb = "registered" if created else "updated"
            self.stdout.write(
                f"{verb} endpoint {endpoint.pk} ({name}): {source_row.base_url} {target.selector}, pulled every scrape "
                "interval by the central worker"
            )
