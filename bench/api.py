"""Benchmark of POST /api/v1/size/ on a real server: requests/s and latency under concurrent clients.

Run from the repository root: ``.venv/bin/python bench/api.py`` (options: ``--help``).

The script makes a temporary SQLite database, migrates it and loads the catalog, starts gunicorn on a free
loopback port with KVDASH_PUBLIC_SIZING on (anonymous sizing, as in dev), drives it from client threads
(http.client, keep-alive), prints figures and stops the server. The anonymous-sizing throttle stays on, at a
rate the run cannot reach, so its cost is measured too. Baselines from the same run: GET /healthz through the
same server and clients (the floor for any request), and compute_plan in-process (the engine's share).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# A plan that fits: the everyday question. A plan that misses its target makes the engine search the catalog
# for advice (~100x the work), so it is measured separately, with fewer requests.
BODY = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "max_model_len": 32768, "concurrency": 8}
MISS_BODY = {**BODY, "concurrency": 16}
TARGET_RPS = 300
TARGET_P99_MS = 50.0


@dataclass(frozen=True)
class Result:
    label: str
    requests: int
    errors: int
    seconds: float
    latencies_ms: list[float]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def line(self) -> str:
        return (
            f"{self.label:<34} {self.rps:8.0f} req/s   p50 {self.pct(0.50):6.1f} ms   p99 {self.pct(0.99):6.1f} ms"
            f"   ({self.requests} requests, {self.errors} errors)"
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare(env: dict[str, str]) -> None:
    for command in (["migrate", "--noinput"], ["load_catalog"]):
        subprocess.run([PYTHON, "manage.py", *command], cwd=ROOT, env=env, check=True, capture_output=True)


def start_server(env: dict[str, str], port: int, workers: int, threads: int) -> subprocess.Popen:
    gunicorn = str(Path(PYTHON).with_name("gunicorn"))
    command = [gunicorn, "kvdash.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", str(workers)]
    command += ["--worker-class", "gthread", "--threads", str(threads)] if threads > 1 else ["--worker-class", "sync"]
    command += ["--log-level", "warning", "--keep-alive", "5"]
    server = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/api/v1/gpus/h100-sxm/")
            if conn.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.2)
    stop_server(server)
    raise SystemExit("gunicorn did not answer within 30 s")


def stop_server(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def drive(
    label: str,
    port: int,
    method: str,
    path: str,
    body: bytes | None,
    *,
    clients: int,
    requests: int,
    max_seconds: float,
) -> Result:
    """``requests`` calls shared by ``clients`` threads (stops early after ``max_seconds``)."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    remaining = [requests]
    deadline = time.monotonic() + max_seconds
    headers = {"Content-Type": "application/json"} if body is not None else {}

    def client() -> None:
        nonlocal errors
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while time.monotonic() < deadline:
            with lock:
                if remaining[0] <= 0:
                    break
                remaining[0] -= 1
            start = time.perf_counter()
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                ok = response.status == 200
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            elapsed = (time.perf_counter() - start) * 1000
            with lock:
                latencies.append(elapsed)
                errors += 0 if ok else 1
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Result(label, len(latencies), errors, time.perf_counter() - start, latencies)


def engine_baseline(env: dict[str, str]) -> float:
    """compute_plan per second in-process for the same request (the catalog spec, as the API finds it)."""
    code = (
        "import time; from planner.sizing import *; "
        "m=catalog_models()['llama-3.1-8b']; g=catalog_gpus()['h100-sxm']; "
        f"i=PlanInputs(model=m, gpu=g, max_model_len={BODY['max_model_len']}, concurrency={BODY['concurrency']}); "
        "plan_to_dict(compute_plan(i)); n=0; s=time.perf_counter()\n"
        "while time.perf_counter()-s < 1.0: plan_to_dict(compute_plan(i)); n+=1\n"
        "print(n/(time.perf_counter()-s))"
    )
    out = subprocess.run([PYTHON, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=3, help="gunicorn sync worker processes (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="threads per worker; >1 uses gthread (default 1)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent client threads (default 4)")
    parser.add_argument("--requests", type=int, default=3000, help="requests per measurement (default 3000)")
    parser.add_argument("--max-seconds", type=float, default=30.0, help="time cap per measurement (default 30)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="kvdash-bench-api-") as tmp:
        env = {
            **os.environ,
            "KVDASH_VAR_DIR": tmp,
            "DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3",
            "KVDASH_PUBLIC_SIZING": "1",
            "KVDASH_ANON_SIZING_RATE": "1000000/s",
            "DEBUG": "0",
            "LOG_LEVEL": "WARNING",
        }
        env.pop("CELERY_BROKER_URL", None)
        prepare(env)
        engine_rate = engine_baseline(env)
        port = free_port()
        server = start_server(env, port, args.workers, args.threads)
        try:
            body = json.dumps(BODY).encode()
            common = {"clients": args.clients, "requests": args.requests, "max_seconds": args.max_seconds}
            drive("warm-up", port, "POST", "/api/v1/size/", body, clients=args.clients, requests=200, max_seconds=10)
            healthz = drive("GET /healthz (baseline)", port, "GET", "/healthz", None, **common)
            size = drive("POST /api/v1/size/", port, "POST", "/api/v1/size/", body, **common)
            miss = drive(
                "POST /api/v1/size/ (misses: advice)",
                port,
                "POST",
                "/api/v1/size/",
                json.dumps(MISS_BODY).encode(),
                clients=args.clients,
                requests=max(50, args.requests // 20),
                max_seconds=args.max_seconds,
            )
        finally:
            stop_server(server)

    mode = f"gthread x{args.threads}" if args.threads > 1 else "sync"
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"gunicorn: {args.workers} workers ({mode}); {args.clients} client threads; {os.cpu_count()} CPUs")
    print(f"load average after the run: {load} (other work on the machine skews every figure)")
    print(f"request: {json.dumps(BODY)}")
    print(healthz.line())
    print(size.line())
    print(miss.line())
    print(f"{'compute_plan + plan_to_dict in-process':<34} {engine_rate:8.0f} plans/s (engine baseline)")
    print(f"size / healthz throughput: {size.rps / healthz.rps:.2f}x; size / engine: {size.rps / engine_rate:.2f}x")
    met = size.rps >= TARGET_RPS and size.pct(0.99) < TARGET_P99_MS and size.errors == 0
    print(f"target >= {TARGET_RPS} req/s with p99 < {TARGET_P99_MS:.0f} ms: {'met' if met else 'MISSED'}")


if __name__ == "__main__":
    main()
