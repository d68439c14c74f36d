"""Read this machine's GPUs through NVML once and print them. Exit 0 when NVML is unavailable (that is the
answer: ``available`` false with the reason); exit 2 on bad arguments."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from monitor.management.commands.scrape_endpoint import exit_two_on_bad_arguments
from monitor.scrape.nvml import NvmlReader, NvmlSnapshot

MIB = 1024 * 1024


def human_table(snapshot: NvmlSnapshot) -> str:
    if not snapshot.available:
        return snapshot.error or "NVML unavailable"
    lines = [f"driver {snapshot.driver_version or '?'}"]
    for gpu in snapshot.gpus:
        util = "-" if gpu.utilization_gpu_pct is None else f"{gpu.utilization_gpu_pct:.0f}%"
        lines.append(
            f"GPU {gpu.index}  {gpu.name}  {gpu.uuid}  used {gpu.memory_used_bytes // MIB} MiB"
            f" / {gpu.memory_total_bytes // MIB} MiB  util {util}  processes {len(gpu.processes)}"
        )
        for process in gpu.processes:
            used = "?" if process.used_memory_bytes is None else f"{process.used_memory_bytes // MIB} MiB"
            lines.append(f"    pid {process.pid}  {used}")
    if snapshot.error:
        lines.append(f"error: {snapshot.error}")
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Read the GPUs through NVML (memory, utilisation, per-process memory) and print them."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        return exit_two_on_bad_arguments(super().create_parser(prog_name, subcommand, **kwargs))

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print the snapshot as one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        snapshot = NvmlReader().snapshot()
        if options["json"]:
            self.stdout.write(json.dumps(snapshot.as_dict()))
        else:
            self.stdout.write(human_table(snapshot))
