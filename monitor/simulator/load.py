"""Synthetic load: Poisson arrivals (or a fixed number of requests always in flight), prompt and output
lengths from a distribution, and a fraction of requests that start with one of a few shared system
prompts. Everything comes from one ``random.Random(seed)``, so a seed replays the same load."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from .request import SimRequest

DISTRIBUTION_KINDS = ("fixed", "uniform", "lognormal")


@dataclass(frozen=True)
class LengthDistribution:
    """Token counts: ``fixed:N``, ``uniform:LOW:HIGH`` or ``lognormal:MEDIAN:SIGMA`` (clamped to 1..``cap``)."""

    kind: str
    a: float
    b: float = 0.0
    cap: int = 1_000_000

    def __post_init__(self) -> None:
        if self.kind not in DISTRIBUTION_KINDS:
            raise ValueError(f"unknown distribution {self.kind!r}; use one of {', '.join(DISTRIBUTION_KINDS)}")
        if not (math.isfinite(self.a) and math.isfinite(self.b)):
            raise ValueError("distribution parameters must be finite numbers")
        if self.a < 1:
            raise ValueError("the length (or lower bound, or median) must be at least 1")
        if self.kind == "uniform" and self.b < self.a:
            raise ValueError("uniform needs LOW <= HIGH")
        if self.kind == "lognormal" and not 0 <= self.b <= 5:
            raise ValueError("lognormal sigma must be between 0 and 5")

    @classmethod
    def parse(cls, text: str, *, cap: int = 1_000_000) -> LengthDistribution:
        """``"512"`` or ``"fixed:512"``, ``"uniform:128:2048"``, ``"lognormal:1024:0.8"``; raises ValueError."""
        parts = [part.strip() for part in text.strip().split(":")]
        if len(parts) == 1:
            parts = ["fixed", *parts]
        kind, *numbers = parts
        expected = {"fixed": 1, "uniform": 2, "lognormal": 2}.get(kind)
        if expected is None:
            raise ValueError(f"unknown distribution {kind!r}; use one of {', '.join(DISTRIBUTION_KINDS)}")
        if len(numbers) != expected:
            raise ValueError(f"{kind} takes {expected} number(s), e.g. {_EXAMPLES[kind]}")
        try:
            values = [float(number) for number in numbers]
        except ValueError:
            raise ValueError(f"not a number in {text!r}, e.g. {_EXAMPLES[kind]}") from None
        return cls(kind, values[0], values[1] if len(values) > 1 else 0.0, cap=cap)

    def sample(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            value = self.a
        elif self.kind == "uniform":
            value = rng.uniform(self.a, self.b)
        else:
            value = rng.lognormvariate(math.log(self.a), self.b)
        return max(1, min(self.cap, round(value)))

    def mean(self) -> float:
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        return self.a * math.exp(self.b**2 / 2)


_EXAMPLES = {"fixed": "fixed:512", "uniform": "uniform:128:2048", "lognormal": "lognormal:1024:0.8"}


@dataclass(frozen=True)
class LoadSpec:
    """``rate`` requests per simulated second (Poisson), or ``concurrency`` requests kept in flight (a
    closed loop, like a benchmark client); one of the two. ``max_tokens`` caps outputs: a request that
    reaches it finishes with reason ``length``, the others with ``stop``."""

    rate: float = 0.0
    concurrency: int = 0
    prompt: LengthDistribution = LengthDistribution("lognormal", 1024, 0.8)
    output: LengthDistribution = LengthDistribution("lognormal", 256, 0.8)
    max_tokens: int | None = None
    shared_prefix_fraction: float = 0.0
    shared_prefix_tokens: int = 0
    num_prefixes: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        errors = self.validation_errors()
        if errors:
            raise ValueError("; ".join(f"{name}: {message}" for name, message in errors.items()))

    def validation_errors(self) -> dict[str, str]:
        errors: dict[str, str] = {}
        if not (math.isfinite(self.rate) and self.rate >= 0):
            errors["rate"] = "must be a number >= 0."
        if self.concurrency < 0:
            errors["concurrency"] = "must be >= 0."
        if self.rate > 0 and self.concurrency > 0:
            errors["concurrency"] = "give a rate or a concurrency, not both."
        if not 0 <= self.shared_prefix_fraction <= 1:
            errors["shared_prefix_fraction"] = "must be between 0 and 1."
        if self.shared_prefix_tokens < 0:
            errors["shared_prefix_tokens"] = "must be >= 0."
        if self.num_prefixes < 1:
            errors["num_prefixes"] = "must be at least 1."
        if self.max_tokens is not None and self.max_tokens < 1:
            errors["max_tokens"] = "must be at least 1."
        return errors

    @property
    def is_closed_loop(self) -> bool:
        return self.concurrency > 0


class LoadGenerator:
    """Requests in arrival order. ``next_arrival_time`` peeks, ``pop_due(now)`` takes what has arrived."""

    def __init__(self, spec: LoadSpec, *, start: float = 0.0) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self._next_id = 0
        self._next_time = start + self._gap() if spec.rate > 0 else math.inf

    def _gap(self) -> float:
        return self.rng.expovariate(self.spec.rate)

    @property
    def next_arrival_time(self) -> float:
        return self._next_time

    def pop_due(self, now: float) -> list[SimRequest]:
        due = []
        while self._next_time <= now:
            due.append(self.make_request(self._next_time))
            self._next_time += self._gap()
        return due

    def make_request(self, arrival_time: float) -> SimRequest:
        spec = self.spec
        rng = self.rng
        prefix_key = None
        prefix_tokens = 0
        if spec.shared_prefix_tokens and spec.shared_prefix_fraction and rng.random() < spec.shared_prefix_fraction:
            prefix_key = rng.randrange(spec.num_prefixes)
            prefix_tokens = spec.shared_prefix_tokens
        prompt = prefix_tokens + spec.prompt.sample(rng)
        output = spec.output.sample(rng)
        reason = "stop"
        if spec.max_tokens is not None and output >= spec.max_tokens:
            output = spec.max_tokens
            reason = "length"
        self._next_id += 1
        return SimRequest(
            request_id=self._next_id,
            arrival_time=arrival_time,
            prompt_tokens=prompt,
            output_tokens=output,
            finish_reason=reason,
            prefix_key=prefix_key,
            prefix_tokens=prefix_tokens,
        )
