"""The engine and scheduler, stepped on a simulated clock (no wall-clock time, no sleeping)."""

from __future__ import annotations

import itertools
import math

import pytest

from monitor.simulator.engine import Engine, EngineConfig, fixed_step_time
from monitor.simulator.load import LengthDistribution, LoadGenerator, LoadSpec
from monitor.simulator.request import RequestStatus, SimRequest
from monitor.simulator.simulation import Simulation


def make_engine(num_gpu_blocks: int = 11, **overrides) -> Engine:
    values = {
        "num_gpu_blocks": num_gpu_blocks,
        "block_size": 16,
        "max_model_len": min(2048, (num_gpu_blocks - 1) * 16),
        "step_time": fixed_step_time(0.01),
        **overrides,
    }
    return Engine(EngineConfig(**values))


def request(request_id: int, prompt: int, output: int, *, at: float = 0.0, **extra) -> SimRequest:
    return SimRequest(request_id=request_id, arrival_time=at, prompt_tokens=prompt, output_tokens=output, **extra)


def run_all(engine: Engine, *, limit: int = 100_000) -> list:
    results = []
    while engine.has_work and len(results) < limit:
        results.append(engine.step())
        engine.check()
    assert not engine.has_work, "did not finish"
    return results


def test_a_request_waits_until_its_prompt_blocks_can_be_allocated():
    engine = make_engine(11)  # 10 usable blocks of 16
    first = request(1, 100, 50)  # 7 prompt blocks, grows to 10
    second = request(2, 100, 50)
    engine.add_request(first)
    engine.add_request(second)
    engine.step()
    assert first.status is RequestStatus.RUNNING and second.status is RequestStatus.WAITING
    assert len(first.blocks) == 7 and engine.pool.num_free_blocks == 3
    results = run_all(engine)
    assert second.first_scheduled_time >= first.finished_time
    assert sum(len(r.preemptions) for r in results) == 0


def test_decode_grows_one_block_at_a_time_and_frees_everything_on_finish():
    engine = make_engine(11)
    req = request(1, 16, 40)
    engine.add_request(req)
    held = []
    while engine.has_work:
        engine.step()
        held.append(len(req.blocks))
        assert len(req.blocks) <= math.ceil(req.num_tokens / 16)
    assert all(0 <= later - earlier <= 1 for earlier, later in itertools.pairwise(held) if later)
    assert max(held) == math.ceil((16 + 40 - 1) / 16)  # the last sampled token is never fed back
    assert engine.pool.num_used_blocks == 0 and engine.pool.usage() == 0.0
    assert req.num_output_tokens == 40 and req.status is RequestStatus.FINISHED


def test_newest_running_request_is_preempted_and_goes_back_to_the_front():
    engine = make_engine(11)
    older = request(1, 64, 40, at=0.0)  # 4 blocks each, both admitted
    newer = request(2, 64, 40, at=0.001)
    later = request(3, 16, 4, at=0.002)
    for r in (older, newer):
        engine.add_request(r)
    engine.step()
    engine.add_request(later)
    preemptions = []
    while not preemptions:
        preemptions = list(engine.step().preemptions)
        engine.check()
    assert [p.request_id for p in preemptions] == [2]
    assert preemptions[0].free_blocks < preemptions[0].needed_blocks
    assert newer.status is RequestStatus.PREEMPTED and newer.blocks == [] and newer.num_computed_tokens == 0
    assert list(engine.scheduler.waiting)[:2] == [newer, later]
    assert older.status is RequestStatus.RUNNING
    assert engine.stats.preemptions == 1
    run_all(engine)
    # Recomputed, not restarted: every request still produced exactly its tokens, counted once.
    assert [r.num_output_tokens for r in (older, newer, later)] == [40, 40, 4]
    assert engine.stats.generation_tokens == 84
    assert engine.stats.prompt_tokens == 64 + 64 + 16


def test_max_num_seqs_caps_the_running_batch():
    engine = make_engine(200, max_num_seqs=2)
    for i in range(5):
        engine.add_request(request(i, 20, 5))
    seen = []
    while engine.has_work:
        engine.step()
        seen.append(engine.num_running)
    assert max(seen) == 2


def test_chunked_prefill_respects_the_token_budget():
    engine = make_engine(200, max_num_batched_tokens=64)
    req = request(1, 200, 3)
    engine.add_request(req)
    engine.add_request(request(2, 10, 30))
    computed = []
    while engine.has_work:
        result = engine.step()
        assert result.prefill_tokens + result.num_decode_seqs <= 64
        computed.append(req.num_computed_tokens)
    assert computed[:4] == [64, 128, 192, 200]  # the prompt took four steps
    assert req.first_token_time == pytest.approx(0.04)


def test_shared_system_prompt_blocks_are_shared_and_counted_as_hits():
    engine = make_engine(50, enable_prefix_caching=True)
    first = request(1, 100, 20, prefix_key="sys", prefix_tokens=64)
    engine.add_request(first)
    engine.step()  # prompt computed: its four prefix blocks are cached
    second = request(2, 90, 20, at=engine.clock, prefix_key="sys", prefix_tokens=64)
    engine.add_request(second)
    engine.step()
    assert second.blocks[:4] == first.blocks[:4]
    assert all(engine.pool.ref_cnt[b] == 2 for b in first.blocks[:4])
    assert second.num_cached_tokens == 64
    assert engine.stats.prefix_cache_hits == 64
    assert engine.stats.prefix_cache_queries == 100 + 90
    # Shared blocks are held once: fewer used blocks than the two requests' block lists.
    assert engine.pool.num_used_blocks == len(first.blocks) + len(second.blocks) - 4
    run_all(engine)
    assert engine.pool.num_used_blocks == 0
    # Finished, the prefix stays cached and free (evictable), so a third request still hits it.
    third = request(3, 80, 2, at=engine.clock, prefix_key="sys", prefix_tokens=64)
    engine.add_request(third)
    engine.step()
    assert third.num_cached_tokens == 64


