from __future__ import annotations

import pytest

from monitor.simulator.block_pool import NULL_BLOCK_ID, BlockPool


def test_null_block_is_never_handed_out_and_usage_counts_usable_blocks():
    pool = BlockPool(11)
    blocks = pool.allocate(10)
    assert blocks is not None and NULL_BLOCK_ID not in blocks
    assert sorted(blocks) == list(range(1, 11))
    assert pool.num_free_blocks == 0 and pool.usage() == 1.0
    assert pool.allocate(1) is None
    pool.check()


def test_usage_is_one_minus_free_over_usable_blocks():
    pool = BlockPool(101)
    pool.allocate(25)
    assert pool.usage() == pytest.approx(1 - 75 / 100)
    assert pool.num_used_blocks + pool.num_free_blocks == pool.num_usable_blocks == 100


def test_allocate_takes_nothing_when_it_cannot_take_everything():
    pool = BlockPool(5)
    assert pool.allocate(5) is None
    assert pool.num_free_blocks == 4 and pool.num_used_blocks == 0


def test_freed_blocks_are_reused_least_recently_freed_first():
    pool = BlockPool(5)
    a, _, c, _ = pool.allocate(4)
    pool.free([c])
    pool.free([a])
    assert pool.allocate(2) == [c, a]
    pool.check()


def test_shared_block_stays_used_until_its_last_reference_is_dropped():
    pool = BlockPool(4, enable_caching=True)
    (block,) = pool.allocate(1)
    pool.cache(block, "prefix-0")
    pool.touch([block])
    assert pool.ref_cnt[block] == 2
    pool.free([block])
    assert pool.num_used_blocks == 1
    pool.free([block])
    assert pool.num_used_blocks == 0 and pool.num_free_blocks == 3
    pool.check()


def test_unreferenced_cached_block_counts_as_free_and_can_be_hit_again():
    pool = BlockPool(4, enable_caching=True)
    (block,) = pool.allocate(1)
    pool.cache(block, "prefix-0")
    pool.free([block])
    # Evictable: free for accounting, still findable in the prefix cache.
    assert pool.num_free_blocks == 3 and pool.usage() == 0.0
    assert pool.lookup("prefix-0") == block
    pool.touch([block])
    assert pool.num_free_blocks == 2 and pool.ref_cnt[block] == 1
    pool.check()


def test_reallocating_an_evictable_block_evicts_its_cache_entry():
    pool = BlockPool(3, enable_caching=True)
    first, _ = pool.allocate(2)
    pool.cache(first, "old")
    pool.free([first])
    assert pool.allocate(1) == [first]
    assert pool.lookup("old") is None and pool.block_hash[first] is None
    pool.check()


def test_caching_disabled_records_nothing():
    pool = BlockPool(3)
    (block,) = pool.allocate(1)
    pool.cache(block, "x")
    assert pool.lookup("x") is None and pool.num_cached_blocks == 0


def test_double_free_is_an_error():
    pool = BlockPool(3)
    (block,) = pool.allocate(1)
    pool.free([block])
    with pytest.raises(ValueError, match="freed more often"):
        pool.free([block])


def test_pool_needs_a_usable_block():
    with pytest.raises(ValueError, match="null block"):
        BlockPool(1)
