"""Continuous batching over a block pool, following vLLM V1's scheduler (``vllm/v1/core/sched/scheduler.py``)
where it matters for capacity.

Each step has a token budget (``max_num_batched_tokens``) and a cap on running requests (``max_num_seqs``):
1. Running requests first, oldest first: a decoding request needs one token, a request still prefilling
   takes as much of the budget as it can (chunked prefill). When a request needs a new block and none is
   free, the newest running request is preempted (its blocks freed, its progress thrown away, put back at
   the front of the waiting queue) until the block is found or the request preempted itself.
2. Then, only if nothing was preempted, waiting requests in order: a request is admitted when the blocks
   for all its tokens can be allocated (prefix-cache hits shared, not allocated), otherwise admission stops
   (first come, first served, no overtaking).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .block_pool import BlockPool
from .kv_layout import KvLayout
from .request import RequestStatus, SimRequest


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Preemption:
    """Why a request lost its blocks: ``needed_blocks`` were wanted while only ``free_blocks`` were free."""

    request_id: int
    free_blocks: int
    needed_blocks: int


@dataclass(frozen=True)
class ScheduleOutput:
    scheduled: tuple[tuple[SimRequest, int], ...]  # (request, tokens computed this step)
    preemptions: tuple[Preemption, ...]
    newly_admitted: tuple[SimRequest, ...]


class Scheduler:
    def __init__(
        self,
        pool: BlockPool,
        *,
        block_size: int,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        kv_layout: KvLayout | None = None,
    ) -> None:
        self.pool = pool
        self.kv_layout = kv_layout
        self.block_size = block_size
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []

    def add(self, request: SimRequest) -> None:
        request.status = RequestStatus.WAITING
        self.waiting.append(request)

    def schedule(self) -> ScheduleOutput:
        budget = self.max_num_batched_tokens
        scheduled: list[tuple[SimRequest, int]] = []
        preemptions: list[Preemption] = []
        admitted: list[SimRequest] = []
        pool = self.pool
        block_size = self.block_size
        layout = self.kv_layout
        running = self.running

        index = 0
        while index < len(running) and budget > 0:
            request = running[index]
            # The hot loop of the whole simulator: plain arithmetic, no property calls.
            computed = request.num_computed_tokens
            remaining = request.prompt_tokens + request.num_output_tokens - computed
            num_new = remaining if remaining < budget else budget
            held = len(request.blocks)
            target = computed + num_new
            if layout is None:
                needed = 0 if target <= held * block_size else -(-target // block_size) - held
            else:
                needed = layout.held(target, computed) - held
                if needed < 0:
                    # Blocks that slid out of a window go back to the pool (remove_skipped_blocks).
                    pool.free(reversed(request.blocks[needed:]))
                    del request.blocks[needed:]
                    needed = 0
            self_preempted = False
            while needed and needed > pool.num_free_blocks:
                victim = running.pop()
                preemptions.append(Preemption(victim.request_id, pool.num_free_blocks, needed))
                self._preempt(victim)
                if victim is request:
                    self_preempted = True
                    break
            if self_preempted:
                break
            if needed > 0:
                request.blocks.extend(pool.allocate(needed) or ())
            scheduled.append((request, num_new))
            budget -= num_new
            index += 1

        # vLLM admits nobody in a step that had to preempt: the pool is already short.
        while not preemptions and self.waiting and budget > 0 and len(running) < self.max_num_seqs:
            request = self.waiting[0]
            hits = self._prefix_hits(request) if pool.enable_caching and request.num_computed_tokens == 0 else []
            if layout is None:
                total_blocks = cdiv(request.num_tokens, block_size)
            else:
                # Per group, what this step's tokens need (vLLM allocates slots for the scheduled tokens; a window
                # keeps only its span of a long prompt).
                total_blocks = layout.held(min(request.num_tokens, budget), 0)
            # Hits that sit in the free queue stop being free once taken, so they count against the free blocks.
            evictable_hits = sum(1 for block_id in hits if pool.ref_cnt[block_id] == 0)
            if total_blocks - len(hits) + evictable_hits > pool.num_free_blocks:
                break
            self.waiting.popleft()
            pool.touch(hits)
            request.blocks = hits + (pool.allocate(total_blocks - len(hits)) or [])
            request.num_computed_tokens = len(hits) * block_size
            request.num_cached_tokens = request.num_computed_tokens
            request.status = RequestStatus.RUNNING
            running.append(request)
            admitted.append(request)
            num_new = min(request.num_tokens - request.num_computed_tokens, budget)
            scheduled.append((request, num_new))
            budget -= num_new

        return ScheduleOutput(
            scheduled=tuple(scheduled), preemptions=tuple(preemptions), newly_admitted=tuple(admitted)
        )

    def _prefix_hits(self, request: SimRequest) -> list[int]:
        """Longest run of cached full blocks at the start of the request. At least one token is always
        left to compute (vLLM needs it to produce logits), hence ``num_tokens - 1``."""
        hits: list[int] = []
        for index in range((request.num_tokens - 1) // self.block_size):
            if (index + 1) * self.block_size > request.prompt_tokens:
                break  # only prompt blocks are ever cached here
            block_id = self.pool.lookup(request.block_hash(index, self.block_size))
            if block_id is None:
                break
            hits.append(block_id)
        return hits

    def _preempt(self, request: SimRequest) -> None:
        self.pool.free(reversed(request.blocks))
        request.blocks = []
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        request.status = RequestStatus.PREEMPTED
        self.waiting.appendleft(request)

    def finish(self, request: SimRequest) -> None:
        """Free a finished (or aborted) request's blocks, tail first."""
        self.pool.free(reversed(request.blocks))
        request.blocks = []
        request.status = RequestStatus.FINISHED
