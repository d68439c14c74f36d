"""One simulated vLLM engine: a block pool, a scheduler, a simulated clock and vLLM's statistics.

``Engine.step()`` runs one scheduler iteration and moves the simulated clock on by the step's estimated
duration; nothing here reads the wall clock (except ``created``, the start time Prometheus exports), so
tests step an engine deterministically. The server drives engines against real time in ``server.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from planner.sizing import Plan, step_time_seconds

from .block_pool import BlockPool
from .kv_layout import KvLayout
from .request import SimRequest
from .scheduler import Preemption, Scheduler, cdiv
from .stats import EngineStats

# (num_decode_seqs, context_tokens, prefill_tokens) -> seconds
StepTimeModel = Callable[[int, int, int], float]

# vLLM V1's defaults when a plan does not say.
DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
# A floor on a step's length: real engines never step faster (kernel launches, sampling, scheduling), and a
# zero-length step would let a simulated clock stand still.
MIN_STEP_SECONDS = 0.002


def fixed_step_time(seconds: float) -> StepTimeModel:
    """Every step takes ``seconds`` (tests, and servers sized by block count alone)."""

    def model(num_decode_seqs: int, context_tokens: int, prefill_tokens: int) -> float:
        return seconds

    return model


def linear_step_time(
    *, base_s: float = 0.008, per_context_token_s: float = 2e-8, per_prefill_token_s: float = 5e-5
) -> StepTimeModel:
    """A rough stand-in when there is no model to estimate from: a fixed overhead, KV reads that grow with
    the context and a prefill that grows with its tokens (the shape of the sizing engine's roofline)."""

    def model(num_decode_seqs: int, context_tokens: int, prefill_tokens: int) -> float:
        return base_s + per_context_token_s * context_tokens + per_prefill_token_s * prefill_tokens

    return model


def plan_step_time(plan: Plan) -> StepTimeModel:
    """The sizing engine's estimate for this plan (``planner.sizing.step_time_seconds``)."""

    def model(num_decode_seqs: int, context_tokens: int, prefill_tokens: int) -> float:
        return step_time_seconds(
            plan, num_decode_seqs=num_decode_seqs, context_tokens=context_tokens, prefill_tokens=prefill_tokens
        )

    return model


@dataclass(frozen=True)
class EngineConfig:
    """What shapes one engine. ``cache_info`` holds the extra ``vllm:cache_config_info`` labels."""

    num_gpu_blocks: int
    block_size: int = 16
    max_model_len: int = 8192
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    enable_prefix_caching: bool = False
    step_time: StepTimeModel = field(default=fixed_step_time(0.02), compare=False, repr=False)
    # Clients give up: a request still waiting this long after it arrived is aborted (keeps an overloaded
    # server's queue bounded). None waits forever.
    request_timeout_s: float | None = None
    cache_dtype: str = "auto"
    gpu_memory_utilization: float = 0.9
    # Several KV cache groups (hybrid state, sliding windows, DeepSeek-V4): blocks per request by group
    # (kv_layout.py); None for one full-attention group, the plain cdiv(tokens, block_size).
    kv_layout: KvLayout | None = None

    def __post_init__(self) -> None:
        errors = self.validation_errors()
        if errors:
            raise ValueError("; ".join(f"{name}: {message}" for name, message in errors.items()))

    def validation_errors(self) -> dict[str, str]:
        errors: dict[str, str] = {}
        if self.num_gpu_blocks < 2:
            errors["num_gpu_blocks"] = "must be at least 2 (block 0 is reserved)."
        if self.block_size < 1:
            errors["block_size"] = "must be at least 1."
        if self.max_model_len < 2:
            errors["max_model_len"] = "must be at least 2."
        if self.max_num_seqs < 1:
            errors["max_num_seqs"] = "must be at least 1."
        if self.max_num_batched_tokens < 1:
            errors["max_num_batched_tokens"] = "must be at least 1."
        if errors:
            return errors
        # vLLM refuses to start when one max_model_len request cannot fit; so does the simulator, or a lone
        # long request could preempt itself forever.
        if self.kv_layout is not None:
            needed = self.kv_layout.worst(self.max_model_len, self.max_num_batched_tokens)
            if needed > self.num_gpu_blocks - 1:
                errors["max_model_len"] = (
                    f"{self.max_model_len} tokens need {needed} blocks over the KV cache groups but only "
                    f"{self.num_gpu_blocks - 1} are usable."
                )
        elif cdiv(self.max_model_len, self.block_size) > self.num_gpu_blocks - 1:
            longest = (self.num_gpu_blocks - 1) * self.block_size
            errors["max_model_len"] = (
                f"{self.max_model_len} tokens need {cdiv(self.max_model_len, self.block_size)} blocks but only "
                f"{self.num_gpu_blocks - 1} are usable; the longest request that fits is {longest} tokens."
            )
        return errors


@dataclass(frozen=True)
class StepResult:
    duration: float
    num_scheduled: int
    num_decode_seqs: int
    prefill_tokens: int
    preemptions: tuple[Preemption, ...]
    finished: tuple[SimRequest, ...]


class Engine:
    """A vLLM engine core in simulation. Not thread-safe: the caller serialises access."""

    def __init__(self, config: EngineConfig, *, clock: float = 0.0) -> None:
        self.config = config
        self.clock = clock
        self.num_steps = 0
        self.reset()

    def reset(self) -> None:
        """A restarted process: empty pool, no requests, counters at zero and a new ``created`` time."""
        config = self.config
        # Prefix-cache hits are simulated for one full-attention group only: with several groups vLLM needs a hit
        # in every group (and a state checkpoint at the block), which the simulator does not model.
        caching = config.enable_prefix_caching and config.kv_layout is None
        self.pool = BlockPool(config.num_gpu_blocks, enable_caching=caching)
        self.scheduler = Scheduler(
            self.pool,
            block_size=config.block_size,
            max_num_seqs=config.max_num_seqs,
            max_num_batched_tokens=config.max_num_batched_tokens,
            kv_layout=config.kv_layout,
        )
        self.stats = EngineStats(max_model_len=config.max_model_len, created=time.time())

    @property
    def num_running(self) -> int:
        return len(self.scheduler.running)

    @property
    def num_waiting(self) -> int:
        return len(self.scheduler.waiting)

    @property
    def has_work(self) -> bool:
        return bool(self.scheduler.running or self.scheduler.waiting)

    def add_request(self, request: SimRequest) -> None:
        """Queue a request; lengths beyond ``max_model_len`` are cut to it (vLLM would reject or stop them)."""
        max_len = self.config.max_model_len
        if request.prompt_tokens >= max_len:
            request.prompt_tokens = max_len - 1
            request.prefix_tokens = min(request.prefix_tokens, request.prompt_tokens)
        if request.prompt_tokens + request.output_tokens > max_len:
            request.output_tokens = max_len - request.prompt_tokens
            request.finish_reason = "length"
        self.scheduler.add(request)

    def idle_until(self, when: float) -> None:
        """Nothing to do: the clock jumps (an idle engine does not step)."""
        self.clock = max(self.clock, when)

    def step(self) -> StepResult:
        config = self.config
        stats = self.stats
        now = self.clock
        aborted = self._abort_expired(now)
        output = self.scheduler.schedule()
        stats.preemptions += len(output.preemptions)

        num_decode = 0
        context_tokens = 0
        prefill_tokens = 0
        for request, num_new in output.scheduled:
            if request.first_scheduled_time is None:
                request.first_scheduled_time = now
                stats.request_queue_time.observe(now - request.arrival_time)
            computed = request.num_computed_tokens
            # Inline SimRequest.is_prefilling: this loop runs once per request per step.
            if computed < request.prompt_tokens or request.prompt_tokens + request.num_output_tokens - computed > 1:
                prefill_tokens += num_new
            else:
                num_decode += 1
                context_tokens += computed + 1
        for request in output.newly_admitted:
            if self.pool.enable_caching:
                stats.prefix_cache_queries += request.num_tokens
                stats.prefix_cache_hits += request.num_cached_tokens

        duration = max(MIN_STEP_SECONDS, config.step_time(num_decode, context_tokens, prefill_tokens))
        end = now + duration
        self.clock = end
        self.num_steps += 1

        finished: list[SimRequest] = list(aborted)
        block_size = config.block_size
        pool = self.pool
        caching = pool.enable_caching
        # Most decoding requests got their last token at the previous step's end: observe each distinct
        # inter-token gap once with its count instead of once per request.
        gaps: dict[float, int] = {}
        generated = 0
        for request, num_new in output.scheduled:
            before = request.num_computed_tokens
            after = before + num_new
            request.num_computed_tokens = after
            if caching:
                # Prompt blocks that became full in this step can now be shared.
                last_full = min(after, request.prompt_tokens) // block_size
                for index in range(before // block_size, last_full):
                    pool.cache(request.blocks[index], request.block_hash(index, block_size))
            if after < request.prompt_tokens + request.num_output_tokens:
                continue  # prefill chunk: no token sampled yet
            request.num_output_tokens += 1
            generated += 1
            if request.first_token_time is None:
                request.first_token_time = end
                stats.prompt_tokens += request.prompt_tokens
                stats.time_to_first_token.observe(end - request.arrival_time)
            else:
                gap = end - request.last_token_time
                gaps[gap] = gaps.get(gap, 0) + 1
            request.last_token_time = end
            if request.num_output_tokens >= request.output_tokens:
                self._finish(request, request.finish_reason, end)
                finished.append(request)
        stats.generation_tokens += generated
        for gap, count in gaps.items():
            stats.inter_token_latency.observe(gap, count)
        if len(finished) > len(aborted):
            self.scheduler.running = [r for r in self.scheduler.running if r.finished_time is None]

        return StepResult(
            duration=duration,
            num_scheduled=len(output.scheduled),
            num_decode_seqs=num_decode,
            prefill_tokens=prefill_tokens,
            preemptions=output.preemptions,
            finished=tuple(finished),
        )

    def _finish(self, request: SimRequest, reason: str, when: float) -> None:
        self.scheduler.finish(request)
        request.finished_time = when
        stats = self.stats
        stats.request_success[reason] = stats.request_success.get(reason, 0) + 1
        stats.e2e_request_latency.observe(when - request.arrival_time)
        stats.request_prompt_tokens.observe(request.prompt_tokens)
        stats.request_generation_tokens.observe(request.num_output_tokens)

    def _abort_expired(self, now: float) -> list[SimRequest]:
        timeout = self.config.request_timeout_s
        if timeout is None:
            return []
        waiting = self.scheduler.waiting
        aborted = []
        # The queue is in arrival order except for preempted requests at its front, so checking from the
        # front until one is still in time is enough and costs nothing in a healthy engine.
        while waiting and now - waiting[0].arrival_time > timeout:
            request = waiting.popleft()
            self._finish(request, "abort", now)
            aborted.append(request)
        return aborted

    def check(self) -> None:
        """Full invariant scan (tests only)."""
        self.pool.check()
        block_size = self.config.block_size
        layout = self.config.kv_layout
        for request in self.scheduler.running:
            if layout is not None:
                assert len(request.blocks) <= layout.held(request.num_tokens, 0), request
                assert len(request.blocks) >= layout.held(request.num_computed_tokens, request.num_computed_tokens)
                continue
            assert len(request.blocks) <= cdiv(request.num_tokens, block_size), request
            assert len(request.blocks) >= cdiv(request.num_computed_tokens, block_size), request
        for request in self.scheduler.waiting:
            assert not request.blocks, request
        assert len(self.scheduler.running) <= self.config.max_num_seqs
