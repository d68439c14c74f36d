"""parse_vllm_metrics on bodies built with prometheus_client: V1, V0, data-parallel, multi-process, OpenMetrics
names, bad values and bodies that are not metrics at all."""

from __future__ import annotations

import json
import math
import pickle

import pytest
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from scrape_bodies import (
    CACHE_CONFIG,
    MODEL,
    EngineFigures,
    histogram_snapshot,
    multiprocess_body,
    openmetrics_body,
    v0_body,
    v1_body,
)

from monitor.scrape import vllm as vllm_module
from monitor.scrape.records import Histogram, ScrapeError
from monitor.scrape.vllm import metrics_url, parse_vllm_metrics
from monitor.simulator.metrics import EngineSnapshot, VllmCollector, metrics_registry
from monitor.simulator.server import cache_config_labels
from monitor.simulator.stats import INTER_TOKEN_BUCKETS, REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS

V1_EXPECTED = {
    "engine": "0",
    "model_name": MODEL,
    "kv_cache_usage": 0.25,
    "num_requests_running": 3,
    "num_requests_waiting": 1,
    "num_preemptions_total": 7,
    "prefix_cache_hits_total": 300,
    "prefix_cache_queries_total": 1200,
    "prompt_tokens_total": 4096,
    "generation_tokens_total": 512,
    "request_success_total": 8,
    "num_gpu_blocks": 27064,
    "block_size": 16,
    "gpu_memory_utilization": 0.9,
    "cache_dtype": "fp8",
    "enable_prefix_caching": True,
}


def without_histograms(record: dict) -> dict:
    return {key: value for key, value in record.items() if key != "histograms"}


def test_v1_single_process_reads_every_value_and_ignores_created():
    body = v1_body()
    assert "vllm:num_preemptions_created" in body  # the trap is there
    engines, rejected, series = parse_vllm_metrics(body)
    assert rejected == ()
    assert series == 44
    assert [e.engine for e in engines] == ["0"]
    assert without_histograms(engines[0].as_dict()) == V1_EXPECTED


def test_v1_histograms_keep_cumulative_buckets_for_ttft_itl_and_e2e():
    (engine,), _, _ = parse_vllm_metrics(v1_body())
    assert set(engine.histograms) == {"ttft", "itl", "e2e"}
    ttft = engine.histograms["ttft"]
    assert ttft.buckets == ((0.1, 1.0), (0.5, 2.0), (1.0, 2.0), (math.inf, 3.0))
    assert ttft.count == 3.0
    assert ttft.sum == pytest.approx(2.35)
    itl = engine.histograms["itl"]
    assert itl.buckets == ((0.01, 0.0), (0.05, 3.0), (math.inf, 4.0))
    assert itl.sum == pytest.approx(0.27)
    assert engine.histograms["e2e"] == Histogram(buckets=((1.0, 1.0), (10.0, 2.0), (math.inf, 2.0)), sum=4.5, count=2.0)


def test_as_dict_is_json_with_ints_for_counts_and_bounds_as_text():
    (engine,), _, _ = parse_vllm_metrics(v1_body())
    record = json.loads(json.dumps(engine.as_dict(), allow_nan=False))
    assert isinstance(record["num_gpu_blocks"], int) and isinstance(record["prompt_tokens_total"], int)
    assert isinstance(record["kv_cache_usage"], float)
    assert record["histograms"]["e2e"] == {"buckets": [["1.0", 1], ["10.0", 2], ["+Inf", 2]], "sum": 4.5, "count": 2}


def test_two_engines_give_one_record_each():
    body = v1_body(
        {
            "0": EngineFigures(kv=0.5, running=10, waiting=0, preemptions=0),
            "1": EngineFigures(kv=0.75, running=12, waiting=4, preemptions=2),
        }
    )
    engines, rejected, _ = parse_vllm_metrics(body)
    assert rejected == ()
    assert [(e.engine, e.values["kv_cache_usage"], e.values["num_requests_running"]) for e in engines] == [
        ("0", 0.5, 10.0),
        ("1", 0.75, 12.0),
    ]
    assert engines[1].values["num_requests_waiting"] == 4.0
    assert engines[1].values["num_preemptions_total"] == 2.0
    assert engines[0].values["num_preemptions_total"] == 0.0  # exposed as 0: present, not absent
    assert [e.values["num_gpu_blocks"] for e in engines] == [27064.0, 27064.0]


def test_engines_sort_by_index_not_text():
    body = v1_body({str(index): EngineFigures(running=index) for index in (10, 2, 0, 1)})
    engines, _, _ = parse_vllm_metrics(body)
    assert [e.engine for e in engines] == ["0", "1", "2", "10"]
    assert engines[3].values["num_requests_running"] == 10.0


