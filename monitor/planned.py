"""What the scenario behind an endpoint planned, in the units the live metrics use (per engine)."""

from __future__ import annotations

from typing import Any

from monitor.models import Endpoint
from planner.services import scenario_plan
from planner.sizing import SizingInputError
from planner.sizing.figures import reported_block_size, reported_capacity_tokens


def endpoint_planned(*, endpoint: Endpoint) -> dict[str, Any] | None:
    """The plan's figures for one engine of the endpoint (vLLM reports num_gpu_blocks per engine), or None
    without a scenario; ``{"error": ...}`` when the scenario no longer plans."""
    scenario = endpoint.scenario
    if scenario is None:
        return None
    try:
        plan = scenario_plan(scenario=scenario)
    except SizingInputError as error:
        return {"scenario": scenario.pk, "scenario_name": scenario.name, "error": str(error)}
    memory = plan.memory_per_gpu
    return {
        "scenario": scenario.pk,
        "scenario_name": scenario.name,
        "fits": plan.fits,
        "num_gpu_blocks": plan.num_gpu_blocks,
        # In cache_config_info's units (num_gpu_blocks x the smallest group's block), so live figures compare.
        "block_size": reported_block_size(plan),
        "kv_tokens": reported_capacity_tokens(plan),
        "max_concurrency": plan.max_concurrency,
        "max_model_len": plan.inputs.max_model_len,
        "concurrency": plan.inputs.concurrency,
        "data_parallel_size": plan.data_parallel_size,
        "tensor_parallel_size": plan.inputs.tensor_parallel_size,
        "gpu_memory_utilization": plan.inputs.gpu_memory_utilization,
        "kv_cache_dtype": plan.inputs.kv_cache_dtype,
        "kv_bytes_per_token_per_gpu": plan.kv_bytes_per_token_per_gpu,
        "memory_per_gpu": {
            "total_bytes": memory.total_bytes,
            "requested_bytes": memory.requested_bytes,
            "weights_bytes": memory.weights_bytes,
            "activation_bytes": memory.activation_bytes,
            "non_torch_bytes": memory.non_torch_bytes,
            "kv_cache_bytes": memory.kv_cache_bytes,
        },
    }
