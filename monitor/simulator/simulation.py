"""Engines behind one server (data parallel when more than one) fed by one load generator, on a shared
simulated time line. ``run_until(t)`` advances every engine to ``t``; nothing here sleeps."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .engine import Engine, StepResult
from .load import LoadGenerator
from .request import SimRequest


class Simulation:
    def __init__(self, engines: Sequence[Engine], load: LoadGenerator | None = None) -> None:
        if not engines:
            raise ValueError("a simulation needs at least one engine")
        self.engines = list(engines)
        self.load = load
        self.num_steps = 0
        self.num_preemptions = 0
        self.finished_requests = 0

    @property
    def clock(self) -> float:
        return min(engine.clock for engine in self.engines)

    @property
    def in_flight(self) -> int:
        return sum(engine.num_running + engine.num_waiting for engine in self.engines)

    def submit(self, request: SimRequest) -> Engine:
        """Send a request to the least loaded engine, scored as vLLM's data-parallel load balancer does
        (``waiting * 4 + running``); ties go to the lowest index."""
        engine = min(self.engines, key=lambda e: e.num_waiting * 4 + e.num_running)
        engine.add_request(request)
        return engine

    def _feed(self, now: float) -> None:
        load = self.load
        if load is None:
            return
        if load.spec.is_closed_loop:
            for _ in range(load.spec.concurrency - self.in_flight):
                self.submit(load.make_request(now))
        else:
            for request in load.pop_due(now):
                self.submit(request)

    def run_until(self, until: float, *, max_steps: int | None = None) -> int:
        """Step the engine furthest behind until every engine reaches ``until`` or ``max_steps`` steps ran.
        Arrivals go out once the slowest engine has reached their time, so they land in time order."""
        steps = 0
        engines = self.engines
        while max_steps is None or steps < max_steps:
            # Furthest behind first; on a tie a busy engine goes before an idle one, which may only catch up.
            engine = engines[0] if len(engines) == 1 else min(engines, key=lambda e: (e.clock, not e.has_work))
            now = engine.clock
            if now >= until:
                break
            self._feed(now)
            if engine.has_work:
                self._record(engine.step())
                steps += 1
                if self.load is not None and self.load.spec.is_closed_loop:
                    # A closed-loop client sends its next request as soon as one finishes. (At the slowest
                    # engine's time, so that no engine ever sees a request from its future.)
                    self._feed(self.clock)
            else:
                engine.idle_until(self._idle_target(until))
        return steps

    def _idle_target(self, until: float) -> float:
        """How far an idle engine may jump: to the next arrival, or, in a closed loop (new requests come when
        others finish), to the busy engines' clock, so that a request sent to it is not served late."""
        if self.load is not None and not self.load.spec.is_closed_loop:
            return min(self.load.next_arrival_time, until)
        return min([until, *(e.clock for e in self.engines if e.has_work)])

    def run_steps(self, count: int) -> int:
        """Exactly ``count`` steps (or fewer if there is nothing left to do): for tests and benchmarks."""
        return self.run_until(math.inf, max_steps=count) if self._has_future_work() else 0

    def _has_future_work(self) -> bool:
        return any(engine.has_work for engine in self.engines) or self.load is not None

    def run_to_completion(self, *, max_steps: int = 10_000_000) -> int:
        """Until every submitted request finished (no load generator allowed: it never ends)."""
        if self.load is not None:
            raise ValueError("run_to_completion needs a simulation without a load generator")
        steps = 0
        while steps < max_steps and any(engine.has_work for engine in self.engines):
            engine = min((e for e in self.engines if e.has_work), key=lambda e: e.clock)
            self._record(engine.step())
            steps += 1
        return steps

    def _record(self, result: StepResult) -> None:
        self.num_steps += 1
        self.num_preemptions += len(result.preemptions)
        self.finished_requests += len(result.finished)

    def reset(self) -> None:
        """Every engine restarts (requests in flight are lost, counters start again); the clock runs on."""
        for engine in self.engines:
            engine.reset()
