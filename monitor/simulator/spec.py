"""What one simulated server is (``ServerSpec``) and how it is assembled into engines, load and HTTP server.
Pure: a spec comes from a plan (``planner.sizing``) or bare block counts; the Django side lives in
``scenarios.py``."""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.sizing import Plan
from planner.sizing.figures import reported_block_size

from .engine import DEFAULT_MAX_NUM_BATCHED_TOKENS, Engine, EngineConfig, linear_step_time, plan_step_time
from .faults import Fault
from .kv_layout import layout_from_plan
from .load import LoadGenerator, LoadSpec
from .server import DEFAULT_MAX_STEPS_PER_SECOND, ServerOptions, SimulatorServer, cache_config_labels
from .simulation import Simulation

DEFAULT_MODEL_NAME = "simulated-model"


@dataclass(frozen=True)
class ServerSpec:
    """A plan (or bare ``num_gpu_blocks``) plus load and serving options. Block counts given here win over
    the plan's; without a plan the step time is a rough linear stand-in."""

    plan: Plan | None = None
    model_name: str = ""
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    engines: int | None = None  # None: the plan's data-parallel size
    enable_prefix_caching: bool = False
    request_timeout_s: float | None = 600.0
    load: LoadSpec = field(default_factory=lambda: LoadSpec(rate=1.0))
    legacy_metrics: bool = False
    time_scale: float = 1.0
    max_steps_per_second: float = DEFAULT_MAX_STEPS_PER_SECOND
    host: str = "127.0.0.1"
    port: int = 0
    fault: Fault | None = None
    scenario_id: int | None = None

    def served_model_name(self) -> str:
        if self.model_name:
            return self.model_name
        if self.plan is not None:
            model = self.plan.inputs.model
            return getattr(model, "hf_id", None) or model.name or DEFAULT_MODEL_NAME
        return DEFAULT_MODEL_NAME

    def engine_config(self) -> EngineConfig:
        """Raises ValueError (field: message; ...) when the numbers cannot make a working engine."""
        plan = self.plan
        if plan is None and self.num_gpu_blocks is None:
            raise ValueError("num_gpu_blocks: give a plan (scenario, or model and GPU) or a block count.")
        inputs = plan.inputs if plan is not None else None
        block_size = self.block_size or (plan.block_size if plan is not None else 16)
        num_gpu_blocks = self.num_gpu_blocks or (plan.num_gpu_blocks if plan is not None else 0)
        max_model_len = (
            self.max_model_len
            or (inputs.max_model_len if inputs is not None else None)
            # Without a plan, the longest request the blocks can hold, capped like a typical deployment.
            or max(2, min(32768, (num_gpu_blocks - 1) * block_size))
        )
        return EngineConfig(
            num_gpu_blocks=num_gpu_blocks,
            block_size=block_size,
            max_model_len=max_model_len,
            max_num_seqs=self.max_num_seqs or getattr(inputs, "max_num_seqs", None) or 256,
            max_num_batched_tokens=(
                self.max_num_batched_tokens
                or (inputs.max_num_batched_tokens if inputs is not None else None)
                or DEFAULT_MAX_NUM_BATCHED_TOKENS
            ),
            enable_prefix_caching=self.enable_prefix_caching,
            step_time=plan_step_time(plan) if plan is not None else linear_step_time(),
            request_timeout_s=self.request_timeout_s,
            cache_dtype=inputs.kv_cache_dtype if inputs is not None else "auto",
            gpu_memory_utilization=(inputs.gpu_memory_utilization if inputs is not None else None) or 0.9,
            # A plan's KV cache groups, unless the block size was given by hand.
            kv_layout=layout_from_plan(plan) if plan is not None and not self.block_size else None,
        )

    def num_engines(self) -> int:
        if self.engines is not None:
            return self.engines
        if self.legacy_metrics:
            return 1  # V0 had no data parallelism (and no engine label to tell replicas apart)
        return max(1, getattr(self.plan, "data_parallel_size", 1) or 1) if self.plan is not None else 1


def build_simulation(spec: ServerSpec) -> Simulation:
    config = spec.engine_config()
    count = spec.num_engines()
    if count < 1:
        raise ValueError("engines: must be at least 1.")
    return Simulation([Engine(config) for _ in range(count)], LoadGenerator(spec.load))


def build_server(spec: ServerSpec) -> SimulatorServer:
    """The server, not started (``.start()`` binds and starts its threads)."""
    simulation = build_simulation(spec)
    config = simulation.engines[0].config
    options = ServerOptions(
        model_name=spec.served_model_name(),
        max_model_len=config.max_model_len,
        cache_config=cache_config_labels(
            num_gpu_blocks=config.num_gpu_blocks,
            # What vLLM labels after planning: the smallest KV cache group's block (v1/engine/core.py), which is not
            # the block the pool counts for DeepSeek-V4 (4 against 256).
            block_size=reported_block_size(spec.plan)
            if spec.plan is not None and not spec.block_size
            else config.block_size,
            cache_dtype=config.cache_dtype,
            gpu_memory_utilization=config.gpu_memory_utilization,
            prefix_caching=config.enable_prefix_caching,
        ),
        host=spec.host,
        port=spec.port,
        legacy_metrics=spec.legacy_metrics,
        time_scale=spec.time_scale,
        max_steps_per_second=spec.max_steps_per_second,
    )
    return SimulatorServer(simulation, options, fault=spec.fault)
