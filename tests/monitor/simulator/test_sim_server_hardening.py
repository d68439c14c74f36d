"""The simulator's /fault stays on this machine unless asked, and idle connections do not hold threads."""

from __future__ import annotations

import socket
import time

import pytest
import requests

from monitor.simulator import server as server_module
from monitor.simulator.spec import ServerSpec, build_server


def _spec(**overrides) -> ServerSpec:
    return ServerSpec(num_gpu_blocks=1000, block_size=16, max_model_len=2048, model_name="sim/x", **overrides)


def _outward_address() -> str | None:
    """This machine's own non-loopback address (no packet is sent: a UDP connect only picks a route)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


@pytest.mark.parametrize(("remote_fault", "expected"), [(False, 403), (True, 200)])
def test_fault_from_another_address_needs_the_flag(remote_fault, expected):
    address = _outward_address()
    if address is None:
        pytest.skip("no non-loopback address on this machine")
    sim = build_server(_spec(host="0.0.0.0"))
    sim.remote_fault = remote_fault
    with sim:
        # Connecting to our own outward address makes that address the client's: not loopback.
        response = requests.post(f"http://{address}:{sim.port}/fault?mode=slow&delay=0.1", timeout=5)
        assert response.status_code == expected
        if expected == 403:
            assert sim.fault.mode == "none"
        # Loopback is always allowed.
        assert requests.get(f"http://127.0.0.1:{sim.port}/fault", timeout=5).status_code == 200


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.9.1", True), ("::1", True), ("::ffff:127.0.0.1", True), ("10.1.2.3", False)],
)
def test_loopback_addresses(host, loopback):
    assert server_module._is_loopback(host) is loopback


def test_a_client_that_sends_nothing_is_dropped_after_the_socket_timeout(monkeypatch):
    monkeypatch.setattr(server_module._Handler, "timeout", 0.5)
    with build_server(_spec()) as sim:
        idle = socket.create_connection(("127.0.0.1", sim.port), timeout=5)
        try:
            idle.sendall(b"GET /metrics HTTP/1.1\r\n")  # the request never ends
            start = time.monotonic()
            assert idle.recv(1024) == b""  # the server closed it
            assert time.monotonic() - start < 4
        finally:
            idle.close()
        assert requests.get(f"http://127.0.0.1:{sim.port}/health", timeout=5).status_code == 200
