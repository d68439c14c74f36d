"""Rollups and the series the charts and the API read: steps, gaps, counter resets, quantiles."""

from __future__ import annotations

import datetime as dt

import pytest
from monitor_factories import T0, endpoint_on, node_with_key

from monitor.ingest import samples_write
from monitor.models import EngineRollup, EngineSample, HistogramSample
from monitor.rollups import rollup_hours, rollup_minutes
from monitor.series import endpoint_series, histogram_quantile, series_window

pytestmark = pytest.mark.django_db

START = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)  # == T0
KV = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]
# A restart between the 8th and 9th sample: 5 -> 1.
PREEMPTIONS = [0, 0, 1, 1, 3, 3, 5, 1, 2, 2, 2, 2]


@pytest.fixture
def endpoint(frozen_now):
    node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9001)
    samples_write(
        EngineSample,
        [
            EngineSample(
                endpoint_id=endpoint.pk,
                engine=0,
                time=START + dt.timedelta(seconds=10 * i),
                kv_cache_usage=KV[i],
                num_requests_running=i,
                num_requests_waiting=0,
                num_preemptions_total=PREEMPTIONS[i],
                prefix_cache_hits_total=10 * i,
                prefix_cache_queries_total=40 * i,
                num_gpu_blocks=1000,
                block_size=16,
            )
            for i in range(12)
        ],
    )
    return endpoint


def series(endpoint, metric, start, end, step, **kwargs):
    return endpoint_series(endpoint=endpoint, metric=metric, start=start, end=end, step=step, **kwargs)


def test_minute_rollups_keep_mean_max_and_counter_increases_across_a_restart(endpoint):
    assert rollup_minutes(start=START, end=START + dt.timedelta(minutes=2)) == 2
    first, second = EngineRollup.objects.filter(resolution=60).order_by("time")
    # Minute 0: mean of 0.1..0.6 = 0.35; increases 0+1+0+2+0 = 3 over 50 s (no sample before the first).
    assert (first.samples, first.kv_cache_usage_avg, first.kv_cache_usage_max) == (6, pytest.approx(0.35), 0.6)
    assert (first.preemptions_inc, first.covered_seconds) == (3, 50)
    # Minute 1: 3->5 = 2, 5->1 is a restart (+1), 1->2 = 1, then none: 4 over 60 s.
    assert (second.preemptions_inc, second.covered_seconds) == (4, 60)
    assert (second.num_requests_running_max, second.num_gpu_blocks) == (11, 1000)


def test_rolling_up_twice_gives_the_same_rows(endpoint):
    rollup_minutes(start=START, end=START + dt.timedelta(minutes=2))
    rollup_minutes(start=START, end=START + dt.timedelta(minutes=2))
    assert EngineRollup.objects.filter(resolution=60).count() == 2
    assert rollup_hours(start=START, end=START + dt.timedelta(hours=1)) == 1
    hour = EngineRollup.objects.get(resolution=3600)
    # 12 samples: (0.35 * 6 + 0.9 * 6) / 12 = 0.625; increases 3 + 4 over 110 s.
    assert (hour.samples, hour.kv_cache_usage_avg, hour.kv_cache_usage_max) == (12, pytest.approx(0.625), 0.9)
    assert (hour.preemptions_inc, hour.covered_seconds) == (7, 110)


def test_raw_series_has_a_point_per_step_and_null_where_nothing_was_scraped(endpoint):
    result = series(endpoint, "kv_cache_usage", START, START + dt.timedelta(seconds=150), 10)
    assert result.source == "raw" and result.step == 10
    values = [value for _, value in result.points]
    assert values == [*KV, None, None, None, None]
    assert result.points[0][0] == 1_796_083_200


def test_rates_from_raw_and_from_rollups_agree(endpoint):
    # Before the rollup task ran, the newest minutes come from raw rows; after, from the rollups.
    before = series(endpoint, "preemptions_per_s", START, START + dt.timedelta(seconds=119), 60)
    rollup_minutes(start=START, end=START + dt.timedelta(minutes=2))
    EngineSample.objects.filter(time__gte=START).delete()
    after = series(endpoint, "preemptions_per_s", START, START + dt.timedelta(seconds=119), 60)
    assert before.source == after.source == "1m"
    expected = [pytest.approx(3 / 50), pytest.approx(4 / 60)]
    assert [value for _, value in before.points] == expected
    assert [value for _, value in after.points] == expected


def test_rates_with_a_ten_second_step_handle_the_restart(endpoint):
    result = series(endpoint, "preemptions_per_s", START, START + dt.timedelta(seconds=110), 10)
    # Per 10 s: none before the first sample, then 0, 1, 0, 2, 0, 2, restart 1, 1, 0, 0, 0 (per second / 10).
    assert [value for _, value in result.points] == [None, 0, 0.1, 0, 0.2, 0, 0.2, 0.1, 0.1, 0, 0, 0]


def test_prefix_cache_hit_rate_is_hits_over_queries(endpoint):
    result = series(endpoint, "prefix_cache_hit_rate", START, START + dt.timedelta(seconds=110), 10)
    assert [value for _, value in result.points][1:4] == [0.25, 0.25, 0.25]


