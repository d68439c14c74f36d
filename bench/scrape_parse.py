"""How long one scrape of a vLLM server costs the agent: HTTP GET plus parse of a ~300-series body.

Run: .venv/bin/python bench/scrape_parse.py [--iterations N]

The body is the project's simulator's /metrics for a 2-engine (data-parallel) server after 30 simulated
seconds of load: the V1 families vLLM exports, ``_created`` included (302 samples). It is served from a
loopback ``http.server`` in another process speaking HTTP/1.1 keep-alive, as uvicorn serves vLLM.

Figures (median and p95 over N iterations, one process):
1. ``VllmScraper.scrape``: GET + parse into engine records (the agent's path);
2. ``parse_vllm_metrics`` alone, warm (the steady state: the same series every scrape) and cold (its series-key
   cache emptied before every parse, as on the first scrape of a server);
3. the baseline, measured in the same run and interleaved with (1) so machine load hits both alike: the
   same GET (same session, same Accept header) then ``text_string_to_metric_families`` over the whole body,
   every sample collected into a dict keyed by name and labels: no name filter, no cache.
Target: scrape+parse under 5 ms.

``measure_scrape_parse(iterations)`` returns the figures as a dict, for bench/ingest.py.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import requests
from prometheus_client.parser import text_string_to_metric_families

from monitor.scrape import vllm as vllm_scrape
from monitor.scrape.vllm import ACCEPT, VllmScraper, parse_vllm_metrics
from monitor.simulator.load import LengthDistribution, LoadSpec
from monitor.simulator.spec import ServerSpec, build_server

BASELINE = (
    "requests GET (same session and Accept) + text_string_to_metric_families over the whole body, "
    "every sample into a dict (no name filter, no cache)"
)


def build_body() -> bytes:
    """A busy 2-engine server's /metrics, from the simulator (not started: no threads, no port)."""
    spec = ServerSpec(
        num_gpu_blocks=3000,
        block_size=16,
        max_model_len=8192,
        model_name="meta-llama/Llama-3.1-8B-Instruct",
        engines=2,
        load=LoadSpec(
            rate=20.0, prompt=LengthDistribution("fixed", 1000), output=LengthDistribution("fixed", 400), seed=9
        ),
    )
    server = build_server(spec)
    server.simulation.run_until(30.0)
    return server.metrics_text()


class _MetricsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as uvicorn does: headers and body go out as two writes
    body = b""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


def _serve_forever(body: bytes, ports: Connection) -> None:
    _MetricsHandler.body = body
    server = ThreadingHTTPServer(("127.0.0.1", 0), _MetricsHandler)
    ports.send(server.server_address[1])
    server.serve_forever()


@contextmanager
def serve(body: bytes) -> Iterator[str]:
    """The body from another process, as vLLM is: a server thread in this one would fight the scraper for the
    GIL and add its switch interval (5 ms) to every request."""
    receive, send = multiprocessing.get_context("fork").Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(target=_serve_forever, args=(body, send), daemon=True)
    process.start()
    try:
        if not receive.poll(30):
            raise RuntimeError("the metrics server did not start")
        yield f"http://127.0.0.1:{receive.recv()}"
    finally:
        process.terminate()
        process.join(5)


