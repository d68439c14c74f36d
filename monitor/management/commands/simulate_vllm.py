"""Run one simulated vLLM server until Ctrl-C/SIGTERM (or ``--duration`` seconds)."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.simulator.faults import FAULT_MODES, parse_fault
from monitor.simulator.load import LengthDistribution, LoadSpec
from monitor.simulator.scenarios import (
    scenario_served_model_name,
    scenario_simulation_plan,
    slug_simulation_plan,
)
from monitor.simulator.spec import ServerSpec, build_server
from planner.models import KvCacheDtype, Scenario
from planner.sizing import SizingInputError


def _errors_text(errors: dict[str, str]) -> str:
    return "; ".join(f"{name}: {message}" for name, message in errors.items())


def run_until_signalled(duration: float | None) -> None:
    """Block until SIGINT/SIGTERM or ``duration`` seconds. Signals can only be caught in the main thread; a
    command called from another thread (tests) relies on ``duration``."""
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
    stop.wait(duration)


class Command(BaseCommand):
    help = (
        "Serve a simulated vLLM engine (/metrics, /health, /v1/models, /fault) sized by a saved scenario, "
        "a model and GPU from the catalog, or a bare block count."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        where = parser.add_argument_group("serving")
        where.add_argument("--host", default="127.0.0.1")
        where.add_argument("--port", type=int, default=8100, help="0 picks a free port (printed).")
        where.add_argument("--served-model-name", default="", help="The model id in metrics labels and /v1/models.")
        where.add_argument("--legacy-metrics", action="store_true", help="Speak vLLM V0 metric names.")
        where.add_argument("--engines", type=int, default=None, help="Data-parallel engines (default: the plan's).")
        where.add_argument("--fault", choices=FAULT_MODES, default="none")
        where.add_argument(
            "--allow-remote-fault",
            action="store_true",
            help="Let clients on other machines use /fault (loopback only by default).",
        )
        where.add_argument("--fault-delay", default=None, help="Seconds, for --fault slow.")
        where.add_argument("--fault-duration", default=None, help="Seconds until the fault clears itself.")
        where.add_argument("--duration", type=float, default=None, help="Stop after this many wall-clock seconds.")
        where.add_argument("--max-steps-per-second", type=float, default=100.0, help="CPU cap per engine.")

        sizing = parser.add_argument_group("sizing")
        sizing.add_argument("--scenario", type=int, default=None, help="A saved planner scenario's id.")
        sizing.add_argument("--model", default=None, help="A model slug (saved profile or catalog).")
        sizing.add_argument("--gpu", default=None, help="A GPU slug (saved profile or catalog).")
        sizing.add_argument("--tp", type=int, default=None, help="Tensor-parallel size.")
        sizing.add_argument("--pp", type=int, default=None, help="Pipeline-parallel size.")
        sizing.add_argument("--gpu-count", type=int, default=None)
        sizing.add_argument("--kv-cache-dtype", choices=KvCacheDtype.values, default=None)
        sizing.add_argument("--gpu-memory-utilization", type=float, default=None)
        sizing.add_argument("--kv-cache-memory-gib", type=float, default=None)
        sizing.add_argument("--max-model-len", type=int, default=None)
        sizing.add_argument("--max-num-seqs", type=int, default=None)
        sizing.add_argument("--max-num-batched-tokens", type=int, default=None)
        sizing.add_argument("--num-gpu-blocks", type=int, default=None, help="Override the plan's block count.")
        sizing.add_argument("--block-size", type=int, default=None)
        sizing.add_argument("--enable-prefix-caching", action="store_true")

        load = parser.add_argument_group("load")
        load.add_argument("--rate", type=float, default=None, help="Poisson arrivals per simulated second.")
        load.add_argument("--concurrency", type=int, default=None, help="Keep this many requests in flight.")
        load.add_argument("--prompt-len", default=None, help="fixed:N | uniform:LO:HI | lognormal:MEDIAN:SIGMA")
        load.add_argument("--output-len", default=None, help="Same forms as --prompt-len.")
        load.add_argument("--max-tokens", type=int, default=None, help="Outputs reaching it finish as 'length'.")
        load.add_argument("--shared-prefix-fraction", type=float, default=0.0)
        load.add_argument("--shared-prefix-tokens", type=int, default=None)
        load.add_argument("--time-scale", type=float, default=1.0, help="Simulated seconds per wall-clock second.")
        load.add_argument("--seed", type=int, default=0)

    def handle(self, *args: Any, **options: Any) -> None:
        spec = self._spec(options)
        try:
            server = build_server(spec)
            server.remote_fault = options["allow_remote_fault"]
            server.start()
        except ValueError as error:
            raise CommandError(str(error)) from None
        except OSError as error:
            raise CommandError(f"port: cannot listen on {spec.host}:{spec.port} ({error.strerror or error})") from None
        blocks = server.simulation.engines[0].config
        scenario = f" scenario={spec.scenario_id}" if spec.scenario_id else ""
        self.stdout.write(
            f"simulated vLLM listening on {server.url} model={server.options.model_name}{scenario} "
            f"engines={len(server.simulation.engines)} num_gpu_blocks={blocks.num_gpu_blocks} "
            f"block_size={blocks.block_size}"
        )
        self.stdout.flush()
        try:
            run_until_signalled(options["duration"])
        finally:
            server.stop()
            self.stdout.write("simulated vLLM stopped")

    def _spec(self, options: dict[str, Any]) -> ServerSpec:
        errors: dict[str, str] = {}
        scenario_id = options["scenario"]
        if scenario_id is not None and (options["model"] or options["gpu"]):
            errors["scenario"] = "give --scenario or --model/--gpu, not both."
        if bool(options["model"]) != bool(options["gpu"]):
            errors["model"] = "--model and --gpu go together."
        if scenario_id is None and not options["model"] and options["num_gpu_blocks"] is None:
            errors["scenario"] = "give --scenario ID, --model SLUG --gpu SLUG, or --num-gpu-blocks N."
        for name in ("port", "engines", "num_gpu_blocks", "block_size", "max_num_seqs", "max_model_len"):
            value = options[name]
            if value is not None and value < (0 if name == "port" else 1):
                errors[name] = "must be a positive number." if name != "port" else "must be 0-65535."
        if options["port"] > 65535:
            errors["port"] = "must be 0-65535."
        if not options["time_scale"] > 0:
            errors["time_scale"] = "must be > 0."
        if not options["max_steps_per_second"] > 0:
            errors["max_steps_per_second"] = "must be > 0."
        fault, fault_errors = parse_fault(options["fault"], options["fault_delay"], options["fault_duration"])
        errors.update({f"fault_{name}" if name != "mode" else "fault": msg for name, msg in fault_errors.items()})
        if errors:
            raise CommandError(_errors_text(errors))

        plan = None
        model_name = options["served_model_name"]
        scenario = None
        if scenario_id is not None:
            try:
                scenario, plan = scenario_simulation_plan(scenario_id=scenario_id)
            except Scenario.DoesNotExist:
                raise CommandError(f"scenario: no scenario with id {scenario_id}") from None
            except SizingInputError as error:
                raise CommandError(f"scenario {scenario_id} cannot be planned: {_errors_text(error.errors)}") from None
            model_name = model_name or scenario_served_model_name(scenario=scenario)
        elif options["model"]:
            inputs = {
                "tensor_parallel_size": options["tp"] or 1,
                "pipeline_parallel_size": options["pp"] or 1,
                "gpu_count": options["gpu_count"],
                "kv_cache_dtype": options["kv_cache_dtype"] or "auto",
                "gpu_memory_utilization": options["gpu_memory_utilization"],
                "kv_cache_memory_gib": options["kv_cache_memory_gib"],
                "max_model_len": options["max_model_len"],
                "max_num_batched_tokens": options["max_num_batched_tokens"],
                "block_size": options["block_size"],
            }
            try:
                plan, served = slug_simulation_plan(model_slug=options["model"], gpu_slug=options["gpu"], inputs=inputs)
            except LookupError as error:
                raise CommandError(str(error.args[0])) from None
            except SizingInputError as error:
                raise CommandError(_errors_text(error.errors)) from None
            model_name = model_name or served

        try:
            load = self._load(options, scenario)
            spec = ServerSpec(
                plan=plan,
                model_name=model_name,
                num_gpu_blocks=options["num_gpu_blocks"],
                block_size=options["block_size"],
                max_model_len=options["max_model_len"],
                max_num_seqs=options["max_num_seqs"],
                max_num_batched_tokens=options["max_num_batched_tokens"],
                engines=options["engines"],
                enable_prefix_caching=options["enable_prefix_caching"],
                load=load,
                legacy_metrics=options["legacy_metrics"],
                time_scale=options["time_scale"],
                max_steps_per_second=options["max_steps_per_second"],
                host=options["host"],
                port=options["port"],
                fault=fault,
                scenario_id=scenario_id,
            )
            spec.engine_config()  # fail here, with the field named, rather than in a thread
        except ValueError as error:
            raise CommandError(str(error)) from None
        return spec

    def _load(self, options: dict[str, Any], scenario: Scenario | None) -> LoadSpec:
        """The load asked for; with a scenario and no --rate/--concurrency, the scenario's own question: its
        concurrency kept in flight with its prompt and output lengths."""
        rate = options["rate"]
        concurrency = options["concurrency"]
        prompt_text = options["prompt_len"]
        output_text = options["output_len"]
        prefix_tokens = options["shared_prefix_tokens"] or 0
        fraction = options["shared_prefix_fraction"]
        if scenario is not None and rate is None and concurrency is None:
            concurrency = scenario.concurrency
            if prefix_tokens == 0 and scenario.shared_prefix_tokens:
                # Every request of the scenario's question starts with its shared prefix.
                prefix_tokens, fraction = scenario.shared_prefix_tokens, 1.0
            if not prompt_text and scenario.prompt_tokens:
                prompt_text = f"fixed:{max(1, scenario.prompt_tokens - prefix_tokens)}"
            if not output_text and scenario.output_tokens:
                output_text = f"fixed:{scenario.output_tokens}"
        if rate is None and concurrency is None:
            rate = 1.0
        errors: dict[str, str] = {}
        prompt = output = None
        try:
            prompt = LengthDistribution.parse(prompt_text or "lognormal:1024:0.8")
        except ValueError as error:
            errors["prompt_len"] = str(error)
        try:
            output = LengthDistribution.parse(output_text or "lognormal:256:0.8")
        except ValueError as error:
            errors["output_len"] = str(error)
        if errors:
            raise CommandError(_errors_text(errors))
        return LoadSpec(
            rate=rate or 0.0,
            concurrency=concurrency or 0,
            prompt=prompt,
            output=output,
            max_tokens=options["max_tokens"],
            shared_prefix_fraction=fraction,
            shared_prefix_tokens=prefix_tokens,
            seed=options["seed"],
        )