def test_kv_tokens_used_sums_the_engines(frozen_now):
    node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9003)
    for engine, usage in ((0, 0.25), (1, 0.75)):
        row = EngineSample(
            endpoint_id=endpoint.pk, engine=engine, time=START, kv_cache_usage=usage, num_gpu_blocks=1000, block_size=16
        )
        samples_write(EngineSample, [row])
    tokens = series(endpoint, "kv_tokens_used", START, START + dt.timedelta(seconds=5), 10)
    usage = series(endpoint, "kv_cache_usage", START, START + dt.timedelta(seconds=5), 10)
    one = series(endpoint, "kv_cache_usage", START, START + dt.timedelta(seconds=5), 10, engine=0)
    # 0.25 * 16,000 + 0.75 * 16,000 tokens; usage is the fuller engine's.
    assert tokens.points == [(1_796_083_200, 16000.0)]
    assert usage.points == [(1_796_083_200, 0.75)]
    assert one.points == [(1_796_083_200, 0.25)]


def test_long_ranges_read_rollups_and_stay_under_a_thousand_points():
    _start, step, source = series_window(start=START, end=START + dt.timedelta(days=7), step=1)
    # 604,800 s / 1,000 points = 605 s: ten minutes or more read the hourly rollups (168 points).
    assert (step, source) == (3600, "1h")
    # 24 h / 1,000 = 87 s: whole minutes from the 1-minute rollups.
    assert series_window(start=START, end=START + dt.timedelta(hours=24), step=None)[1:] == (120, "1m")
    assert series_window(start=START, end=START + dt.timedelta(days=90), step=None)[1:] == (10800, "1h")
    # Without a step, never finer than the scrape interval (10 s): finer steps would be mostly gaps.
    assert series_window(start=START, end=START + dt.timedelta(minutes=15), step=None)[1:] == (10, "raw")
    assert series_window(start=START, end=START + dt.timedelta(minutes=15), step=1)[1:] == (1, "raw")


def test_histogram_quantile_interpolates_within_the_bucket():
    bounds, counts = [0.1, 0.5, 1.0, None], [10, 30, 40, 40]
    # p50: rank 20 lies in (0.1, 0.5] holding 10..30: 0.1 + 0.4 * 10/20 = 0.3
    assert histogram_quantile(0.5, bounds, counts) == pytest.approx(0.3)
    # p99: rank 39.6 in (0.5, 1.0] holding 30..40: 0.5 + 0.5 * 9.6/10 = 0.98
    assert histogram_quantile(0.99, bounds, counts) == pytest.approx(0.98)
    assert histogram_quantile(0.5, bounds, [0, 0, 0, 0]) is None


def test_quantile_series_use_the_difference_between_minutes(frozen_now):
    node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9004)
    bounds = [0.1, 0.5, 1.0, None]
    for minute, counts in ((0, [10, 30, 40, 40]), (1, [20, 60, 80, 80])):
        row = HistogramSample(
            endpoint_id=endpoint.pk,
            engine=0,
            name="ttft",
            time=START + dt.timedelta(minutes=minute),
            bounds=bounds,
            counts=counts,
        )
        samples_write(HistogramSample, [row])
    result = series(endpoint, "ttft_p50_seconds", START, START + dt.timedelta(seconds=119), 60)
    # Between minute 0 and minute 1 came [10, 30, 40, 40] more: the shape above, p50 = 0.3, drawn at the
    # start of that minute; the last minute has no later row yet.
    assert [value for _, value in result.points] == [pytest.approx(0.3), None]
    assert T0 == START.timestamp()


def test_quantiles_over_longer_steps_read_only_the_boundary_minutes(frozen_now):
    node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9005)
    bounds = [0.1, 0.5, 1.0, None]
    # Cumulative counts each minute; minutes 1 and 3 carry a wild shape that must not be read at a 2-minute step.
    counts_by_minute = {0: [0, 0, 0, 0], 1: [0, 0, 99, 99], 2: [10, 30, 40, 40], 3: [0, 0, 0, 999], 4: [10, 70, 80, 80]}
    samples_write(
        HistogramSample,
        [
            HistogramSample(
                endpoint_id=endpoint.pk,
                engine=0,
                name="ttft",
                time=START + dt.timedelta(minutes=minute),
                bounds=bounds,
                counts=counts,
            )
            for minute, counts in counts_by_minute.items()
        ],
    )
    result = series(endpoint, "ttft_p50_seconds", START, START + dt.timedelta(seconds=239), 120)
    # [0, 2): +[10, 30, 40, 40] -> p50 0.3 (as above). [2, 4): +[0, 40, 40, 40] -> rank 20 in (0.1, 0.5]
    # holding 0..40: 0.1 + 0.4 * 20/40 = 0.3 as well; and p99 there: rank 39.6 -> 0.1 + 0.4 * 39.6/40 = 0.496.
    assert result.step == 120
    assert [value for _, value in result.points] == [pytest.approx(0.3), pytest.approx(0.3)]
    p99 = series(endpoint, "ttft_p99_seconds", START, START + dt.timedelta(seconds=239), 120)
    assert p99.points[1][1] == pytest.approx(0.496)