def test_without_prefix_caching_nothing_is_shared():
    engine = make_engine(50)
    for i in range(2):
        engine.add_request(request(i, 100, 5, prefix_key="sys", prefix_tokens=64))
    engine.step()
    assert engine.stats.prefix_cache_hits == 0 and engine.pool.num_used_blocks == 14


def test_requests_longer_than_max_model_len_are_cut_and_finish_as_length():
    engine = make_engine(200, max_model_len=100)
    req = request(1, 80, 50)
    engine.add_request(req)
    run_all(engine)
    assert req.num_output_tokens == 20 and engine.stats.request_success["length"] == 1


def test_waiting_requests_past_the_client_timeout_are_aborted():
    engine = make_engine(11, request_timeout_s=0.05)
    engine.add_request(request(1, 100, 50))
    starved = request(2, 100, 50)
    engine.add_request(starved)
    run_all(engine)
    assert starved.num_output_tokens == 0 and starved.finished_time is not None
    assert engine.stats.request_success == {"stop": 1, "length": 0, "abort": 1}


def test_engine_refuses_a_max_model_len_the_pool_cannot_hold():
    with pytest.raises(ValueError, match="max_model_len"):
        EngineConfig(num_gpu_blocks=11, block_size=16, max_model_len=161)


def test_latency_histograms_use_simulated_time():
    engine = make_engine(50)  # 10 ms per step
    engine.add_request(request(1, 32, 3, at=0.0))
    run_all(engine)
    stats = engine.stats
    assert stats.time_to_first_token.sum == pytest.approx(0.01)
    assert stats.inter_token_latency.count == 2 and stats.inter_token_latency.sum == pytest.approx(0.02)
    assert stats.e2e_request_latency.sum == pytest.approx(0.03)
    assert stats.request_queue_time.sum == 0.0
    assert stats.request_prompt_tokens.sum == 32 and stats.request_generation_tokens.sum == 3


def _poisson_run(rate: float, *, seconds: float = 300.0) -> Simulation:
    load = LoadSpec(rate=rate, prompt=LengthDistribution("fixed", 200), output=LengthDistribution("fixed", 100), seed=7)
    engine = make_engine(301, max_model_len=4096, max_num_seqs=64, step_time=fixed_step_time(0.02))
    simulation = Simulation([engine], LoadGenerator(load))
    max_waiting = 0
    for tick in range(1, int(seconds) + 1):
        simulation.run_until(float(tick))
        max_waiting = max(max_waiting, engine.num_waiting)
    simulation.max_waiting = max_waiting
    return simulation


def test_underload_builds_no_queue_and_no_preemptions():
    # 0.5 req/s x ~2 s each: about one request in flight, 300 blocks hold dozens.
    simulation = _poisson_run(0.5)
    assert simulation.num_preemptions == 0
    assert simulation.max_waiting <= 2
    assert simulation.finished_requests > 100


def test_overload_builds_a_queue_and_preemptions():
    # 30 req/s of 300-token requests: far more than 300 blocks of 16 tokens hold.
    simulation = _poisson_run(30.0, seconds=60)
    engine = simulation.engines[0]
    assert simulation.num_preemptions > 0 and engine.stats.preemptions == simulation.num_preemptions
    assert engine.num_waiting > 100
    assert engine.pool.usage() > 0.8


def test_same_seed_replays_the_same_run():
    first = _poisson_run(3.0, seconds=60).engines[0]
    second = _poisson_run(3.0, seconds=60).engines[0]
    assert first.clock == second.clock and first.num_steps == second.num_steps
    assert first.stats.generation_tokens == second.stats.generation_tokens
    assert first.stats.e2e_request_latency.snapshot() == second.stats.e2e_request_latency.snapshot()


def test_data_parallel_engines_share_the_load():
    load = LoadSpec(rate=20, prompt=LengthDistribution("fixed", 100), output=LengthDistribution("fixed", 50), seed=1)
    engines = [make_engine(400, max_model_len=2048) for _ in range(2)]
    simulation = Simulation(engines, LoadGenerator(load))
    simulation.run_until(30.0)
    done = [sum(e.stats.request_success.values()) for e in engines]
    assert min(done) > 0.3 * sum(done)
    assert all(e.clock >= 30.0 for e in engines)


def test_closed_loop_keeps_the_concurrency_in_flight():
    load = LoadSpec(concurrency=3, prompt=LengthDistribution("fixed", 50), output=LengthDistribution("fixed", 10))
    engine = make_engine(100, max_model_len=1024)
    simulation = Simulation([engine], LoadGenerator(load))
    for step in range(1, 50):
        simulation.run_until(step * 0.1)
        assert simulation.in_flight == 3
    assert simulation.finished_requests > 10


def test_reset_is_a_restart():
    engine = make_engine(100, max_model_len=1024)
    engine.add_request(request(1, 50, 10))
    engine.step()
    created = engine.stats.created
    engine.reset()
    assert not engine.has_work and engine.pool.num_used_blocks == 0
    assert engine.stats.generation_tokens == 0 and engine.stats.created >= created
