"""End to end over HTTP: a simulated server on a free port, scraped with requests, and its fault modes."""

from __future__ import annotations

import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from monitor.simulator.faults import Fault
from monitor.simulator.load import LengthDistribution, LoadSpec
from monitor.simulator.spec import ServerSpec, build_server

PLAIN_0_0_4 = "text/plain; version=0.0.4; charset=utf-8"


def busy_spec(**overrides) -> ServerSpec:
    values = {
        "num_gpu_blocks": 3000,
        "block_size": 16,
        "max_model_len": 8192,
        "model_name": "sim/test-model",
        "load": LoadSpec(
            rate=20.0, prompt=LengthDistribution("fixed", 1000), output=LengthDistribution("fixed", 400), seed=9
        ),
        "time_scale": 4.0,
        "max_steps_per_second": 400.0,
        **overrides,
    }
    return ServerSpec(**values)


@pytest.fixture
def server():
    with build_server(busy_spec()) as running:
        yield running


def scrape(url: str, **kwargs) -> dict:
    response = requests.get(f"{url}/metrics", timeout=kwargs.pop("timeout", 5), **kwargs)
    response.raise_for_status()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels) -> float:
    matches = [
        v for (n, ls), v in samples.items() if n == name and all(dict(ls).get(k) == w for k, w in labels.items())
    ]
    assert matches, name
    return sum(matches)


def wait_for(condition, *, timeout: float = 10.0, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(every)
    raise AssertionError("condition not met in time")


def test_usage_rises_under_load_when_scraped_over_http(server):
    first = scrape(server.url)
    assert value(first, "vllm:kv_cache_usage_perc") < 0.2
    later = wait_for(lambda: (s := scrape(server.url)) and value(s, "vllm:kv_cache_usage_perc") > 0.3 and s)
    assert value(later, "vllm:kv_cache_usage_perc") > value(first, "vllm:kv_cache_usage_perc")
    assert value(later, "vllm:num_requests_running", model_name="sim/test-model", engine="0") > 0
    assert value(later, "vllm:prompt_tokens_total") >= value(first, "vllm:prompt_tokens_total")


def test_metrics_are_plain_text_004_whatever_the_accept_header(server):
    for accept in ("application/openmetrics-text; version=1.0.0", "text/plain", "*/*"):
        response = requests.get(f"{server.url}/metrics", headers={"Accept": accept}, timeout=5)
        assert response.status_code == 200
        assert response.headers["Content-Type"] == PLAIN_0_0_4
        assert "vllm:kv_cache_usage_perc{" in response.text  # colons kept, not rewritten to underscores


def test_health_models_and_unknown_paths(server):
    health = requests.get(f"{server.url}/health", timeout=5)
    assert health.status_code == 200 and health.content == b""
    models = requests.get(f"{server.url}/v1/models", timeout=5).json()
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["sim/test-model"]
    assert models["data"][0]["max_model_len"] == 8192
    missing = requests.get(f"{server.url}/nope", timeout=5)
    assert missing.status_code == 404 and "error" in missing.json()


def test_hang_fault_times_the_scraper_out_until_cleared(server):
    assert requests.post(f"{server.url}/fault?mode=hang", timeout=5).json()["mode"] == "hang"
    wait_for(lambda: server.fault.mode == "hang")
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(f"{server.url}/metrics", timeout=0.5)
    assert requests.get(f"{server.url}/fault", timeout=5).json()["mode"] == "hang"
    requests.post(f"{server.url}/fault", data={"mode": "none"}, timeout=5)
    wait_for(lambda: server.fault.mode == "none")
    assert scrape(server.url)


def test_slow_fault_delays_every_answer(server):
    requests.post(f"{server.url}/fault?mode=slow&delay=0.6", timeout=5)
    wait_for(lambda: server.fault.mode == "slow")
    started = time.monotonic()
    assert requests.get(f"{server.url}/health", timeout=5).status_code == 200
    assert time.monotonic() - started >= 0.6
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(f"{server.url}/metrics", timeout=0.3)


def test_garbage_fault_answers_200_with_unparseable_text(server):
    requests.post(f"{server.url}/fault?mode=garbage", timeout=5)
    wait_for(lambda: server.fault.mode == "garbage")
    response = requests.get(f"{server.url}/metrics", timeout=5)
    assert response.status_code == 200
    with pytest.raises(ValueError):
        list(text_string_to_metric_families(response.text))


def test_restart_fault_resets_counters_and_created_stamps(server):
    before = wait_for(lambda: (s := scrape(server.url)) and value(s, "vllm:generation_tokens_total") > 2000 and s)
    time.sleep(0.05)  # so the new _created differs even on a coarse clock
    requests.post(f"{server.url}/fault?mode=restart", timeout=5)
    wait_for(lambda: server.fault.mode == "none" and server.simulation.engines[0].stats.created > 0)
    after = wait_for(
        lambda: (
            (s := scrape(server.url))
            and value(s, "vllm:generation_tokens_created") > value(before, "vllm:generation_tokens_created")
            and s
        )
    )
    assert value(after, "vllm:generation_tokens_total") < value(before, "vllm:generation_tokens_total")
    ttft_count = "vllm:time_to_first_token_seconds_count"
    assert value(after, ttft_count) < value(before, ttft_count)


def test_down_fault_refuses_connections_then_comes_back_on_the_same_port(server):
    port = server.port
    requests.post(f"{server.url}/fault?mode=down&duration=1", timeout=5)
    wait_for(lambda: not server.listening)
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"{server.url}/health", timeout=1)
    wait_for(lambda: server.listening, timeout=5)
    assert server.port == port
    assert requests.get(f"{server.url}/health", timeout=5).status_code == 200


