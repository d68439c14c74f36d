"""VllmScraper over real loopback HTTP (a stdlib server in a thread, and the project's vLLM simulator): what
it asks for, and how each way a target fails comes back as ``up=False`` with a short error."""

from __future__ import annotations

import time

import pytest
from scrape_bodies import MODEL, EngineFigures, Reply, refusing_port, serving, v1_body

from monitor.scrape.vllm import ACCEPT, VllmScraper
from monitor.simulator.faults import Fault
from monitor.simulator.load import LengthDistribution, LoadSpec
from monitor.simulator.spec import ServerSpec, build_server


def test_scrape_asks_for_plain_text_004_and_reads_the_records():
    with serving(Reply(body=v1_body({"0": EngineFigures(kv=0.3), "1": EngineFigures(kv=0.6)}).encode())) as (
        url,
        state,
    ):
        result = VllmScraper(timeout=2.0).scrape(url)
    assert state.accepts == [ACCEPT] == ["text/plain; version=0.0.4"]
    assert state.paths == ["/metrics"]
    assert (result.up, result.error, result.url, result.rejected) == (True, None, url, ())
    assert [(e.engine, e.model_name, e.values["kv_cache_usage"]) for e in result.engines] == [
        ("0", MODEL, 0.3),
        ("1", MODEL, 0.6),
    ]
    assert result.series_count == 88  # 44 per engine
    assert 0 < result.duration_ms < 2000
    assert abs(result.scraped_at - time.time()) < 60


@pytest.mark.parametrize("suffix", ["/metrics", "/"])
def test_a_url_ending_in_metrics_or_a_slash_is_not_doubled(suffix):
    with serving(Reply(body=v1_body().encode())) as (url, state):
        result = VllmScraper(timeout=2.0).scrape(url + suffix)
    assert result.up and state.paths == ["/metrics"]
    assert result.url == url + suffix


def test_one_scraper_reuses_its_connection_across_scrapes():
    with serving(Reply(body=v1_body().encode())) as (url, state):
        scraper = VllmScraper(timeout=2.0)
        results = [scraper.scrape(url) for _ in range(3)]
    assert [r.up for r in results] == [True, True, True] and len(state.paths) == 3


def test_http_500_is_down_with_the_status():
    with serving(Reply(status=500, body=b"internal error")) as (url, _):
        result = VllmScraper(timeout=2.0).scrape(url)
    assert (result.up, result.error, result.engines, result.series_count) == (False, "HTTP 500", (), 0)
    assert result.as_dict()["error"] == "HTTP 500"


def test_http_404_is_down_with_the_status():
    with serving(Reply(status=404, body=b"{}")) as (url, _):
        assert VllmScraper(timeout=2.0).scrape(url).error == "HTTP 404"


def test_a_server_that_never_answers_times_out_within_the_timeout():
    with serving(Reply(body=v1_body().encode(), delay_s=30)) as (url, _):
        started = time.monotonic()
        result = VllmScraper(timeout=0.3).scrape(url)
        elapsed = time.monotonic() - started
    assert (result.up, result.error) == (False, "timeout after 0.3 s")
    assert elapsed < 2.0
    assert 250 <= result.duration_ms < 2000


def test_a_server_dripping_its_body_is_cut_off_by_the_total_deadline():
    with serving(Reply(body=b"x" * 160, drip_s=0.1)) as (url, _):
        result = VllmScraper(timeout=0.25).scrape(url)
    assert (result.up, result.error) == (False, "timeout after 0.25 s")


def test_connection_refused():
    with refusing_port() as port:
        result = VllmScraper(timeout=2.0).scrape(f"http://127.0.0.1:{port}")
    assert (result.up, result.error) == (False, "connection refused")
    assert result.duration_ms < 2000


def test_garbage_over_http_is_down_with_a_parse_error():
    with serving(Reply(body=b"<html>502 Bad Gateway</html>\n")) as (url, _):
        result = VllmScraper(timeout=2.0).scrape(url)
    assert result.up is False and result.error.startswith("parse error")


def test_a_body_that_is_not_utf8_is_a_parse_error():
    with serving(Reply(body=b"vllm:num_requests_running 1\n\xff\xfe\n")) as (url, _):
        result = VllmScraper(timeout=2.0).scrape(url)
    assert result.up is False and result.error.startswith("parse error: body is not UTF-8")


def test_the_body_size_is_capped():
    with serving(Reply(body=v1_body().encode())) as (url, _):
        result = VllmScraper(timeout=2.0, max_body_bytes=1000).scrape(url)
    assert (result.up, result.error) == (False, "body larger than 1000 bytes")


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/metrics", "http://[::1", "127.0.0.1:8000"])
def test_a_bad_url_is_down_not_an_exception(url):
    result = VllmScraper(timeout=1.0).scrape(url)
    assert result.up is False and result.error.startswith("invalid URL")


def test_timeout_must_be_positive():
    with pytest.raises(ValueError, match="timeout"):
        VllmScraper(timeout=0)


def _spec(**overrides) -> ServerSpec:
    values = {
        "num_gpu_blocks": 2000,
        "block_size": 16,
        "max_model_len": 4096,
        "model_name": "sim/scrape-test",
        "load": LoadSpec(rate=5.0, prompt=LengthDistribution("fixed", 500), output=LengthDistribution("fixed", 50)),
        "time_scale": 2.0,
        "max_steps_per_second": 100.0,
        **overrides,
    }
    return ServerSpec(**values)


@pytest.mark.parametrize(("legacy", "engines"), [(False, 2), (True, 1)])
def test_the_simulated_vllm_server_scrapes_cleanly(legacy, engines):
    with build_server(_spec(legacy_metrics=legacy, engines=engines)) as server:
        result = VllmScraper(timeout=2.0).scrape(server.url)
    assert (result.up, result.error, result.rejected) == (True, None, ())
    assert [e.engine for e in result.engines] == [str(i) for i in range(engines)]
    for engine in result.engines:
        record = engine.as_dict()
        assert record["model_name"] == "sim/scrape-test"
        assert (record["num_gpu_blocks"], record["block_size"]) == (2000, 16)
        assert 0.0 <= record["kv_cache_usage"] <= 1.0
        assert ("num_requests_swapped" in record) is legacy
        for key in ("num_requests_running", "num_requests_waiting", "num_preemptions_total", "prompt_tokens_total"):
            assert isinstance(record[key], int)
        assert set(engine.histograms) == {"ttft", "itl", "e2e"}


@pytest.mark.parametrize(("mode", "error"), [("garbage", "parse error"), ("hang", "timeout after 0.3 s")])
def test_the_simulators_faults_come_back_as_down(mode, error):
    with build_server(_spec(fault=Fault(mode))) as server:
        result = VllmScraper(timeout=0.3).scrape(server.url)
    assert result.up is False and result.error.startswith(error)
