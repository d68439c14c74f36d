"""The demo fleet ``make run`` shows: four simulated vLLM servers with different models, hardware and
loads, each tied to a saved planner scenario.

- a healthy Llama 3.1 8B on one H100 with shared system prompts (prefix caching on);
- an overloaded Qwen3 8B on one L4: the queue builds and preemptions climb;
- Llama 3.1 70B at tp 4 on eight H100s: two data-parallel engines behind one server;
- an old-style Mistral 7B on an A100 that speaks the legacy (V0) metric names;
- a Qwen2.5 7B on an L40S started with ``--gpu-memory-utilization 0.80`` where its scenario planned vLLM's
  default: the planned-vs-actual report shows the deviation and names the cause.

Loads were chosen by running them (see docs/benchmarks.md): the whole fleet costs a few percent of one
core, because the web server and the worker share two cores in ``make run``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from .load import LengthDistribution, LoadSpec
from .server import SimulatorServer
from .spec import ServerSpec, build_server

DEFAULT_BASE_PORT = 8100  # clear of runserver's 8000 and vLLM's own 8000
# Plenty for the demo loads' real step rates (at most ~150 steps/s) while bounding a runaway.
FLEET_MAX_STEPS_PER_SECOND = 200.0


@dataclass(frozen=True)
class FleetMember:
    """One demo server: the scenario it is tied to (by name, created if missing) and how it is loaded."""

    key: str
    scenario_name: str
    model_slug: str
    gpu_slug: str
    scenario_inputs: dict[str, Any]
    load: LoadSpec
    notes: str
    max_num_seqs: int | None = None
    enable_prefix_caching: bool = False
    legacy_metrics: bool = False
    # Engine settings the server was started with that differ from its scenario (a misconfigured deployment).
    server_overrides: tuple[tuple[str, Any], ...] = ()


def _lengths(median: float, sigma: float) -> LengthDistribution:
    return LengthDistribution("lognormal", median, sigma)


DEMO_FLEET: tuple[FleetMember, ...] = (
    FleetMember(
        key="steady",
        scenario_name="Demo: Llama 3.1 8B on H100 (steady, shared prompts)",
        model_slug="llama-3.1-8b",
        gpu_slug="h100-sxm",
        scenario_inputs={
            "max_model_len": 32768,
            # The plan holds ~13.9 worst-case 32K requests; the steady load keeps well under it.
            "concurrency": 12,
            "prompt_tokens": 3000,
            "output_tokens": 1300,
            "shared_prefix_tokens": 1024,
        },
        load=LoadSpec(
            rate=2.0,
            prompt=_lengths(2000, 0.8),
            output=_lengths(1200, 0.5),
            shared_prefix_fraction=0.5,
            shared_prefix_tokens=1024,
            seed=1,
        ),
        enable_prefix_caching=True,
        notes="Simulated by simulate_fleet: 2 req/s, half of them behind one of four 1K-token system prompts.",
    ),
    FleetMember(
        key="overloaded",
        scenario_name="Demo: Qwen3 8B on L4 (overloaded)",
        model_slug="qwen3-8b",
        gpu_slug="l4",
        scenario_inputs={"max_model_len": 16384, "concurrency": 4, "prompt_tokens": 2000, "output_tokens": 600},
        load=LoadSpec(rate=0.8, prompt=_lengths(2000, 0.8), output=_lengths(600, 0.6), seed=2),
        max_num_seqs=64,
        notes="Simulated by simulate_fleet: 0.8 req/s is more than one L4 holds; requests queue and get preempted.",
    ),
    FleetMember(
        key="data-parallel",
        scenario_name="Demo: Llama 3.1 70B TP4 x2 on H100",
        model_slug="llama-3.1-70b",
        gpu_slug="h100-sxm",
        scenario_inputs={
            "gpu_count": 8,
            "tensor_parallel_size": 4,
            "max_model_len": 32768,
            "concurrency": 16,
            "prompt_tokens": 3000,
            "output_tokens": 500,
        },
        load=LoadSpec(rate=1.5, prompt=_lengths(3000, 1.0), output=_lengths(500, 0.7), seed=3),
        max_num_seqs=128,
        notes="Simulated by simulate_fleet: two data-parallel engines (engine label 0 and 1) behind one server.",
    ),
    FleetMember(
        key="legacy",
        scenario_name="Demo: Mistral 7B on A100 (legacy V0 metrics)",
        model_slug="mistral-7b",
        gpu_slug="a100-80gb",
        scenario_inputs={"max_model_len": 8192, "concurrency": 8, "prompt_tokens": 1000, "output_tokens": 500},
        load=LoadSpec(rate=1.0, prompt=_lengths(800, 0.8), output=_lengths(500, 0.6), seed=4),
        max_num_seqs=64,
        legacy_metrics=True,
        notes="Simulated by simulate_fleet: an old vLLM that exports V0 names (gpu_cache_usage_perc, no engine label).",
    ),
    FleetMember(
        key="misconfigured",
        scenario_name="Demo: Qwen2.5 7B on L40S (server started with lower memory utilization)",
        model_slug="qwen2.5-7b",
        gpu_slug="l40s",
        scenario_inputs={"max_model_len": 16384, "concurrency": 8, "prompt_tokens": 1500, "output_tokens": 400},
        load=LoadSpec(rate=0.8, prompt=_lengths(1200, 0.8), output=_lengths(400, 0.6), seed=5),
        max_num_seqs=64,
        server_overrides=(("gpu_memory_utilization", 0.8),),
        notes="Simulated by simulate_fleet: started with --gpu-memory-utilization 0.80 while the plan assumes the "
        "default, so it holds fewer KV blocks than planned.",
    ),
)


def fleet_member(key: str) -> FleetMember:
    for member in DEMO_FLEET:
        if member.key == key:
            return member
    raise LookupError(f"no demo fleet member {key!r}; choose from {', '.join(m.key for m in DEMO_FLEET)}")


def servers_start(specs: list[ServerSpec]) -> list[SimulatorServer]:
    """Start every server, or none: if one cannot start (port taken), the ones started are stopped."""
    started: list[SimulatorServer] = []
    try:
        for spec in specs:
            started.append(build_server(spec).start())
    except BaseException:
        servers_stop(started)
        raise
    return started


def servers_stop(servers: list[SimulatorServer]) -> None:
    """Stop them all at once: each stop waits for its listener's poll loop, so one after the other adds up."""
    stoppers = [threading.Thread(target=server.stop, daemon=True) for server in servers]
    for stopper in stoppers:
        stopper.start()
    for stopper in stoppers:
        stopper.join(timeout=10)
