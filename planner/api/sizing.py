"""Stateless sizing for the API: request values -> the engine's PlanInputs -> a plan or a configuration search.

The engine does every calculation; this module only finds the model and GPU (catalog slug or ad-hoc figures)
and renames the engine's error keys to the request's field names, so a 400 points at what the caller sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from planner.plan_inputs import plan_inputs_from_values
from planner.selectors import gpu_spec_by_slug, gpu_specs, model_spec_by_slug
from planner.sizing import (
    GpuSpec,
    ModelSpec,
    PlanInputs,
    SizingInputError,
    compute_plan,
    custom_gpu,
    model_spec_from_hf_config,
    plan_to_dict,
    search_configurations,
)

# What an ad-hoc GPU (``gpu_memory_gib`` instead of a catalog slug) is assumed to do when the caller does not
# say: the engine's custom_gpu placeholders. They only move the speed estimates, never the memory figures.
DEFAULT_GPU_BANDWIDTH_TBS = 1.0
DEFAULT_GPU_BF16_TFLOPS = 100.0
CUSTOM_MODEL_NAME = "custom model"
# A Hugging Face repo id: "org/name" (letters, digits, - _ .), as vllm serve takes it.
HF_REPO_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$"
_HF_REPO_ID = re.compile(HF_REPO_ID)


def config_hf_id(config: Any) -> str | None:
    """The repo a config.json names in ``_name_or_path`` (transformers writes it on save), if it is one."""
    value = config.get("_name_or_path") if isinstance(config, Mapping) else None
    return value if isinstance(value, str) and _HF_REPO_ID.match(value) else None


# Engine error keys raised while building an ad-hoc GPU, and the request fields they came from.
_CUSTOM_GPU_FIELDS = {
    "memory_gib": "gpu_memory_gib",
    "memory_bytes": "gpu_memory_gib",
    "marketed_memory_gb": "gpu_memory_gib",
    "bandwidth_tbs": "gpu_bandwidth_tbs",
    "bandwidth_bytes_per_s": "gpu_bandwidth_tbs",
    "bf16_tflops": "gpu_bf16_tflops",
}


def _flatten(errors: Mapping[str, str]) -> str:
    return "; ".join(f"{key}: {message}" for key, message in errors.items())


def config_model_spec(
    *,
    config: Any,
    name: str = "",
    field: str = "model_config",
    num_params: int | None = None,
    num_active_params: int | None = None,
    hf_id: str | None = None,
) -> ModelSpec:
    """A ModelSpec from a caller's HF config.json; every complaint is reported under ``field``.

    ``hf_id`` (else the config's ``_name_or_path``) is the repo the vllm serve command names.
    """
    if not isinstance(config, Mapping) or not config:
        raise SizingInputError({field: "must be a non-empty JSON object (an HF config.json)"})
    try:
        return model_spec_from_hf_config(
            dict(config),
            name=name or CUSTOM_MODEL_NAME,
            num_params=num_params,
            num_active_params=num_active_params,
            hf_id=hf_id or config_hf_id(config),
        )
    except SizingInputError as exc:
        raise SizingInputError({field: _flatten(exc.errors)}) from exc
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
        # The config is arbitrary caller JSON: whatever shape the parser trips on, it is the caller's input.
        raise SizingInputError({field: f"is not a config.json the engine can read ({type(exc).__name__})"}) from exc


def _model_spec(data: Mapping[str, Any], errors: dict[str, str]) -> ModelSpec | None:
    if data.get("model_config") is not None:
        try:
            return config_model_spec(config=data["model_config"], hf_id=data.get("model_hf_id"))
        except SizingInputError as exc:
            errors.update(exc.errors)
            return None
    slug = data.get("model")
    if not slug:
        errors["model"] = "give a catalog model slug (model) or an HF config.json (model_config)"
        return None
    try:
        spec = model_spec_by_slug(slug=slug)
    except SizingInputError as exc:
        errors["model"] = f"the stored config of {slug!r} is no longer valid: {_flatten(exc.errors)}"
        return None
    if spec is None:
        errors["model"] = f"no model {slug!r} in the catalog"
    return spec


def _gpu_spec(data: Mapping[str, Any], errors: dict[str, str]) -> GpuSpec | None:
    if data.get("gpu_memory_gib") is not None:
        try:
            return custom_gpu(
                memory_gib=data["gpu_memory_gib"],
                bandwidth_tbs=data.get("gpu_bandwidth_tbs") or DEFAULT_GPU_BANDWIDTH_TBS,
                bf16_tflops=data.get("gpu_bf16_tflops") or DEFAULT_GPU_BF16_TFLOPS,
            )
        except SizingInputError as exc:
            errors.update({_CUSTOM_GPU_FIELDS.get(key, "gpu_memory_gib"): msg for key, msg in exc.errors.items()})
            return None
    slug = data.get("gpu")
    if not slug:
        errors["gpu"] = "give a catalog GPU slug (gpu) or its memory (gpu_memory_gib)"
        return None
    try:
        spec = gpu_spec_by_slug(slug=slug)
    except SizingInputError as exc:
        errors["gpu"] = f"the stored figures of {slug!r} are no longer valid: {_flatten(exc.errors)}"
        return None
    if spec is None:
        errors["gpu"] = f"no GPU {slug!r} in the catalog"
    return spec


def _request_field(data: Mapping[str, Any], key: str) -> str:
    """The request field an engine error key belongs to (the engine names PlanInputs fields)."""
    if key == "model" and data.get("model_config") is not None:
        return "model_config"
    if key == "gpu" and data.get("gpu_memory_gib") is not None:
        return "gpu_memory_gib"
    return key


def _engine_call(data: Mapping[str, Any], call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs)
    except SizingInputError as exc:
        raise SizingInputError({_request_field(data, key): msg for key, msg in exc.errors.items()}) from exc


def size_plan_inputs(*, data: Mapping[str, Any], gpu_required: bool = True) -> PlanInputs:
    """PlanInputs for validated request values (see SizeRequestSerializer); raises SizingInputError."""
    errors: dict[str, str] = {}
    model = _model_spec(data, errors)
    gpu = _gpu_spec(data, errors) if gpu_required or data.get("gpu") or data.get("gpu_memory_gib") else None
    if errors:
        raise SizingInputError(errors)
    if gpu is None:
        # A search without a GPU: PlanInputs needs one, the search replaces it with each catalog GPU in turn.
        gpu = custom_gpu(memory_gib=80.0)
    assert model is not None
    return plan_inputs_from_values(model=model, gpu=gpu, values=data)


def size_plan(*, data: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's plan for one request, as plan_to_dict gives it (the /size/ response body)."""
    inputs = size_plan_inputs(data=data)
    return plan_to_dict(_engine_call(data, compute_plan, inputs))


def size_search(*, data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The cheapest configurations from the DB catalog meeting the request's SLA, cheapest first."""
    inputs = size_plan_inputs(data=data, gpu_required=False)
    gpus = gpu_specs(slugs=data.get("gpus") or None)
    if not gpus:
        raise SizingInputError({"gpus": "no usable GPU in the catalog matches"})
    kwargs: dict[str, Any] = {"gpus": gpus, "max_gpus": data.get("max_gpus", 8), "limit": data.get("limit", 10)}
    if data.get("kv_dtypes"):
        kwargs["kv_dtypes"] = tuple(data["kv_dtypes"])
    candidates = _engine_call(data, search_configurations, inputs, **kwargs)
    return [
        {
            "gpu": candidate.gpu.slug,
            "gpu_name": candidate.gpu.name,
            "gpu_count": candidate.gpu_count,
            "tensor_parallel_size": candidate.tensor_parallel_size,
            "data_parallel_size": candidate.data_parallel_size,
            "kv_cache_dtype": candidate.kv_cache_dtype,
            "cost_per_hour": candidate.cost_per_hour,
            "price_note": candidate.price_note,
            "plan": plan_to_dict(candidate.plan),
        }
        for candidate in candidates
    ]