def test_multi_process_copies_differing_only_in_pid_fold_by_max():
    body = multiprocess_body({"101": 0.0, "102": 0.62, "103": 0.0, "104": 0.0}, {"101": 0.0, "102": 5.0})
    (engine,), rejected, series = parse_vllm_metrics(body)
    assert rejected == ()
    assert series == 6
    assert engine.values == {"kv_cache_usage": 0.62, "num_requests_running": 5.0}


def test_v0_names_no_engine_label_and_time_per_output_token():
    (engine,), rejected, _ = parse_vllm_metrics(v0_body())
    assert rejected == ()
    assert without_histograms(engine.as_dict()) == {
        "engine": "0",
        "model_name": MODEL,
        "kv_cache_usage": 0.5,
        "num_requests_running": 4,
        "num_requests_waiting": 2,
        "num_requests_swapped": 1,
        "num_preemptions_total": 9,
        "prefix_cache_hits_total": 200,
        "prefix_cache_queries_total": 800,
        "prompt_tokens_total": 1000,
        "generation_tokens_total": 100,
        "num_gpu_blocks": 27064,
        "block_size": 16,
        "gpu_memory_utilization": 0.9,
        "cache_dtype": "fp8",
        "enable_prefix_caching": True,
    }
    assert engine.histograms == {
        "itl": Histogram(buckets=((0.01, 0.0), (0.05, 1.0), (math.inf, 1.0)), sum=0.03, count=1.0)
    }


def test_v1_name_wins_when_a_server_exposes_both():
    registry = CollectorRegistry()
    Gauge("vllm:gpu_cache_usage_perc", "old", ["engine"], registry=registry).labels("0").set(0.1)
    Gauge("vllm:kv_cache_usage_perc", "new", ["engine"], registry=registry).labels("0").set(0.8)
    (engine,), _, _ = parse_vllm_metrics(generate_latest(registry).decode())
    assert engine.values == {"kv_cache_usage": 0.8}
    assert engine.model_name is None
    assert "model_name" not in engine.as_dict()


def test_openmetrics_names_with_colon_rewritten_read_the_same():
    body = openmetrics_body()
    assert "vllm_kv_cache_usage_perc{" in body and "vllm:kv_cache_usage_perc{" not in body
    (engine,), rejected, _ = parse_vllm_metrics(body)
    assert rejected == ()
    assert without_histograms(engine.as_dict()) == V1_EXPECTED
    assert engine.histograms["ttft"].buckets[-1] == (math.inf, 3.0)


def test_nan_is_rejected_with_a_reason_and_the_rest_is_kept():
    (engine,), rejected, _ = parse_vllm_metrics(v1_body({"0": EngineFigures(kv=math.nan)}))
    assert rejected == ("kv_cache_usage=nan not finite (engine 0)",)
    assert "kv_cache_usage" not in engine.values
    assert engine.values["num_requests_running"] == 3.0


def test_infinite_counter_is_rejected():
    (engine,), rejected, _ = parse_vllm_metrics(v1_body({"0": EngineFigures(prompt_tokens=math.inf)}))
    assert rejected == ("prompt_tokens_total=inf not finite (engine 0)",)
    assert "prompt_tokens_total" not in engine.values


def test_kv_usage_above_one_is_rejected_with_a_reason():
    engines, rejected, _ = parse_vllm_metrics(
        v1_body({"0": EngineFigures(kv=1.7), "1": EngineFigures(kv=0.4)}),
    )
    assert rejected == ("kv_cache_usage=1.7 out of range 0..1 (engine 0)",)
    assert "kv_cache_usage" not in engines[0].values
    assert engines[1].values["kv_cache_usage"] == 0.4


def test_kv_usage_of_exactly_zero_and_one_is_kept():
    engines, rejected, _ = parse_vllm_metrics(v1_body({"0": EngineFigures(kv=0.0), "1": EngineFigures(kv=1.0)}))
    assert rejected == ()
    assert [e.values["kv_cache_usage"] for e in engines] == [0.0, 1.0]


def test_negative_gauge_is_rejected():
    (engine,), rejected, _ = parse_vllm_metrics(v1_body({"0": EngineFigures(waiting=-2)}))
    assert rejected == ("num_requests_waiting=-2.0 negative (engine 0)",)
    assert "num_requests_waiting" not in engine.values


def test_nan_in_a_histogram_drops_that_histogram_only():
    (engine,), rejected, _ = parse_vllm_metrics(v1_body({"0": EngineFigures(e2e=(math.nan,))}))
    assert rejected == ("e2e sum=nan not finite (engine 0)",)
    assert set(engine.histograms) == {"ttft", "itl"}


