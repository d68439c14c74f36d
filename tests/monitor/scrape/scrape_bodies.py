"""/metrics bodies for the scraper tests, built with prometheus_client as vLLM builds them (never typed by hand),
and a loopback HTTP server that serves whatever a test tells it to."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    enable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.registry import Collector

from monitor.simulator.stats import HistogramSnapshot

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
TTFT_BOUNDS = (0.1, 0.5, 1.0)
ITL_BOUNDS = (0.01, 0.05)
E2E_BOUNDS = (1.0, 10.0)

CACHE_CONFIG = {
    "block_size": "16",
    "cache_dtype": "fp8",
    "enable_prefix_caching": "True",
    "gpu_memory_utilization": "0.9",
    "num_cpu_blocks": "0",
    "num_gpu_blocks": "27064",
    "num_gpu_blocks_override": "None",
    "swap_space_bytes": "0",
}


@dataclass
class EngineFigures:
    """What one engine exposes; None leaves the series out."""

    kv: float | None = 0.25
    running: float = 3
    waiting: float = 1
    preemptions: float = 7
    prefix_queries: float = 1200
    prefix_hits: float = 300
    prompt_tokens: float = 4096
    generation_tokens: float = 512
    success: dict[str, float] = field(default_factory=lambda: {"stop": 5, "length": 2, "abort": 1})
    ttft: tuple[float, ...] = (0.05, 0.3, 2.0)
    itl: tuple[float, ...] = (0.02, 0.02, 0.03, 0.2)
    e2e: tuple[float, ...] = (0.5, 4.0)
    cache_config: dict[str, str] | None = field(default_factory=lambda: dict(CACHE_CONFIG))


def v1_registry(engines: dict[str, EngineFigures], *, model: str = MODEL) -> CollectorRegistry:
    """A single-process V1 server (vllm/v1/metrics/loggers.py): labels model_name and engine; counters and
    histograms carry ``_created`` as prometheus_client adds it."""
    registry = CollectorRegistry()
    labels = ["model_name", "engine"]
    kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels, registry=registry)
    running = Gauge("vllm:num_requests_running", "Running.", labels, registry=registry)
    waiting = Gauge("vllm:num_requests_waiting", "Waiting.", labels, registry=registry)
    preemptions = Counter("vllm:num_preemptions", "Preemptions.", labels, registry=registry)
    queries = Counter("vllm:prefix_cache_queries", "Prefix cache queries.", labels, registry=registry)
    hits = Counter("vllm:prefix_cache_hits", "Prefix cache hits.", labels, registry=registry)
    prompt = Counter("vllm:prompt_tokens", "Prefill tokens.", labels, registry=registry)
    generation = Counter("vllm:generation_tokens", "Generation tokens.", labels, registry=registry)
    success = Counter("vllm:request_success", "Finished requests.", [*labels, "finished_reason"], registry=registry)
    ttft = Histogram("vllm:time_to_first_token_seconds", "TTFT.", labels, buckets=TTFT_BOUNDS, registry=registry)
    itl = Histogram("vllm:inter_token_latency_seconds", "ITL.", labels, buckets=ITL_BOUNDS, registry=registry)
    e2e = Histogram("vllm:e2e_request_latency_seconds", "E2E.", labels, buckets=E2E_BOUNDS, registry=registry)
    # A histogram the scraper does not read: its buckets must not leak into anything.
    queue = Histogram("vllm:request_queue_time_seconds", "Queue.", labels, buckets=(1.0,), registry=registry)
    info_names = [*sorted(CACHE_CONFIG), "engine"]
    info = Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", info_names, registry=registry)
    for engine, figures in engines.items():
        values = (model, engine)
        if figures.kv is not None:
            kv.labels(*values).set(figures.kv)
        running.labels(*values).set(figures.running)
        waiting.labels(*values).set(figures.waiting)
        _count(preemptions.labels(*values), figures.preemptions)
        _count(queries.labels(*values), figures.prefix_queries)
        _count(hits.labels(*values), figures.prefix_hits)
        _count(prompt.labels(*values), figures.prompt_tokens)
        _count(generation.labels(*values), figures.generation_tokens)
        for reason, count in figures.success.items():
            _count(success.labels(*values, reason), count)
        for histogram, observations in ((ttft, figures.ttft), (itl, figures.itl), (e2e, figures.e2e)):
            child = histogram.labels(*values)
            for observation in observations:
                child.observe(observation)
        queue.labels(*values).observe(0.5)
        if figures.cache_config is not None:
            config = figures.cache_config
            info.labels(*[config[name] for name in sorted(CACHE_CONFIG)], engine).set(1)
    return registry


def _count(child: Counter, amount: float) -> None:
    if amount:
        child.inc(amount)


def v1_body(engines: dict[str, EngineFigures] | None = None, **kwargs: object) -> str:
    return generate_latest(v1_registry(engines or {"0": EngineFigures()}, **kwargs)).decode()


def openmetrics_body(engines: dict[str, EngineFigures] | None = None) -> str:
    """What a server answers when asked for OpenMetrics: recent prometheus_client rewrites "vllm:" to "vllm_"."""
    return generate_openmetrics(v1_registry(engines or {"0": EngineFigures()})).decode()


def v0_body() -> str:
    """A V0 server (vllm/engine/metrics.py): no engine label, older names, no _created samples."""
    registry = CollectorRegistry()
    labels = ["model_name"]

    def gauge(name: str, value: float) -> None:
        Gauge(name, name, labels, registry=registry).labels(MODEL).set(value)

    def counter(name: str, value: float) -> None:
        Counter(name, name, labels, registry=registry).labels(MODEL).inc(value)

    gauge("vllm:gpu_cache_usage_perc", 0.5)
    gauge("vllm:num_requests_running", 4)
    gauge("vllm:num_requests_waiting", 2)
    gauge("vllm:num_requests_swapped", 1)
    counter("vllm:num_preemptions", 9)
    counter("vllm:gpu_prefix_cache_queries", 800)
    counter("vllm:gpu_prefix_cache_hits", 200)
    counter("vllm:prompt_tokens", 1000)
    counter("vllm:generation_tokens", 100)
    tpot = Histogram("vllm:time_per_output_token_seconds", "TPOT.", labels, buckets=ITL_BOUNDS, registry=registry)
    tpot.labels(MODEL).observe(0.03)
    info = Gauge("vllm:cache_config_info", "CacheConfig", sorted(CACHE_CONFIG), registry=registry)
    info.labels(*[CACHE_CONFIG[name] for name in sorted(CACHE_CONFIG)]).set(1)
    # V0 servers ran with prometheus_client's created series switched off; the switch is global, so only
    # for this one exposition.
    disable_created_metrics()
    try:
        return generate_latest(registry).decode()
    finally:
        enable_created_metrics()


class _CopiesCollector(Collector):
    """One gauge exported once per API-server process with a pid label, as some releases do."""

    def __init__(self, name: str, copies: dict[str, float], engine: str = "0") -> None:
        self.name, self.copies, self.engine = name, copies, engine

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self.name, self.name, labels=["model_name", "engine", "pid"])
        for pid, value in self.copies.items():
            family.add_metric([MODEL, self.engine, pid], value)
        yield family


def multiprocess_body(kv_copies: dict[str, float], running_copies: dict[str, float]) -> str:
    registry = CollectorRegistry()
    registry.register(_CopiesCollector("vllm:kv_cache_usage_perc", kv_copies))
    registry.register(_CopiesCollector("vllm:num_requests_running", running_copies))
    return generate_latest(registry).decode()


def histogram_snapshot(bounds: tuple[float, ...], per_bucket: tuple[int, ...], total: float) -> HistogramSnapshot:
    cumulative: list[int] = []
    running = 0
    for count in per_bucket:
        running += count
        cumulative.append(running)
    return HistogramSnapshot(bounds=bounds, cumulative=tuple(cumulative), sum=total)


# --- a loopback HTTP server -----------------------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; version=0.0.4; charset=utf-8"
    delay_s: float = 0.0  # before answering
    drip_s: float = 0.0  # between 16-byte pieces of the body


@dataclass
class ServedState:
    reply: Reply = field(default_factory=Reply)
    accepts: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn serves vLLM
    disable_nagle_algorithm = True  # as uvicorn does: headers and body go out as two writes
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        state = self.server.state
        state.accepts.append(self.headers.get("Accept", ""))
        state.paths.append(self.path)
        reply = state.reply
        if reply.delay_s and state.release.wait(reply.delay_s):
            return
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            if reply.drip_s:
                for start in range(0, len(reply.body), 16):
                    self.wfile.write(reply.body[start : start + 16])
                    self.wfile.flush()
                    if state.release.wait(reply.drip_s):
                        return
            else:
                self.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, state: ServedState) -> None:
        self.state = state
        super().__init__(("127.0.0.1", 0), _Handler)


@contextmanager
def serving(reply: Reply | None = None) -> Iterator[tuple[str, ServedState]]:
    """(base URL, state) of a server on a free loopback port; set ``state.reply`` to change the answer."""
    state = ServedState(reply=reply or Reply())
    server = _Server(state)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()


@contextmanager
def refusing_port() -> Iterator[int]:
    """A port bound but not listening: connecting to it is refused, and no other test can take it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()
