"""The monitor side of ``make run``: the simulated fleet registered under node ``local``, each server tied
to the scenario it simulates, and a fresh key for the local agent."""

from __future__ import annotations

from collections.abc import Sequence

from monitor.services import endpoint_register, node_key_create
from monitor.signing import NodeKeyMaterial
from monitor.simulator.fleet import DEFAULT_BASE_PORT, DEMO_FLEET, FleetMember
from monitor.simulator.scenarios import demo_scenario_ensure

DEMO_NODE = "local"


def demo_monitor_setup(
    *, base_port: int = DEFAULT_BASE_PORT, host: str = "127.0.0.1", members: Sequence[FleetMember] = DEMO_FLEET
) -> NodeKeyMaterial:
    """Register every demo server (the ports simulate_fleet uses) and return a new key for the local agent;
    the previous run's keys are revoked."""
    for offset, member in enumerate(members):
        scenario = demo_scenario_ensure(
            name=member.scenario_name,
            model_slug=member.model_slug,
            gpu_slug=member.gpu_slug,
            inputs=member.scenario_inputs,
            notes=member.notes,
        )
        endpoint_register(
            url=f"http://{host}:{base_port + offset}",
            node=DEMO_NODE,
            name=member.scenario_name.removeprefix("Demo: "),
            scenario_id=scenario.pk,
        )
    return node_key_create(name=DEMO_NODE, revoke_others=True)