def baseline_parse(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _ms(seconds: list[float]) -> tuple[float, float]:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


def calibration_ms() -> float:
    """An empty loop of a million steps (about 15-25 ms on an idle current core): read the figures against it
    on a shared machine."""
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(1_000_000):
            pass
        runs.append(time.perf_counter() - started)
    return statistics.median(runs) * 1000


def measure_scrape_parse(iterations: int = 300) -> dict[str, Any]:
    body = build_body()
    text = body.decode()
    engines, rejected, series = parse_vllm_metrics(text)
    assert len(engines) == 2 and not rejected, (engines, rejected)

    ours: list[float] = []
    base: list[float] = []
    with serve(body) as url:
        scraper = VllmScraper(timeout=2.0)
        session = requests.Session()
        for _ in range(10):  # connections, caches
            scraper.scrape(url)
            session.get(f"{url}/metrics", headers={"Accept": ACCEPT}, timeout=2.0).close()
        for _ in range(iterations):
            started = time.perf_counter()
            result = scraper.scrape(url)
            ours.append(time.perf_counter() - started)
            assert result.up, result.error
            started = time.perf_counter()
            response = session.get(f"{url}/metrics", headers={"Accept": ACCEPT}, timeout=2.0)
            samples = baseline_parse(response.text)
            base.append(time.perf_counter() - started)
        assert len(samples) == series

    parse_warm: list[float] = []
    parse_cold: list[float] = []
    parse_base: list[float] = []
    for index in range(iterations):
        started = time.perf_counter()
        parse_vllm_metrics(text)
        parse_warm.append(time.perf_counter() - started)
        started = time.perf_counter()
        baseline_parse(text)
        parse_base.append(time.perf_counter() - started)
        if index < max(20, iterations // 5):
            vllm_scrape._SERIES_KEYS.clear()
            started = time.perf_counter()
            parse_vllm_metrics(text)
            parse_cold.append(time.perf_counter() - started)

    scrape_p50, scrape_p95 = _ms(ours)
    base_p50, base_p95 = _ms(base)
    warm_p50, warm_p95 = _ms(parse_warm)
    cold_p50, cold_p95 = _ms(parse_cold)
    base_parse_p50, base_parse_p95 = _ms(parse_base)
    return {
        "series": series,
        "body_bytes": len(body),
        "iterations": iterations,
        "scrape_parse_p50_ms": scrape_p50,
        "scrape_parse_p95_ms": scrape_p95,
        "parse_p50_ms": warm_p50,
        "parse_p95_ms": warm_p95,
        "parse_cold_p50_ms": cold_p50,
        "parse_cold_p95_ms": cold_p95,
        "baseline_p50_ms": base_p50,
        "baseline_p95_ms": base_p95,
        "baseline_parse_p50_ms": base_parse_p50,
        "baseline_parse_p95_ms": base_parse_p95,
        "ratio": base_p50 / scrape_p50,
        "baseline": BASELINE,
        "calibration_loop_ms": calibration_ms(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300)
    figures = measure_scrape_parse(parser.parse_args().iterations)
    print(f"body: {figures['series']} samples, {figures['body_bytes']} bytes, {figures['iterations']} iterations")
    print(f"calibration: empty loop of 1e6 steps {figures['calibration_loop_ms']:.0f} ms (idle current core: 15-25)")
    print(
        f"scrape+parse (VllmScraper.scrape): p50 {figures['scrape_parse_p50_ms']:.2f} ms, "
        f"p95 {figures['scrape_parse_p95_ms']:.2f} ms"
    )
    print(f"parse alone, warm: p50 {figures['parse_p50_ms']:.2f} ms, p95 {figures['parse_p95_ms']:.2f} ms")
    print(
        f"parse alone, cold (first scrape of a server): p50 {figures['parse_cold_p50_ms']:.2f} ms, "
        f"p95 {figures['parse_cold_p95_ms']:.2f} ms"
    )
    print(f"baseline: {figures['baseline']}")
    print(
        f"baseline scrape+parse: p50 {figures['baseline_p50_ms']:.2f} ms, p95 {figures['baseline_p95_ms']:.2f} ms; "
        f"parse alone p50 {figures['baseline_parse_p50_ms']:.2f} ms"
    )
    print(
        f"scrape_parse: {figures['scrape_parse_p50_ms']:.2f} ms p50 (scrape+parse, {figures['series']} series), "
        f"baseline {figures['baseline_p50_ms']:.2f} ms, {figures['ratio']:.1f}x"
    )


if __name__ == "__main__":
    main()
