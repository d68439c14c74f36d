"""Run the demo fleet of simulated vLLM servers (``make run`` starts it) until Ctrl-C/SIGTERM."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.management.commands.simulate_vllm import run_until_signalled
from monitor.simulator.fleet import DEFAULT_BASE_PORT, DEMO_FLEET, fleet_member, servers_start, servers_stop
from monitor.simulator.scenarios import demo_fleet_specs
from planner.sizing import SizingInputError


class Command(BaseCommand):
    help = (
        "Start the demo fleet: simulated vLLM servers on consecutive ports from --base-port, each tied to a "
        "saved demo scenario (created if missing). Prints url, model and scenario id of each."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT)
        parser.add_argument("--time-scale", type=float, default=1.0, help="Simulated seconds per real second.")
        parser.add_argument(
            "--only", action="append", default=None, help=f"Start only these members: {[m.key for m in DEMO_FLEET]}"
        )
        parser.add_argument("--json", action="store_true", help="Print one JSON object per server instead.")
        parser.add_argument("--duration", type=float, default=None, help="Stop after this many seconds.")

    def handle(
        self, *args: Any, host: str, base_port: int, time_scale: float, only: list[str] | None, **options: Any
    ) -> None:
        if not 1 <= base_port <= 65535 - len(DEMO_FLEET):
            raise CommandError(f"base_port: must be between 1 and {65535 - len(DEMO_FLEET)}.")
        if not time_scale > 0:
            raise CommandError("time_scale: must be > 0.")
        try:
            members = [fleet_member(key) for key in only] if only else list(DEMO_FLEET)
        except LookupError as error:
            raise CommandError(f"only: {error.args[0]}") from None
        try:
            specs = demo_fleet_specs(members=members, base_port=base_port, host=host, time_scale=time_scale)
        except SizingInputError as error:
            raise CommandError(f"a demo scenario cannot be planned: {error.errors}") from None
        try:
            servers = servers_start(specs)
        except OSError as error:
            reason = error.strerror or error
            raise CommandError(f"base_port: cannot listen from {host}:{base_port} ({reason})") from None

        for member, spec, server in zip(members, specs, servers, strict=True):
            row = {
                "key": member.key,
                "url": server.url,
                "model": server.options.model_name,
                "scenario_id": spec.scenario_id,
                "engines": len(server.simulation.engines),
                "legacy_metrics": spec.legacy_metrics,
            }
            if options["json"]:
                self.stdout.write(json.dumps(row))
            else:
                self.stdout.write(
                    f"{row['url']}  model={row['model']}  scenario={row['scenario_id']}  "
                    f"engines={row['engines']}{'  (legacy V0 metrics)' if spec.legacy_metrics else ''}  [{member.key}]"
                )
        self.stdout.write(self.style.SUCCESS(f"simulated fleet of {len(servers)} up; Ctrl-C stops it"))
        self.stdout.flush()
        try:
            run_until_signalled(options["duration"])
        finally:
            servers_stop(servers)
            self.stdout.write("simulated fleet stopped")
