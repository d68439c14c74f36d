"""promtool-style checks of the simulator's exposition, V1 and legacy (V0)."""

from __future__ import annotations

import math
import re
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.simulator.engine import Engine, EngineConfig, fixed_step_time
from monitor.simulator.load import LengthDistribution, LoadGenerator, LoadSpec
from monitor.simulator.server import ServerOptions, SimulatorServer, cache_config_labels
from monitor.simulator.simulation import Simulation

# Names as vLLM exports them (shared/reference/vllm-metrics.md); counters as the parser names families.
V1_NAMES = {
    "vllm:cache_config_info": "gauge",
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:num_preemptions": "counter",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:request_success": "counter",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_prompt_tokens": "histogram",
    "vllm:request_generation_tokens": "histogram",
}
V0_NAMES = {
    **{name: kind for name, kind in V1_NAMES.items() if "prefix_cache" not in name},
    "vllm:gpu_cache_usage_perc": "gauge",
    "vllm:num_requests_swapped": "gauge",
    "vllm:gpu_prefix_cache_queries": "counter",
    "vllm:gpu_prefix_cache_hits": "counter",
    "vllm:time_per_output_token_seconds": "histogram",
}
del V0_NAMES["vllm:kv_cache_usage_perc"]
del V0_NAMES["vllm:inter_token_latency_seconds"]

CACHE_INFO_LABELS = {"block_size", "num_gpu_blocks", "cache_dtype", "gpu_memory_utilization", "enable_prefix_caching"}


def exposition(*, legacy: bool = False, engines: int = 2) -> str:
    config = EngineConfig(
        num_gpu_blocks=300,
        block_size=16,
        max_model_len=2048,
        enable_prefix_caching=True,
        step_time=fixed_step_time(0.02),
    )
    load = LoadSpec(
        rate=8.0,
        prompt=LengthDistribution("uniform", 50, 400),
        output=LengthDistribution("uniform", 10, 200),
        shared_prefix_fraction=0.5,
        shared_prefix_tokens=64,
        seed=4,
    )
    simulation = Simulation([Engine(config) for _ in range(engines)], LoadGenerator(load))
    simulation.run_until(40.0)
    options = ServerOptions(
        model_name="meta-llama/Llama-3.1-8B",
        max_model_len=2048,
        legacy_metrics=legacy,
        cache_config=cache_config_labels(
            num_gpu_blocks=300, block_size=16, cache_dtype="auto", gpu_memory_utilization=0.9, prefix_caching=True
        ),
    )
    return SimulatorServer(simulation, options).metrics_text().decode()


@pytest.fixture(scope="module")
def v1_text() -> str:
    return exposition()


@pytest.fixture(scope="module")
def v0_text() -> str:
    return exposition(legacy=True, engines=1)


def families(text: str) -> dict:
    return {family.name: family for family in text_string_to_metric_families(text)}


def test_v1_names_and_types_are_vllms(v1_text):
    parsed = families(v1_text)
    created = {name for name in parsed if name.endswith("_created")}
    assert {name: parsed[name].type for name in parsed if name not in created} == V1_NAMES
    # Every counter and histogram has its _created gauge (a Unix time), and nothing else does.
    expected_created = {f"{name}_created" for name, kind in V1_NAMES.items() if kind in {"counter", "histogram"}}
    assert created == expected_created
    for name in created:
        assert parsed[name].type == "gauge"
        assert all(abs(sample.value - time.time()) < 3600 for sample in parsed[name].samples)


def test_legacy_names_and_types_are_v0s_without_created(v0_text):
    parsed = families(v0_text)
    assert {name: family.type for name, family in parsed.items()} == V0_NAMES
    assert "_created" not in v0_text


def test_every_family_has_help_and_type_lines(v1_text, v0_text):
    for text in (v1_text, v0_text):
        sample_names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and line[0] != "#"}
        helps = set(re.findall(r"^# HELP (\S+) \S", text, re.M))
        types = dict(re.findall(r"^# TYPE (\S+) (\w+)$", text, re.M))
        for name in sample_names:
            family = re.sub(r"_(bucket|count|sum)$", "", name) if name not in types else name
            assert family in helps and family in types, name
        for family in text_string_to_metric_families(text):
            assert family.documentation and family.type in {"gauge", "counter", "histogram"}


