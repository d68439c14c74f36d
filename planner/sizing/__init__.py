"""kvdash's sizing engine: how much vLLM KV cache a model gets on a GPU, and what that buys.

Pure Python, no Django. See docs/sizing-engine.md for the public interface.
"""

from __future__ import annotations

from .advice import AdviceRow
from .catalog import catalog_data, catalog_gpus, catalog_models
from .compute import compute_plan
from .errors import SizingInputError
from .hardware import GIB, GpuSpec, custom_gpu
from .hf_config import model_spec_from_hf_config
from .inputs import PlanInputs
from .model_spec import LayerGroup, ModelSpec
from .plan import (
    Allocation,
    Assumption,
    ConcurrencyRow,
    KvCacheGroup,
    MemoryBreakdown,
    Plan,
    context_curve,
    model_to_dict,
    plan_to_dict,
)
from .search import Candidate, search_configurations
from .speed import Estimates, step_time_seconds

__all__ = [
    "GIB",
    "AdviceRow",
    "Allocation",
    "Assumption",
    "Candidate",
    "ConcurrencyRow",
    "Estimates",
    "GpuSpec",
    "KvCacheGroup",
    "LayerGroup",
    "MemoryBreakdown",
    "ModelSpec",
    "Plan",
    "PlanInputs",
    "SizingInputError",
    "catalog_data",
    "catalog_gpus",
    "catalog_models",
    "compute_plan",
    "context_curve",
    "custom_gpu",
    "model_spec_from_hf_config",
    "model_to_dict",
    "plan_to_dict",
    "search_configurations",
    "step_time_seconds",
]