def test_a_fault_with_a_duration_clears_itself(server):
    requests.post(f"{server.url}/fault?mode=garbage&duration=0.5", timeout=5)
    wait_for(lambda: server.fault.mode == "garbage")
    wait_for(lambda: server.fault.mode == "none", timeout=5)
    assert scrape(server.url)


@pytest.mark.parametrize(
    ("query", "field"),
    [("mode=explode", "mode"), ("", "mode"), ("mode=slow&delay=abc", "delay"), ("mode=down&duration=-1", "duration")],
)
def test_bad_fault_requests_get_400_with_field_errors(server, query, field):
    response = requests.post(f"{server.url}/fault?{query}", timeout=5)
    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert server.fault.mode == "none"


def test_fault_set_at_start():
    with build_server(busy_spec(fault=Fault("garbage"))) as running:
        response = requests.get(f"{running.url}/metrics", timeout=5)
        assert response.status_code == 200 and not response.text.startswith("# HELP")


def test_stop_returns_promptly_even_with_a_hanging_request():
    running = build_server(busy_spec(fault=Fault("hang"))).start()
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(f"{running.url}/metrics", timeout=0.3)
    started = time.monotonic()
    running.stop()
    assert time.monotonic() - started < 3
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"{running.url}/health", timeout=1)


def test_legacy_server_over_http_speaks_v0():
    with build_server(busy_spec(legacy_metrics=True)) as running:
        samples = scrape(running.url)
        names = {name for name, _ in samples}
        assert "vllm:gpu_cache_usage_perc" in names and "vllm:kv_cache_usage_perc" not in names
        assert all("engine" not in dict(labels) for _, labels in samples)


def test_data_parallel_server_labels_each_engine():
    with build_server(busy_spec(engines=3)) as running:
        samples = wait_for(
            lambda: (
                (s := scrape(running.url))
                and all(value(s, "vllm:num_requests_running", engine=str(i)) > 0 for i in range(3))
                and s
            )
        )
        engines = {dict(labels)["engine"] for name, labels in samples if name == "vllm:kv_cache_usage_perc"}
        assert engines == {"0", "1", "2"}


def test_a_deepseek_v4_plan_is_labelled_with_the_smallest_groups_block():
    """vLLM sets cache_config.block_size to the smallest KV cache group's block after planning (v1/engine/core.py):
    4 for DeepSeek-V4-Flash (its window-8 compressor states), while its pool counts 256-token blocks. The simulator
    labels cache_config_info the same way, with the plan's block count (107,134 at tp 8, 1M tokens, 100 GiB)."""
    from planner.sizing import PlanInputs, catalog_gpus, catalog_models, compute_plan

    plan = compute_plan(
        PlanInputs(
            model=catalog_models()["deepseek-v4-flash"],
            gpu=catalog_gpus()["h200"],
            tensor_parallel_size=8,
            max_model_len=1_048_576,
            kv_cache_memory_gib=100,
        ),
        advice=False,
    )
    server = build_server(ServerSpec(plan=plan, model_name="deepseek-ai/DeepSeek-V4-Flash"))
    labels = server.options.cache_config
    assert (labels["num_gpu_blocks"], labels["block_size"]) == ("107134", "4")
