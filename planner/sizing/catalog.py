"""The catalog of models and GPUs (``catalog.json``: every figure with its source and notes).

Parameter counts: the larger of the official figure (``params_b``) and the count computed from the
published config (``params_computed_from_config``). The official figure includes vision towers the
config count leaves out (Llama 4 Scout: 109B vs 107.8B), while rounded class names understate
(Mistral "7B" is 7.248B); taking the larger never under-sizes the weights.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from .hardware import GpuSpec
from .hf_config import model_spec_from_hf_config
from .model_spec import ModelSpec

CATALOG_PATH = Path(__file__).with_name("catalog.json")


@lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    with CATALOG_PATH.open(encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def catalog_data() -> dict[str, Any]:
    """The raw catalog (a deep copy: callers may mutate it), e.g. for the Django fixture."""
    return copy.deepcopy(_raw())


def _billions(*values: Any) -> int | None:
    numbers = [float(value) for value in values if isinstance(value, (int, float)) and not isinstance(value, bool)]
    return round(max(numbers) * 1e9) if numbers else None


def model_from_entry(entry: dict[str, Any]) -> ModelSpec:
    total = _billions(entry.get("params_b"), entry.get("params_computed_from_config"))
    active = _billions(entry.get("params_active_b"), entry.get("params_active_computed_from_config"))
    return model_spec_from_hf_config(
        entry["config"],
        name=entry["name"],
        num_params=total,
        num_active_params=active if active is not None else total,
        hf_id=entry.get("hf_id"),
        slug=entry["slug"],
    )


def gpu_from_entry(entry: dict[str, Any]) -> GpuSpec:
    return GpuSpec(
        slug=entry["slug"],
        name=entry["name"],
        memory_bytes=int(entry["memory_bytes"]),
        marketed_memory_gb=float(entry["memory_gb"]),
        bandwidth_bytes_per_s=float(entry["bandwidth_tbs"]) * 1e12,
        bf16_tflops=float(entry["bf16_tflops"]),
        price_per_hour=entry.get("price_per_hour"),
        fp8=bool(entry.get("fp8")),
        memory_note=entry.get("memory_bytes_note", ""),
    )


@lru_cache(maxsize=1)
def _models() -> dict[str, ModelSpec]:
    return {entry["slug"]: model_from_entry(entry) for entry in _raw()["models"]}


@lru_cache(maxsize=1)
def _gpus() -> dict[str, GpuSpec]:
    return {entry["slug"]: gpu_from_entry(entry) for entry in _raw()["gpus"]}


def catalog_models() -> dict[str, ModelSpec]:
    """Catalog models keyed by slug (``llama-3-8b``, ``deepseek-v3``, ...)."""
    return dict(_models())


def catalog_gpus() -> dict[str, GpuSpec]:
    """Catalog GPUs keyed by slug (``rtx-4090``, ``h100-sxm``, ...)."""
    return dict(_gpus())
