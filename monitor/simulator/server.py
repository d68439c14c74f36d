"""A simulated vLLM server: what vLLM's API server exposes to a monitor, over stdlib HTTP.

- ``GET /metrics``: the Prometheus text format 0.0.4 (``generate_latest``), whatever the Accept header.
- ``GET /health``: 200 with an empty body. ``GET /v1/models``: the OpenAI-style model list.
- ``GET|POST /fault``: read or set a fault (``?mode=slow&delay=3&duration=60``, see ``faults.py``).
- ``GET /sim/state``: the simulation's state as JSON (debugging, not part of vLLM).

A background thread drives the engines against the wall clock times ``time_scale``; it never runs more
than ``max_steps_per_second`` steps per engine per second, so a fleet keeps to a small CPU budget. When it
cannot keep up, simulated time runs slower than asked instead of piling up a backlog.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from .faults import GARBAGE_BODY, Fault, parse_fault
from .metrics import EngineSnapshot, VllmCollector, engine_snapshot, metrics_registry
from .simulation import Simulation

logger = logging.getLogger(__name__)

TICK_SECONDS = 0.05
DEFAULT_MAX_STEPS_PER_SECOND = 100.0
HANG_LIMIT_SECONDS = 3600.0
SOCKET_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class ServerOptions:
    model_name: str
    max_model_len: int
    cache_config: dict[str, str]
    host: str = "127.0.0.1"
    port: int = 0  # 0: any free port (see SimulatorServer.port once started)
    legacy_metrics: bool = False
    time_scale: float = 1.0
    max_steps_per_second: float = DEFAULT_MAX_STEPS_PER_SECOND


def cache_config_labels(
    *, num_gpu_blocks: int, block_size: int, cache_dtype: str, gpu_memory_utilization: float, prefix_caching: bool
) -> dict[str, str]:
    """The ``vllm:cache_config_info`` labels, spelled as vLLM's ``CacheConfig.metrics_info()`` does (``str()``
    of each field)."""
    return {
        "block_size": str(block_size),
        "cache_dtype": cache_dtype,
        "enable_prefix_caching": str(prefix_caching),
        "gpu_memory_utilization": str(gpu_memory_utilization),
        "num_cpu_blocks": "0",
        "num_gpu_blocks": str(num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "swap_space_bytes": "0",
    }


def _is_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)


class _Handler(BaseHTTPRequestHandler):
    server_version = "vllm-simulator"
    server: _HttpServer
    # Per socket operation: a client that connects and sends nothing (or reads nothing) frees its thread after
    # this long instead of holding it forever.
    timeout = SOCKET_TIMEOUT_SECONDS

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        owner = self.server.owner
        url = urlsplit(self.path)
        try:
            if url.path == "/fault":
                self._fault(method, url.query)
                return
            fault = owner.fault
            if fault.mode == "hang":
                owner.wait_while_hanging()
                self.close_connection = True
                return  # nothing written: the client sees a timeout or a dropped connection
            if fault.mode == "slow":
                owner.sleep(fault.delay_s)
            if method != "GET":
                self._json(405, {"error": "method not allowed"})
            elif url.path == "/metrics":
                if owner.fault.mode == "garbage":
                    self._send(200, GARBAGE_BODY.encode(), "text/plain; charset=utf-8")
                else:
                    self._send(200, owner.metrics_text(), CONTENT_TYPE_PLAIN_0_0_4)
            elif url.path == "/health":
                self._send(200, b"", "text/plain")
            elif url.path == "/v1/models":
                self._json(200, owner.models_body())
            elif url.path == "/sim/state":
                self._json(200, owner.state())
            else:
                self._json(404, {"error": f"no route {url.path}"})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a scraper's timeout): nothing to answer
        except Exception:
            logger.exception("simulator request failed: %s", self.path)
            self._json(500, {"error": "internal error"})

    def _fault(self, method: str, query: str) -> None:
        owner = self.server.owner
        if not owner.remote_fault and not _is_loopback(self.client_address[0]):
            # Faults stop or stall the server: only a client on this machine may set them, unless asked for.
            self._json(403, {"error": "/fault answers loopback clients only (--allow-remote-fault to change)"})
            return
        if method == "GET":
            self._json(200, owner.fault_body())
            return
        params = parse_qs(query)
        length = int(self.headers.get("Content-Length") or 0)
        if 0 < length <= 4096 and "x-www-form-urlencoded" in (self.headers.get("Content-Type") or ""):
            params = {**parse_qs(self.rfile.read(length).decode("utf-8", "replace")), **params}

        def one(name: str) -> str | None:
            values = params.get(name)
            return values[-1] if values else None

        fault, errors = parse_fault(one("mode"), one("delay"), one("duration"))
        if fault is None:
            self._json(400, {"errors": errors})
            return
        # Answer first: "down" stops the very listener this request came through.
        self._json(200, {"mode": fault.mode, "delay": fault.delay_s, "duration": fault.duration_s})
        threading.Thread(target=owner.set_fault, args=(fault,), daemon=True).start()

    def _json(self, status: int, body: Any) -> None:
        self._send(status, json.dumps(body).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], owner: SimulatorServer) -> None:
        self.owner = owner
        super().__init__(address, _Handler)


class SimulatorServer:
    """One simulated vLLM API server in front of ``simulation``'s engines."""

    def __init__(self, simulation: Simulation, options: ServerOptions, *, fault: Fault | None = None) -> None:
        if options.time_scale <= 0:
            raise ValueError("time_scale must be > 0")
        if options.legacy_metrics and len(simulation.engines) > 1:
            raise ValueError("legacy (V0) metrics have no engine label: use one engine")
        self.simulation = simulation
        self.options = options
        self.lock = threading.Lock()
        self.fault = Fault()
        # /fault from other machines: off unless the operator asks (simulate_vllm --allow-remote-fault).
        self.remote_fault = False
        self._initial_fault = fault
        self._fault_generation = 0
        self._stopping = threading.Event()
        self._fault_changed = threading.Condition()
        self._httpd: _HttpServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._driver: threading.Thread | None = None
        self.port = options.port
        self.created = int(time.time())
        self.lagging = False
        self.registry = metrics_registry(
            VllmCollector(
                self._snapshots,
                model_name=options.model_name,
                cache_config=options.cache_config,
                legacy=options.legacy_metrics,
            )
        )

    @property
    def url(self) -> str:
        return f"http://{self.options.host}:{self.port}"

    @property
    def listening(self) -> bool:
        return self._httpd is not None

    # --- life cycle -------------------------------------------------------------------------------------

    def start(self) -> SimulatorServer:
        self._listen()
        self._driver = threading.Thread(target=self._drive, name=f"sim-driver-{self.port}", daemon=True)
        self._driver.start()
        if self._initial_fault is not None and self._initial_fault.mode != "none":
            self.set_fault(self._initial_fault)
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._fault_changed:
            self._fault_changed.notify_all()
        self._close_listener()
        if self._driver is not None and self._driver is not threading.current_thread():
            self._driver.join(timeout=5)

    def __enter__(self) -> SimulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _listen(self) -> None:
        httpd = _HttpServer((self.options.host, self.port), self)
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._serve_thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.2}, name=f"sim-http-{self.port}", daemon=True
        )
        self._serve_thread.start()

    def _close_listener(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    # --- faults ---------------------------------------------------------------------------------------

    def set_fault(self, fault: Fault) -> None:
        """Apply a fault now; with a duration it clears itself (a "down" server listens again)."""
        with self._fault_changed:
            self._fault_generation += 1
            generation = self._fault_generation
            if fault.mode == "restart":
                with self.lock:
                    self.simulation.reset()
                # A restart with a duration is also down for that long, as a real one would be.
                self.fault = Fault("down", duration_s=fault.duration_s) if fault.duration_s else Fault()
            else:
                self.fault = fault
            self._fault_changed.notify_all()
            current = self.fault
        if current.mode == "down" and self.listening:
            self._close_listener()
        elif current.mode != "down" and not self.listening and not self._stopping.is_set():
            self._listen()
        if current.duration_s:
            timer = threading.Timer(current.duration_s, self._expire_fault, args=(generation,))
            timer.daemon = True
            timer.start()

    def _expire_fault(self, generation: int) -> None:
        if generation == self._fault_generation and not self._stopping.is_set():
            self.set_fault(Fault())

    def wait_while_hanging(self) -> None:
        deadline = time.monotonic() + HANG_LIMIT_SECONDS
        with self._fault_changed:
            while self.fault.mode == "hang" and not self._stopping.is_set() and time.monotonic() < deadline:
                self._fault_changed.wait(timeout=1.0)

    def sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def fault_body(self) -> dict[str, Any]:
        fault = self.fault
        return {"mode": fault.mode, "delay": fault.delay_s, "duration": fault.duration_s}

    # --- what the HTTP handlers serve -----------------------------------------------------------------

    def _snapshots(self) -> list[EngineSnapshot]:
        with self.lock:
            return [
                engine_snapshot(
                    engine_index=index,
                    stats=engine.stats,
                    num_running=engine.num_running,
                    num_waiting=engine.num_waiting,
                    usage=engine.pool.usage(),
                )
                for index, engine in enumerate(self.simulation.engines)
            ]

    def metrics_text(self) -> bytes:
        return generate_latest(self.registry)

    def models_body(self) -> dict[str, Any]:
        name = self.options.model_name
        return {
            "object": "list",
            "data": [
                {
                    "id": name,
                    "object": "model",
                    "created": self.created,
                    "owned_by": "vllm",
                    "root": name,
                    "parent": None,
                    "max_model_len": self.options.max_model_len,
                    "permission": [],
                }
            ],
        }

    def state(self) -> dict[str, Any]:
        with self.lock:
            simulation = self.simulation
            return {
                "model": self.options.model_name,
                "clock_s": simulation.clock,
                "time_scale": self.options.time_scale,
                "lagging": self.lagging,
                "fault": self.fault.mode,
                "engines": [
                    {
                        "engine": index,
                        "num_gpu_blocks": engine.config.num_gpu_blocks,
                        "block_size": engine.config.block_size,
                        "used_blocks": engine.pool.num_used_blocks,
                        "free_blocks": engine.pool.num_free_blocks,
                        "kv_cache_usage": engine.pool.usage(),
                        "running": engine.num_running,
                        "waiting": engine.num_waiting,
                        "preemptions": engine.stats.preemptions,
                        "steps": engine.num_steps,
                    }
                    for index, engine in enumerate(simulation.engines)
                ],
            }

    # --- the real-time driver -------------------------------------------------------------------------

    def _drive(self) -> None:
        options = self.options
        step_budget = max(1, round(options.max_steps_per_second * len(self.simulation.engines) * TICK_SECONDS))
        start_real = time.monotonic()
        with self.lock:
            start_sim = self.simulation.clock
        while not self._stopping.is_set():
            began = time.monotonic()
            target = start_sim + (began - start_real) * options.time_scale
            try:
                with self.lock:
                    steps = self.simulation.run_until(target, max_steps=step_budget)
                    behind = steps >= step_budget and self.simulation.clock < target
                    clock = self.simulation.clock
            except Exception:
                logger.exception("simulator engine failed; stopping its driver")
                return
            if behind:
                # Give up the backlog rather than chase it: simulated time slows down instead.
                start_real, start_sim = time.monotonic(), clock
            self.lagging = behind
            self._stopping.wait(max(0.0, TICK_SECONDS - (time.monotonic() - began)))