def test_cache_config_before_profiling_has_no_block_count():
    config = {**CACHE_CONFIG, "num_gpu_blocks": "None", "enable_prefix_caching": "False", "cache_dtype": "auto"}
    (engine,), rejected, _ = parse_vllm_metrics(v1_body({"0": EngineFigures(cache_config=config)}))
    assert rejected == ()
    assert "num_gpu_blocks" not in engine.values
    assert engine.values["block_size"] == 16.0
    assert (engine.cache_dtype, engine.enable_prefix_caching) == ("auto", False)


def test_server_without_cache_config_leaves_those_keys_out():
    (engine,), _, _ = parse_vllm_metrics(v1_body({"0": EngineFigures(cache_config=None)}))
    record = engine.as_dict()
    for key in ("num_gpu_blocks", "block_size", "gpu_memory_utilization", "cache_dtype", "enable_prefix_caching"):
        assert key not in record


def test_cache_config_without_engine_label_applies_to_every_engine():
    registry = CollectorRegistry()
    running = Gauge("vllm:num_requests_running", "r", ["engine"], registry=registry)
    running.labels("0").set(1)
    running.labels("1").set(2)
    Gauge("vllm:cache_config_info", "c", ["num_gpu_blocks", "block_size"], registry=registry).labels("500", "32").set(1)
    engines, _, _ = parse_vllm_metrics(generate_latest(registry).decode())
    assert [(e.engine, e.values) for e in engines] == [
        ("0", {"num_requests_running": 1.0, "num_gpu_blocks": 500.0, "block_size": 32.0}),
        ("1", {"num_requests_running": 2.0, "num_gpu_blocks": 500.0, "block_size": 32.0}),
    ]


def test_waiting_by_reason_capacity_is_read():
    registry = CollectorRegistry()
    gauge = Gauge("vllm:num_requests_waiting_by_reason", "w", ["engine", "reason"], registry=registry)
    gauge.labels("0", "capacity").set(6)
    gauge.labels("0", "deferred").set(2)
    (engine,), _, _ = parse_vllm_metrics(generate_latest(registry).decode())
    assert engine.values == {"num_requests_waiting_capacity": 6.0}


@pytest.mark.parametrize(
    "body",
    [
        "<html><body><h1>502 Bad Gateway</h1></body></html>\n",
        "hello world\n",
        '{"detail": "Not Found"}',
        'vllm:kv_cache_usage_perc{engine="0" 0.5\n',
        # Valid vLLM lines followed by a broken one: all or nothing, as Prometheus treats a scrape.
        v1_body() + "process_cpu_seconds_total{ 12\n",
    ],
)
def test_garbage_is_a_parse_error_that_retrying_will_not_fix(body):
    with pytest.raises(ScrapeError) as raised:
        parse_vllm_metrics(body)
    assert str(raised.value).startswith("parse error")
    assert raised.value.retryable is False


def test_simulator_garbage_body_is_a_parse_error():
    from monitor.simulator.faults import GARBAGE_BODY

    with pytest.raises(ScrapeError, match=r"^parse error"):
        parse_vllm_metrics(GARBAGE_BODY)


@pytest.mark.parametrize("body", ["", "\n\n", "# HELP nothing here\n"])
def test_empty_body_is_an_error(body):
    with pytest.raises(ScrapeError) as raised:
        parse_vllm_metrics(body)
    assert str(raised.value) == "empty body: no samples"
    assert raised.value.retryable is False


def test_metrics_page_of_something_else_is_not_a_vllm_server():
    registry = CollectorRegistry()
    Gauge("node_load1", "load", registry=registry).set(0.5)
    with pytest.raises(ScrapeError, match=r"^no vllm metrics in 1 samples$"):
        parse_vllm_metrics(generate_latest(registry).decode())


def test_a_malformed_line_fails_even_once_its_series_was_seen_before():
    parse_vllm_metrics(v1_body())  # the series keys are now remembered
    broken = v1_body().replace("vllm:num_requests_running{", "vllm:num_requests_running{{", 1)
    with pytest.raises(ScrapeError, match=r"^parse error"):
        parse_vllm_metrics(broken)


def test_samples_with_timestamps_and_label_escapes_read_as_the_parser_reads_them(monkeypatch):
    body = (
        'vllm:num_requests_running{engine="0",model_name="a \\"quoted\\" {model}"} 4 1700000000000\n'
        'vllm:num_requests_waiting{engine="0",model_name="a \\"quoted\\" {model}"} +Inf\n'
    )
    monkeypatch.setattr(vllm_module, "_SERIES_KEYS", {})
    (engine,), rejected, _ = parse_vllm_metrics(body)
    assert engine.model_name == 'a "quoted" {model}'
    assert engine.values == {"num_requests_running": 4.0}
    assert rejected == ("num_requests_waiting=inf not finite (engine 0)",)


