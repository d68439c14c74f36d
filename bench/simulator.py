"""How fast the vLLM simulator steps, and what the demo fleet costs.

Run: .venv/bin/python bench/simulator.py [--steps N] [--fleet-seconds S]

Figures (one process, one core):
1. engine steps per second for one server at a realistic batch (Llama 3.1 8B on an H100, 64 and 256
   requests kept in flight), against two baselines measured in the same run: an empty loop of the same
   step count, and the block pool alone doing one allocate and one free per running request per step;
2. how many such servers one core can simulate in real time at 10 steps/s;
3. the block pool's cost per operation at 1K and 1M blocks (O(1): the ratio should stay near 1);
4. the demo fleet served for real (HTTP servers and driver threads, wall clock) and scraped every 5 s:
   CPU seconds used per wall-clock second.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvdash.settings")

from monitor.simulator.block_pool import BlockPool
from monitor.simulator.fleet import DEMO_FLEET, FLEET_MAX_STEPS_PER_SECOND
from monitor.simulator.load import LengthDistribution, LoadSpec
from monitor.simulator.simulation import Simulation
from monitor.simulator.spec import ServerSpec, build_server, build_simulation
from planner.sizing import PlanInputs, catalog_gpus, catalog_models, compute_plan


def plan_8b_h100():
    return compute_plan(
        PlanInputs(model=catalog_models()["llama-3.1-8b"], gpu=catalog_gpus()["h100-sxm"], max_model_len=32768)
    )


def engine_steps_per_second(concurrency: int, steps: int) -> tuple[float, float]:
    """(steps/s, mean running batch) for a closed loop of ``concurrency`` requests, measured after warm-up."""
    load = LoadSpec(
        concurrency=concurrency,
        prompt=LengthDistribution("lognormal", 1000, 0.6),
        output=LengthDistribution("lognormal", 300, 0.6),
        seed=1,
    )
    spec = ServerSpec(plan=plan_8b_h100(), load=load, max_num_seqs=max(256, concurrency))
    simulation: Simulation = build_simulation(spec)
    simulation.run_steps(2000)  # warm up to a steady batch
    engine = simulation.engines[0]
    batch = 0
    started = time.perf_counter()
    for _ in range(steps // 100):
        simulation.run_steps(100)
        batch += engine.num_running
    elapsed = time.perf_counter() - started
    return steps / elapsed, batch / (steps // 100)


def empty_loop_per_second(steps: int) -> float:
    started = time.perf_counter()
    for _ in range(steps):
        pass
    return steps / (time.perf_counter() - started)


def pool_alone_per_second(batch: int, steps: int) -> float:
    """Steps/s of the block pool alone: ``batch`` blocks allocated and ``batch`` freed per step."""
    pool = BlockPool(30_000)
    held = [pool.allocate(1) for _ in range(batch)]
    started = time.perf_counter()
    for _ in range(steps):
        for index in range(batch):
            pool.free(held[index])
            held[index] = pool.allocate(1)
    return steps / (time.perf_counter() - started)


def pool_op_seconds(num_blocks: int, ops: int = 200_000) -> float:
    pool = BlockPool(num_blocks, enable_caching=True)
    ring = [pool.allocate(1) for _ in range(min(1000, num_blocks // 2))]
    for index, blocks in enumerate(ring):
        pool.cache(blocks[0], ("warm", index))
    started = time.perf_counter()
    for index in range(ops):
        slot = index % len(ring)
        pool.free(ring[slot])
        ring[slot] = pool.allocate(1)
    return (time.perf_counter() - started) / (2 * ops)


def fleet_cpu(seconds: float) -> tuple[float, int, list[str]]:
    """CPU seconds per wall second of the demo fleet, served for real and scraped every 5 s."""
    import requests

    specs = []
    for member in DEMO_FLEET:
        inputs = PlanInputs(
            model=catalog_models()[member.model_slug], gpu=catalog_gpus()[member.gpu_slug], **member.scenario_inputs
        )
        specs.append(
            ServerSpec(
                plan=compute_plan(inputs),
                load=member.load,
                max_num_seqs=member.max_num_seqs,
                enable_prefix_caching=member.enable_prefix_caching,
                legacy_metrics=member.legacy_metrics,
                max_steps_per_second=FLEET_MAX_STEPS_PER_SECOND,
                port=0,
            )
        )
    servers = [build_server(spec).start() for spec in specs]
    try:
        cpu_start, wall_start = time.process_time(), time.monotonic()
        scrapes = 0
        while time.monotonic() - wall_start < seconds:
            for server in servers:
                requests.get(f"{server.url}/metrics", timeout=5).raise_for_status()
                scrapes += 1
            time.sleep(5)
        cpu = time.process_time() - cpu_start
        wall = time.monotonic() - wall_start
        lagging = [member.key for member, server in zip(DEMO_FLEET, servers, strict=True) if server.lagging]
    finally:
        for server in servers:
            server.stop()
    return cpu / wall, scrapes, lagging


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--fleet-seconds", type=float, default=30.0)
    args = parser.parse_args()
    steps = args.steps

    print(f"simulator bench: {steps} steps per figure, python {sys.version.split()[0]}")
    empty = empty_loop_per_second(steps)
    for concurrency in (64, 256):
        rate, batch = engine_steps_per_second(concurrency, steps)
        pool_only = pool_alone_per_second(round(batch), steps)
        print(
            f"engine, 8B on H100, {concurrency} in flight (mean running batch {batch:.0f}): "
            f"{rate:,.0f} steps/s = {1e6 / rate:.0f} us/step"
        )
        print(f"  baseline empty loop: {empty:,.0f} iterations/s (engine step = {empty / rate:,.0f} x an iteration)")
        print(
            f"  baseline block pool alone ({round(batch)} allocate+free per step): {pool_only:,.0f} steps/s "
            f"(engine step = {pool_only / rate:.1f} x the pool's block ops)"
        )
        print(f"  servers one core simulates in real time at 10 steps/s: {rate / 10:,.0f}")

    small, large = pool_op_seconds(1_000), pool_op_seconds(1_000_000)
    print(
        f"block pool op: {small * 1e9:.0f} ns at 1K blocks, {large * 1e9:.0f} ns at 1M blocks "
        f"(ratio {large / small:.2f}; O(1) keeps it near 1)"
    )

    if args.fleet_seconds > 0:
        share, scrapes, lagging = fleet_cpu(args.fleet_seconds)
        print(
            f"demo fleet ({len(DEMO_FLEET)} servers, real time, {scrapes} scrapes): {share * 100:.1f}% of one core"
            f"{'; lagging: ' + ', '.join(lagging) if lagging else ''}"
        )


if __name__ == "__main__":
    main()
