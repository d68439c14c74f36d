"""Scrape one vLLM server's /metrics once and print what the agent would record.

Exit 0 whatever the target answered (its failure is data: ``up`` false and ``error``); exit 2 on bad
arguments, as argparse does."""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.scrape.records import ScrapeResult
from monitor.scrape.vllm import VllmScraper

BAD_ARGUMENTS = 2


def exit_two_on_bad_arguments(parser: CommandParser) -> CommandParser:
    """Make argparse's complaints exit 2 through ``call_command`` too (Django's CommandError defaults to 1;
    from the command line argparse already exits 2)."""
    complain = parser.error

    def error(message: str) -> Any:
        try:
            return complain(message)
        except CommandError as raised:
            raise CommandError(str(raised), returncode=BAD_ARGUMENTS) from None

    parser.error = error
    return parser


def _cell(value: object, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and digits:
        return f"{value:.{digits}f}"
    return str(value)


def human_table(result: ScrapeResult) -> str:
    head = f"{result.url}  up={'yes' if result.up else 'no'}  {result.duration_ms:.1f} ms"
    if not result.up:
        return f"{head}  error: {result.error}"
    lines = [f"{head}  {result.series_count} samples"]
    columns = ("engine", "model", "kv_usage", "running", "waiting", "preempt", "blocks", "block_size", "dtype")
    rows = [columns]
    for engine in result.engines:
        values = engine.as_dict()
        usage = values.get("kv_cache_usage")
        rows.append(
            (
                engine.engine,
                engine.model_name or "-",
                "-" if usage is None else f"{usage * 100:.1f}%",
                _cell(values.get("num_requests_running")),
                _cell(values.get("num_requests_waiting")),
                _cell(values.get("num_preemptions_total")),
                _cell(values.get("num_gpu_blocks")),
                _cell(values.get("block_size")),
                engine.cache_dtype or "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines += [f"rejected: {reason}" for reason in result.rejected]
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Scrape a vLLM server's /metrics once (URL: its base URL or the /metrics URL) and print the records."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        return exit_two_on_bad_arguments(super().create_parser(prog_name, subcommand, **kwargs))

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("url", help="http(s)://host:port of the vLLM server, or its /metrics URL.")
        parser.add_argument("--json", action="store_true", help="Print the result as one JSON object.")
        parser.add_argument("--timeout", type=float, default=5.0, help="Seconds for the whole scrape (default 5).")

    def handle(self, *args: Any, **options: Any) -> None:
        url: str = options["url"]
        try:
            parts = urlsplit(url)
            valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:  # "http://[::1"
            valid = False
        if not valid:
            raise CommandError(f"not an http(s) URL: {url!r}", returncode=BAD_ARGUMENTS)
        timeout: float = options["timeout"]
        if not (math.isfinite(timeout) and timeout > 0):
            raise CommandError("--timeout must be a positive number of seconds", returncode=BAD_ARGUMENTS)
        result = VllmScraper(timeout=timeout).scrape(url)
        if options["json"]:
            self.stdout.write(json.dumps(result.as_dict()))
        else:
            self.stdout.write(human_table(result))
