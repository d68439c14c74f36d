"""Property tests: whatever the load, the pool's books balance at every step."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from monitor.simulator.engine import Engine, EngineConfig
from monitor.simulator.request import SimRequest

request_strategy = st.tuples(
    st.floats(min_value=0.0, max_value=2.0),  # arrival
    st.integers(min_value=1, max_value=400),  # prompt
    st.integers(min_value=1, max_value=300),  # output
    st.sampled_from([None, "a", "b"]),  # shared system prompt
    st.integers(min_value=0, max_value=128),  # its length
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    num_gpu_blocks=st.integers(min_value=3, max_value=60),
    block_size=st.sampled_from([1, 4, 16]),
    max_num_seqs=st.integers(min_value=1, max_value=16),
    max_num_batched_tokens=st.integers(min_value=1, max_value=512),
    caching=st.booleans(),
    specs=st.lists(request_strategy, min_size=1, max_size=25),
)
def test_pool_books_balance_at_every_step(
    num_gpu_blocks, block_size, max_num_seqs, max_num_batched_tokens, caching, specs
):
    usable = num_gpu_blocks - 1
    max_model_len = min(512, usable * block_size)
    if max_model_len < 2:
        return
    # Decode steps advance the clock by a fixed 10 ms, prefill adds per token: arrivals interleave with steps.
    engine = Engine(
        EngineConfig(
            num_gpu_blocks=num_gpu_blocks,
            block_size=block_size,
            max_model_len=max_model_len,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            enable_prefix_caching=caching,
            step_time=lambda decode, context, prefill: 0.01 + prefill * 1e-5,
        )
    )
    pending = sorted(
        (
            SimRequest(
                request_id=i,
                arrival_time=arrival,
                prompt_tokens=prompt,
                output_tokens=output,
                prefix_key=key,
                prefix_tokens=min(prefix, prompt) if key else 0,
            )
            for i, (arrival, prompt, output, key, prefix) in enumerate(specs)
        ),
        key=lambda r: r.arrival_time,
    )
    submitted: list[SimRequest] = []
    pool = engine.pool
    for _ in range(200_000):
        while pending and pending[0].arrival_time <= engine.clock:
            submitted.append(pending.pop(0))
            engine.add_request(submitted[-1])
        if not engine.has_work:
            if not pending:
                break
            engine.idle_until(pending[0].arrival_time)
            continue
        result = engine.step()
        # used + free = usable blocks, and the counters agree with a full scan of the pool
        assert pool.num_used_blocks + pool.num_free_blocks == usable
        pool.check()
        # vLLM's BlockPool.get_usage
        assert math.isclose(pool.usage(), 1 - pool.num_free_blocks / (num_gpu_blocks - 1))
        assert 0.0 <= pool.usage() <= 1.0
        for request in engine.scheduler.running:
            assert len(request.blocks) <= math.ceil(request.num_tokens / block_size)
        # A preemption only ever happens when the pool cannot supply the blocks asked for.
        if result.preemptions:
            event("preempted")
        for preemption in result.preemptions:
            assert preemption.free_blocks < preemption.needed_blocks
        assert engine.num_running <= max_num_seqs
    if engine.stats.prefix_cache_hits:
        event("prefix cache hit")
    assert not pending and not engine.has_work, "the engine stopped making progress"
    assert pool.num_used_blocks == 0 and pool.usage() == 0.0
    assert all(r.num_output_tokens == r.output_tokens for r in submitted)
    assert engine.stats.generation_tokens == sum(r.output_tokens for r in submitted)
    assert sum(engine.stats.request_success.values()) == len(submitted)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    num_gpu_blocks=st.integers(min_value=8, max_value=120),
    window=st.integers(min_value=2, max_value=64),
    state_blocks=st.integers(min_value=1, max_value=3),
    groups=st.lists(st.sampled_from(["full", "sliding_window", "chunked_local", "state"]), min_size=1, max_size=4),
    max_num_seqs=st.integers(min_value=1, max_value=8),
    max_num_batched_tokens=st.integers(min_value=1, max_value=256),
    specs=st.lists(request_strategy, min_size=1, max_size=15),
)
def test_pool_books_balance_with_several_kv_cache_groups(
    num_gpu_blocks, window, state_blocks, groups, max_num_seqs, max_num_batched_tokens, specs
):
    """Hybrid and windowed layouts (kv_layout.py): blocks given back as windows slide, fixed state blocks, and every
    request still finishes with the pool empty."""
    from monitor.simulator.kv_layout import KvGroup, KvLayout

    layout = KvLayout(
        tuple(KvGroup(kind, window if kind in ("sliding_window", "chunked_local") else None, 1, 4) for kind in groups),
        state_blocks=state_blocks,
    )
    max_model_len = 256
    while max_model_len > 2 and layout.worst(max_model_len, max_num_batched_tokens) > num_gpu_blocks - 1:
        max_model_len //= 2
    try:
        config = EngineConfig(
            num_gpu_blocks=num_gpu_blocks,
            block_size=4,
            max_model_len=max_model_len,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            step_time=lambda decode, context, prefill: 0.01 + prefill * 1e-5,
            kv_layout=layout,
        )
    except ValueError:
        return  # no request of even 2 tokens fits these groups
    engine = Engine(config)
    usable = num_gpu_blocks - 1
    requests = [
        SimRequest(request_id=i, arrival_time=0.0, prompt_tokens=prompt, output_tokens=output)
        for i, (_, prompt, output, _, _) in enumerate(specs)
    ]
    for request in requests:
        engine.add_request(request)
    pool = engine.pool
    for _ in range(200_000):
        if not engine.has_work:
            break
        result = engine.step()
        assert pool.num_used_blocks + pool.num_free_blocks == usable
        pool.check()
        for request in engine.scheduler.running:
            assert len(request.blocks) <= layout.held(request.num_tokens, 0)
        for preemption in result.preemptions:
            assert preemption.free_blocks < preemption.needed_blocks
    assert not engine.has_work, "the engine stopped making progress"
    assert pool.num_used_blocks == 0
    assert all(r.num_output_tokens == r.output_tokens for r in requests)
