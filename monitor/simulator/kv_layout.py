"""How many pool blocks a running request holds when a model's KV cache has several groups (hybrid state layers,
sliding windows, DeepSeek-V4's packed caches), as vLLM's per-group managers hold them.

vLLM gives every KV cache group its own block table over one shared pool (``vllm/v1/core/kv_cache_coordinator.py``,
``HybridKVCacheCoordinator``), so a request draws, per group:

* full attention: ``cdiv(tokens, block_size)`` blocks (``FullAttentionManager``);
* a sliding window: the same, less the blocks wholly before the window of the tokens already computed, which
  ``SlidingWindowManager.remove_skipped_blocks`` frees (``num_computed_tokens - sliding_window + 1`` tokens
  skipped);
* chunked local attention: the blocks from the start of the current chunk on (``ChunkedLocalAttentionManager``);
* a recurrent state (Mamba, gated delta net): a fixed number of blocks (``MambaManager``), the plan's
  ``state_blocks_per_request``.

A dense model (one full-attention group) needs none of this: the scheduler keeps its plain ``cdiv`` path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.sizing import Plan


@dataclass(frozen=True)
class KvGroup:
    kind: str  # "full", "sliding_window", "chunked_local" or "state"
    window: int | None
    num_groups: int
    block_size: int


@dataclass(frozen=True)
class KvLayout:
    groups: tuple[KvGroup, ...]
    state_blocks: int = 1

    def held(self, tokens: int, computed: int) -> int:
        """Blocks a request holds once ``tokens`` are allocated, ``computed`` of them already computed."""
        total = 0
        for group in self.groups:
            size = group.block_size
            if group.kind == "state":
                blocks = self.state_blocks
            else:
                blocks = -(-tokens // size)
                if group.kind == "sliding_window" and group.window:
                    blocks -= max(0, computed - group.window + 1) // size
                elif group.kind == "chunked_local" and group.window:
                    blocks -= (computed // group.window * group.window) // size
            total += group.num_groups * blocks
        return total

    def worst(self, max_len: int, batched: int) -> int:
        """The most blocks one request of ``max_len`` tokens can hold with ``batched`` tokens a step: a window's
        span plus a step's tokens, across a block boundary (vLLM's admission worst case, kv_cache_interface.py)."""
        total = 0
        for group in self.groups:
            size = group.block_size
            whole = -(-max_len // size)
            if group.kind == "state":
                blocks = self.state_blocks
            elif group.kind in ("sliding_window", "chunked_local") and group.window:
                blocks = min(whole, -(-(group.window + batched) // size) + 1)
            else:
                blocks = whole
            total += group.num_groups * blocks
        return total


def layout_from_plan(plan: Plan) -> KvLayout | None:
    """The plan's KV cache groups, or None when one full-attention group of the plan's block size is all there is."""
    groups = tuple(
        KvGroup(group.kind, group.window, group.num_groups, group.block_size or plan.block_size)
        for group in plan.kv_groups
    )
    if not groups or (len(groups) == 1 and groups[0].kind == "full" and groups[0].num_groups == 1):
        return None
    return KvLayout(groups, max(1, plan.state_blocks_per_request))
