"""simulate_vllm and simulate_fleet, as a subprocess and in-process."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.core.management.base import CommandError
from prometheus_client.parser import text_string_to_metric_families

from monitor.simulator.fleet import DEMO_FLEET
from monitor.simulator.scenarios import DEMO_USERNAME, demo_fleet_specs
from monitor.simulator.spec import ServerSpec, build_simulation
from planner.models import GpuProfile, ModelProfile, Scenario
from planner.services import catalog_load, scenario_plan
from planner.sizing import PlanInputs, catalog_gpus, catalog_models, compute_plan

MANAGE = Path(__file__).resolve().parents[3] / "manage.py"


def free_ports(count: int) -> int:
    """A base port with ``count`` free consecutive ports after it (checked by binding them)."""
    for base in range(23000 + os.getpid() % 1000 * 20, 60000, 97):
        sockets = []
        try:
            for offset in range(count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", base + offset))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError("no free ports")


def families(url: str) -> dict:
    response = requests.get(f"{url}/metrics", timeout=5)
    return {family.name: family for family in text_string_to_metric_families(response.text)}


def run_in_thread(name: str, *args: str) -> tuple[threading.Thread, io.StringIO, list]:
    out = io.StringIO()
    errors: list = []

    def target() -> None:
        try:
            call_command(name, *args, stdout=out)
        except BaseException as error:  # surfaced by the test
            errors.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, out, errors


def wait_for_output(out: io.StringIO, text: str, errors: list, *, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if errors:
            raise errors[0]
        if text in out.getvalue():
            return out.getvalue()
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never printed; got {out.getvalue()!r}")


def test_simulate_commands_are_registered_for_run_stack():
    commands = get_commands()
    assert commands.get("simulate_fleet") == "monitor" and commands.get("simulate_vllm") == "monitor"


def test_simulate_vllm_subprocess_serves_and_stops_cleanly_on_sigterm():
    process = subprocess.Popen(
        [
            sys.executable, str(MANAGE), "simulate_vllm", "--port", "0", "--num-gpu-blocks", "2000",
            "--rate", "20", "--time-scale", "4", "--prompt-len", "fixed:800", "--output-len", "fixed:300",
            "--served-model-name", "sim/sub",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        line = process.stdout.readline()
        assert "listening on http://127.0.0.1:" in line, line + process.stderr.read()
        url = line.split("listening on ")[1].split()[0]
        first = families(url)["vllm:kv_cache_usage_perc"].samples[0].value
        deadline = time.monotonic() + 15
        usage = first
        while usage <= max(first, 0.05) and time.monotonic() < deadline:
            time.sleep(0.2)
            usage = families(url)["vllm:kv_cache_usage_perc"].samples[0].value
        assert usage > first
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert "stopped" in process.stdout.read()
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(f"{url}/health", timeout=1)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_simulate_vllm_bad_input_is_a_message_not_a_traceback():
    result = subprocess.run(
        [sys.executable, str(MANAGE), "simulate_vllm", "--num-gpu-blocks", "10", "--max-model-len", "4096"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "max_model_len" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--num-gpu-blocks", "100", "--prompt-len", "zipf:2"], "prompt_len"),
        (["--num-gpu-blocks", "100", "--rate", "-2"], "rate"),
        (["--num-gpu-blocks", "100", "--fault", "slow", "--fault-delay", "x"], "fault_delay"),
        (["--num-gpu-blocks", "100", "--legacy-metrics", "--engines", "2"], "one engine"),
        (["--model", "llama-3.1-8b"], "--model and --gpu go together"),
        ([], "give --scenario"),
        (["--num-gpu-blocks", "100", "--port", "70000"], "port"),
    ],
)
def test_simulate_vllm_refuses_bad_options_with_the_field_named(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("simulate_vllm", *args, "--duration", "0")


@pytest.mark.django_db
def test_simulate_vllm_names_unknown_scenarios_and_slugs():
    with pytest.raises(CommandError, match="no scenario with id 999999"):
        call_command("simulate_vllm", "--scenario", "999999", "--duration", "0")
    with pytest.raises(CommandError, match="model: no model with slug 'nope'"):
        call_command("simulate_vllm", "--model", "nope", "--gpu", "h100-sxm", "--duration", "0")
    with pytest.raises(CommandError, match="gpu"):
        call_command("simulate_vllm", "--model", "llama-3.1-8b", "--gpu", "nope", "--duration", "0")


@pytest.mark.django_db
def test_simulate_vllm_reports_a_plan_that_does_not_fit():
    with pytest.raises(CommandError, match="max_model_len"):
        call_command(
            "simulate_vllm", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--kv-cache-memory-gib", "0.01",
            "--max-model-len", "32768", "--duration", "0",
        )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_simulate_vllm_serves_a_saved_scenario_sized_by_its_plan():
    catalog_load()
    owner = get_user_model().objects.create(username="planner-a")
    scenario = Scenario.objects.create(
        name="8B on H100",
        owner=owner,
        model=ModelProfile.objects.get(slug="llama-3.1-8b"),
        gpu=GpuProfile.objects.get(slug="h100-sxm"),
        max_model_len=16384,
        concurrency=8,
        prompt_tokens=2000,
        output_tokens=500,
    )
    plan = scenario_plan(scenario=scenario)
    port = free_ports(1)
    thread, out, errors = run_in_thread(
        "simulate_vllm", "--scenario", str(scenario.pk), "--port", str(port), "--time-scale", "2", "--duration", "4"
    )
    printed = wait_for_output(out, "listening on", errors)
    assert f"scenario={scenario.pk}" in printed and f"http://127.0.0.1:{port}" in printed
    url = f"http://127.0.0.1:{port}"
    # The scenario's own question by default: its concurrency kept in flight.
    running = 0.0
    deadline = time.monotonic() + 3
    while running < 8 and time.monotonic() < deadline:
        parsed = families(url)
        running = parsed["vllm:num_requests_running"].samples[0].value
        time.sleep(0.1)
    assert running == 8
    info = parsed["vllm:cache_config_info"].samples[0].labels
    assert info["num_gpu_blocks"] == str(plan.num_gpu_blocks) and info["block_size"] == str(plan.block_size)
    assert parsed["vllm:num_requests_running"].samples[0].labels["model_name"] == "meta-llama/Llama-3.1-8B"
    thread.join(timeout=15)
    assert not thread.is_alive() and not errors
    assert "stopped" in out.getvalue()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_simulate_fleet_starts_the_demo_fleet_tied_to_saved_scenarios():
    base = free_ports(len(DEMO_FLEET))
    thread, out, errors = run_in_thread("simulate_fleet", "--base-port", str(base), "--json", "--duration", "6")
    printed = wait_for_output(out, "fleet of", errors)
    rows = [json.loads(line) for line in printed.splitlines() if line.startswith("{")]
    assert [row["url"] for row in rows] == [f"http://127.0.0.1:{base + i}" for i in range(len(DEMO_FLEET))]
    demo = get_user_model().objects.get(username=DEMO_USERNAME)
    assert not demo.has_usable_password()
    scenarios = {s.pk: s for s in Scenario.objects.filter(owner=demo)}
    assert {row["scenario_id"] for row in rows} == set(scenarios) and len(scenarios) == len(DEMO_FLEET)
    assert len({row["model"] for row in rows}) == len(DEMO_FLEET)
    for row in rows:
        parsed = families(row["url"])
        usage_name = "vllm:gpu_cache_usage_perc" if row["legacy_metrics"] else "vllm:kv_cache_usage_perc"
        engines = {s.labels.get("engine") for s in parsed[usage_name].samples}
        assert len(engines) == row["engines"]
        assert parsed[usage_name].samples[0].labels["model_name"] == row["model"]
    assert max(row["engines"] for row in rows) == 2  # one data-parallel server
    assert sum(row["legacy_metrics"] for row in rows) == 1
    thread.join(timeout=20)
    assert not thread.is_alive() and not errors
    assert "stopped" in out.getvalue()
    for row in rows:
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(f"{row['url']}/health", timeout=1)


@pytest.mark.django_db
def test_demo_scenarios_are_created_once_and_edits_are_kept():
    first = demo_fleet_specs(members=DEMO_FLEET, base_port=9100)
    edited = Scenario.objects.get(pk=first[0].scenario_id)
    edited.max_model_len = 8192
    edited.save()
    second = demo_fleet_specs(members=DEMO_FLEET, base_port=9100)
    assert [s.scenario_id for s in first] == [s.scenario_id for s in second]
    assert Scenario.objects.filter(owner__username=DEMO_USERNAME).count() == len(DEMO_FLEET)
    assert second[0].engine_config().max_model_len == 8192
    assert [s.port for s in second] == [9100 + i for i in range(len(DEMO_FLEET))]


@pytest.mark.slow
def test_the_overloaded_demo_member_preempts_and_the_steady_one_does_not():
    # The demo fleet's loads, simulated for a few minutes without wall-clock time.
    results = {}
    for member in DEMO_FLEET:
        if member.key not in {"steady", "overloaded"}:
            continue
        inputs = PlanInputs(
            model=catalog_models()[member.model_slug], gpu=catalog_gpus()[member.gpu_slug], **member.scenario_inputs
        )
        simulation = build_simulation(
            ServerSpec(
                plan=compute_plan(inputs),
                load=member.load,
                max_num_seqs=member.max_num_seqs,
                enable_prefix_caching=member.enable_prefix_caching,
            )
        )
        simulation.run_until(240.0)
        results[member.key] = simulation
    assert results["steady"].num_preemptions == 0 and results["steady"].engines[0].num_waiting < 5
    assert results["overloaded"].num_preemptions > 0 and results["overloaded"].engines[0].num_waiting > 50
