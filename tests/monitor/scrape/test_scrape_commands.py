"""scrape_endpoint and nvml_snapshot: their JSON contract and exit codes (0 whatever the target did, 2 on bad
arguments), in-process and as the subprocess a script would run."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from scrape_bodies import EngineFigures, Reply, refusing_port, serving, v1_body

MANAGE = Path(__file__).resolve().parents[3] / "manage.py"
TOP_KEYS = {"url", "up", "error", "duration_ms", "engines"}
ENGINE_KEYS = {
    "engine",
    "model_name",
    "kv_cache_usage",
    "num_requests_running",
    "num_requests_waiting",
    "num_preemptions_total",
    "prefix_cache_hits_total",
    "prefix_cache_queries_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "num_gpu_blocks",
    "block_size",
}


def run_command(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def manage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(MANAGE), *args], capture_output=True, text=True, timeout=60, cwd=MANAGE.parent
    )


def test_scrape_endpoint_json_has_the_contract_keys():
    with serving(Reply(body=v1_body({"0": EngineFigures(), "1": EngineFigures(kv=0.5)}).encode())) as (url, _):
        payload = json.loads(run_command("scrape_endpoint", url, "--json"))
    assert TOP_KEYS <= set(payload)
    assert (payload["url"], payload["up"], payload["error"], payload["rejected"]) == (url, True, None, [])
    assert [engine["engine"] for engine in payload["engines"]] == ["0", "1"]
    assert ENGINE_KEYS <= set(payload["engines"][0])
    assert payload["engines"][1]["kv_cache_usage"] == 0.5
    assert payload["engines"][0]["num_gpu_blocks"] == 27064


def test_scrape_endpoint_json_leaves_out_keys_the_server_does_not_expose():
    body = v1_body({"0": EngineFigures(kv=None, cache_config=None)}).encode()
    with serving(Reply(body=body)) as (url, _):
        (engine,) = json.loads(run_command("scrape_endpoint", url, "--json"))["engines"]
    assert "kv_cache_usage" not in engine and "num_gpu_blocks" not in engine and "block_size" not in engine
    assert engine["num_requests_running"] == 3


def test_scrape_endpoint_reports_a_failed_target_without_failing():
    with refusing_port() as port:
        payload = json.loads(run_command("scrape_endpoint", f"http://127.0.0.1:{port}", "--json", "--timeout", "1"))
    assert (payload["up"], payload["error"], payload["engines"]) == (False, "connection refused", [])


def test_scrape_endpoint_human_table():
    with serving(Reply(body=v1_body({"0": EngineFigures(kv=0.5)}).encode())) as (url, _):
        text = run_command("scrape_endpoint", url)
    head, columns, row = text.splitlines()[:3]
    assert "up=yes" in head and "44 samples" in head
    assert columns.split() == [
        "engine",
        "model",
        "kv_usage",
        "running",
        "waiting",
        "preempt",
        "blocks",
        "block_size",
        "dtype",
    ]
    assert row.split() == ["0", "meta-llama/Llama-3.1-8B-Instruct", "50.0%", "3", "1", "7", "27064", "16", "fp8"]


@pytest.mark.parametrize(
    "args",
    [
        ("ftp://127.0.0.1/metrics",),
        ("127.0.0.1:8000",),
        ("http://",),
        ("http://[::1",),
        ("http://127.0.0.1:1", "--timeout", "0"),
        ("http://127.0.0.1:1", "--timeout", "abc"),
        (),
        ("http://127.0.0.1:1", "--no-such-option"),
    ],
)
def test_scrape_endpoint_bad_arguments_are_exit_2(args):
    with pytest.raises(CommandError) as raised:
        run_command("scrape_endpoint", *args)
    assert raised.value.returncode == 2


def test_nvml_snapshot_bad_arguments_are_exit_2():
    with pytest.raises(CommandError) as raised:
        run_command("nvml_snapshot", "--gpu", "0")
    assert raised.value.returncode == 2


def test_scrape_endpoint_exit_codes_from_the_command_line():
    with refusing_port() as port:
        down = manage("scrape_endpoint", f"http://127.0.0.1:{port}", "--json", "--timeout", "1")
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout)["error"] == "connection refused"
    bad = manage("scrape_endpoint", "file:///etc/passwd", "--json")
    assert bad.returncode == 2 and "not an http(s) URL" in bad.stderr
    missing = manage("scrape_endpoint")
    assert missing.returncode == 2 and "required: url" in missing.stderr


def test_nvml_snapshot_json_on_this_machine():
    done = manage("nvml_snapshot", "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert {"available", "error", "driver_version", "gpus"} <= set(payload)
    if not payload["available"]:  # a machine without NVML (this one): the reason, no GPUs
        assert payload["error"].startswith("NVML unavailable: ")
        assert payload["gpus"] == []
    else:
        gpu_keys = {"index", "uuid", "name", "memory_total_bytes", "memory_used_bytes", "memory_free_bytes"}
        assert all(gpu_keys | {"utilization_gpu_pct", "processes"} <= set(gpu) for gpu in payload["gpus"])