def test_counter_samples_end_in_total(v1_text, v0_text):
    for text in (v1_text, v0_text):
        for family in text_string_to_metric_families(text):
            if family.type == "counter":
                assert family.samples and all(s.name == f"{family.name}_total" for s in family.samples)
    assert "vllm:num_preemptions_total{" in v1_text and "vllm:generation_tokens_total{" in v0_text


def test_histogram_buckets_are_monotonic_and_inf_equals_count(v1_text, v0_text):
    for text in (v1_text, v0_text):
        for family in text_string_to_metric_families(text):
            if family.type != "histogram":
                continue
            series: dict = {}
            for sample in family.samples:
                key = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
                series.setdefault(key, {"buckets": [], "count": None, "sum": None})
                if sample.name.endswith("_bucket"):
                    series[key]["buckets"].append((float(sample.labels["le"]), sample.value))
                elif sample.name.endswith("_count"):
                    series[key]["count"] = sample.value
                elif sample.name.endswith("_sum"):
                    series[key]["sum"] = sample.value
            for key, parts in series.items():
                bounds = [bound for bound, _ in parts["buckets"]]
                counts = [count for _, count in parts["buckets"]]
                assert bounds == sorted(bounds) and bounds[-1] == math.inf, (family.name, key)
                assert counts == sorted(counts), (family.name, key)
                assert counts[-1] == parts["count"], (family.name, key)
                assert parts["sum"] is not None and parts["sum"] >= 0
    ttft = families(v1_text)["vllm:time_to_first_token_seconds"]
    assert max(s.value for s in ttft.samples if s.name.endswith("_count")) > 0


def test_v1_label_sets(v1_text):
    for family in text_string_to_metric_families(v1_text):
        for sample in family.samples:
            labels = set(sample.labels) - {"le"}
            if family.name == "vllm:cache_config_info":
                assert CACHE_INFO_LABELS <= labels and "engine" in labels
            elif family.name.startswith("vllm:request_success"):
                assert labels == {"model_name", "engine", "finished_reason"}
            else:
                assert labels == {"model_name", "engine"}, family.name
            if "engine" in labels:
                assert sample.labels["engine"] in {"0", "1"}
    reasons = {s.labels["finished_reason"] for s in families(v1_text)["vllm:request_success"].samples}
    assert reasons == {"stop", "length", "abort"}


def test_legacy_label_sets_have_no_engine(v0_text):
    for family in text_string_to_metric_families(v0_text):
        for sample in family.samples:
            labels = set(sample.labels) - {"le"}
            if family.name == "vllm:cache_config_info":
                assert CACHE_INFO_LABELS <= labels
            elif family.name.startswith("vllm:request_success"):
                assert labels == {"model_name", "finished_reason"}
            else:
                assert labels == {"model_name"}, family.name


def test_values_are_the_engines(v1_text):
    parsed = families(v1_text)
    usage = [s.value for s in parsed["vllm:kv_cache_usage_perc"].samples]
    assert len(usage) == 2 and all(0.0 <= value <= 1.0 for value in usage)
    assert max(s.value for s in parsed["vllm:generation_tokens"].samples) > 0
    assert max(s.value for s in parsed["vllm:prefix_cache_hits"].samples) > 0
    info = parsed["vllm:cache_config_info"].samples[0]
    assert info.value == 1.0 and info.labels["num_gpu_blocks"] == "300" and info.labels["block_size"] == "16"
    assert info.labels["enable_prefix_caching"] == "True"


def test_legacy_with_data_parallel_engines_is_refused():
    config = EngineConfig(num_gpu_blocks=100, max_model_len=1024)
    options = ServerOptions(model_name="m", max_model_len=1024, cache_config={}, legacy_metrics=True)
    with pytest.raises(ValueError, match="one engine"):
        SimulatorServer(Simulation([Engine(config), Engine(config)]), options)
