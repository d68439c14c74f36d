"""A paged KV block pool with vLLM V1's accounting (``vllm/v1/core/block_pool.py``).

Block 0 is the reserved null block and is never handed out, so ``num_gpu_blocks - 1`` blocks are usable.
Blocks are reference counted: a full block holding a shared system prompt can belong to several requests.
A block whose count drops to zero goes to the back of the free queue but keeps its prefix-cache hash, so
it still counts as free (vLLM's "evictable" blocks) and is evicted, least recently freed first, only when
the pool hands it out again.

Every operation is O(1) per block: the free queue is an ``OrderedDict`` (a linked list in C) rather than
a ``deque`` because a prefix-cache hit must pull a free block out of the middle of the queue, as vLLM's
``FreeKVCacheBlockQueue`` does with its own doubly linked list.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable

NULL_BLOCK_ID = 0


class BlockPool:
    """``num_gpu_blocks`` KV blocks: reference counts, an LRU free queue and the prefix-cache map."""

    def __init__(self, num_gpu_blocks: int, *, enable_caching: bool = False) -> None:
        if num_gpu_blocks < 2:
            raise ValueError("num_gpu_blocks must be at least 2 (block 0 is the reserved null block)")
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.ref_cnt = [0] * num_gpu_blocks
        self.block_hash: list[Hashable | None] = [None] * num_gpu_blocks
        # Front = evicted first. The null block is never in it.
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(1, num_gpu_blocks))
        self._cached: dict[Hashable, int] = {}
        self._used = 0

    @property
    def num_usable_blocks(self) -> int:
        return self.num_gpu_blocks - 1

    @property
    def num_free_blocks(self) -> int:
        """Blocks no request holds, cached (evictable) ones included, as in ``BlockPool.get_num_free_blocks``."""
        return len(self._free)

    @property
    def num_used_blocks(self) -> int:
        return self._used

    @property
    def num_cached_blocks(self) -> int:
        return len(self._cached)

    def usage(self) -> float:
        """``vllm:kv_cache_usage_perc``: ``1 - free / (num_gpu_blocks - 1)`` (``BlockPool.get_usage``)."""
        return 1.0 - len(self._free) / (self.num_gpu_blocks - 1)

    def allocate(self, count: int) -> list[int] | None:
        """``count`` blocks with a reference each, or ``None`` (nothing taken) when fewer are free."""
        if count > len(self._free):
            return None
        blocks = []
        for _ in range(count):
            block_id, _ = self._free.popitem(last=False)
            block_hash = self.block_hash[block_id]
            if block_hash is not None:
                # Reusing an evictable block evicts its cached content.
                del self._cached[block_hash]
                self.block_hash[block_id] = None
            self.ref_cnt[block_id] = 1
            blocks.append(block_id)
        self._used += count
        return blocks

    def lookup(self, block_hash: Hashable) -> int | None:
        """The cached block holding this content, whether a request holds it or it sits in the free queue."""
        return self._cached.get(block_hash)

    def touch(self, block_ids: Iterable[int]) -> None:
        """Take a reference on prefix-cache hits; a hit that was free leaves the free queue."""
        for block_id in block_ids:
            if self.ref_cnt[block_id] == 0:
                del self._free[block_id]
                self._used += 1
            self.ref_cnt[block_id] += 1

    def cache(self, block_id: int, block_hash: Hashable) -> None:
        """Record a full block's content so later requests can share it. First writer wins, as in vLLM."""
        if not self.enable_caching or block_hash in self._cached or self.block_hash[block_id] is not None:
            return
        self._cached[block_hash] = block_id
        self.block_hash[block_id] = block_hash

    def free(self, block_ids: Iterable[int]) -> None:
        """Drop one reference from each block. Callers pass a request's blocks tail first, as vLLM does, so
        its unshared tail is evicted before the shared prefix."""
        for block_id in block_ids:
            count = self.ref_cnt[block_id] - 1
            if count < 0:
                raise ValueError(f"block {block_id} freed more often than allocated")
            self.ref_cnt[block_id] = count
            if count == 0:
                self._free[block_id] = None
                self._used -= 1

    def check(self) -> None:
        """Full scan of the pool's invariants (tests only: it is O(num_gpu_blocks))."""
        assert self.ref_cnt[NULL_BLOCK_ID] == 0 and NULL_BLOCK_ID not in self._free
        held = sum(1 for count in self.ref_cnt if count > 0)
        free = sum(1 for block_id in range(1, self.num_gpu_blocks) if self.ref_cnt[block_id] == 0)
        assert held == self._used, (held, self._used)
        assert free == len(self._free), (free, len(self._free))
        assert held + free == self.num_usable_blocks
        for block_hash, block_id in self._cached.items():
            assert self.block_hash[block_id] == block_hash
