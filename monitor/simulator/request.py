"""One simulated request and its lifecycle timestamps (simulated seconds, not wall clock)."""

from __future__ import annotations

import enum
from collections.abc import Hashable
from dataclasses import dataclass, field


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"


@dataclass(eq=False)
class SimRequest:
    """A request that will generate exactly ``output_tokens`` tokens, then finish with ``finish_reason``.

    ``num_tokens`` counts the prompt plus the tokens generated so far. Each step computes the tokens from
    ``num_computed_tokens`` up to ``num_tokens`` (the whole prompt in one or several chunks, then one
    token per decode step); when the computed count catches up, the engine samples the next token. After a
    preemption ``num_computed_tokens`` restarts at 0 and the prompt plus the generated tokens are
    recomputed, as vLLM V1 does."""

    request_id: int
    arrival_time: float
    prompt_tokens: int
    output_tokens: int
    finish_reason: str = "stop"  # "stop" or "length"
    prefix_key: Hashable | None = None
    prefix_tokens: int = 0

    status: RequestStatus = RequestStatus.WAITING
    num_computed_tokens: int = 0
    num_output_tokens: int = 0
    blocks: list[int] = field(default_factory=list)
    num_preemptions: int = 0
    num_cached_tokens: int = 0
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    finished_time: float | None = None

    def __post_init__(self) -> None:
        if self.prompt_tokens < 1:
            raise ValueError("prompt_tokens must be at least 1")
        if self.output_tokens < 1:
            raise ValueError("output_tokens must be at least 1")
        if not 0 <= self.prefix_tokens <= self.prompt_tokens:
            raise ValueError("prefix_tokens must be between 0 and prompt_tokens")

    @property
    def num_tokens(self) -> int:
        return self.prompt_tokens + self.num_output_tokens

    @property
    def is_prefilling(self) -> bool:
        """Still computing tokens it already has (its prompt, or everything again after a preemption)."""
        return self.num_tokens - self.num_computed_tokens > 1 or self.num_computed_tokens < self.prompt_tokens

    def block_hash(self, index: int, block_size: int) -> Hashable:
        """Content key of the request's ``index``-th full block: blocks wholly inside the shared system
        prompt are keyed by the prompt (shared between requests), the others by the request itself (they
        can still be hit by this request's own recompute after a preemption, as in vLLM)."""
        if self.prefix_key is not None and (index + 1) * block_size <= self.prefix_tokens:
            return ("prefix", self.prefix_key, index)
        return ("request", self.request_id, index)