def test_the_series_key_cache_stays_bounded(monkeypatch):
    monkeypatch.setattr(vllm_module, "_SERIES_KEYS", {})
    monkeypatch.setattr(vllm_module, "_SERIES_KEYS_MAX", 10)
    parse_vllm_metrics(v1_body({str(i): EngineFigures() for i in range(3)}))
    assert len(vllm_module._SERIES_KEYS) <= 10


def _simulator_body(*, legacy: bool, engines: int) -> str:
    snapshots = [
        EngineSnapshot(
            engine_index=index,
            created=1_700_000_000.0,
            num_running=20 + index,
            num_waiting=3,
            kv_cache_usage=0.5 + index / 10,
            prompt_tokens=100_000,
            generation_tokens=25_000,
            preemptions=4,
            prefix_cache_queries=9000,
            prefix_cache_hits=4500,
            request_success={"stop": 90, "length": 9, "abort": 1},
            histograms={
                "time_to_first_token": histogram_snapshot(TTFT_BUCKETS, (0,) * 7 + (100,) + (0,) * 15, 8.0),
                "inter_token_latency": histogram_snapshot(INTER_TOKEN_BUCKETS, (0, 25_000) + (0,) * 18, 500.0),
                "e2e_request_latency": histogram_snapshot(REQUEST_LATENCY_BUCKETS, (0,) * 8 + (100,) + (0,) * 13, 900),
                "request_queue_time": histogram_snapshot(REQUEST_LATENCY_BUCKETS, (100,) + (0,) * 21, 1.0),
                "request_prompt_tokens": histogram_snapshot((1000.0,), (100, 0), 100_000.0),
                "request_generation_tokens": histogram_snapshot((1000.0,), (100, 0), 25_000.0),
            },
        )
        for index in range(engines)
    ]
    config = cache_config_labels(
        num_gpu_blocks=8192, block_size=16, cache_dtype="auto", gpu_memory_utilization=0.92, prefix_caching=True
    )
    collector = VllmCollector(lambda: snapshots, model_name="sim/model", cache_config=config, legacy=legacy)
    return generate_latest(metrics_registry(collector)).decode()


@pytest.mark.parametrize("legacy", [False, True])
def test_the_simulators_exposition_reads_back_exactly(legacy):
    engines, rejected, _ = parse_vllm_metrics(_simulator_body(legacy=legacy, engines=1 if legacy else 2))
    assert rejected == ()
    assert [e.engine for e in engines] == (["0"] if legacy else ["0", "1"])
    record = engines[0].as_dict()
    assert without_histograms(record) == {
        "engine": "0",
        "model_name": "sim/model",
        "kv_cache_usage": 0.5,
        "num_requests_running": 20,
        "num_requests_waiting": 3,
        **({"num_requests_swapped": 0} if legacy else {}),
        "num_preemptions_total": 4,
        "prefix_cache_hits_total": 4500,
        "prefix_cache_queries_total": 9000,
        "prompt_tokens_total": 100_000,
        "generation_tokens_total": 25_000,
        "request_success_total": 100,
        "num_gpu_blocks": 8192,
        "block_size": 16,
        "gpu_memory_utilization": 0.92,
        "cache_dtype": "auto",
        "enable_prefix_caching": True,
    }
    histograms = engines[0].histograms
    assert (histograms["ttft"].count, histograms["ttft"].sum, histograms["ttft"].buckets[7]) == (100, 8.0, (0.1, 100))
    assert histograms["itl"].buckets[:2] == ((0.01, 0.0), (0.025, 25_000.0))
    assert histograms["e2e"].buckets[-1] == (math.inf, 100.0)
    assert len(histograms["e2e"].buckets) == 22
    if not legacy:
        assert engines[1].values["kv_cache_usage"] == 0.6
        assert engines[1].values["num_requests_running"] == 21.0


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://127.0.0.1:8100", "http://127.0.0.1:8100/metrics"),
        ("http://127.0.0.1:8100/", "http://127.0.0.1:8100/metrics"),
        ("http://127.0.0.1:8100/metrics", "http://127.0.0.1:8100/metrics"),
        ("http://127.0.0.1:8100/metrics/", "http://127.0.0.1:8100/metrics"),
        ("https://gpu-7.example/vllm/a", "https://gpu-7.example/vllm/a/metrics"),
        ("http://h:1/metrics?x=1", "http://h:1/metrics?x=1"),
    ],
)
def test_metrics_url_accepts_base_urls_and_metrics_urls(given, expected):
    assert metrics_url(given) == expected


def test_scrape_error_survives_pickling_with_its_retry_flag():
    error = pickle.loads(pickle.dumps(ScrapeError("timeout after 2.0 s", retryable=True)))  # noqa: S301 - our own bytes
    assert (str(error), error.retryable) == ("timeout after 2.0 s", True)
