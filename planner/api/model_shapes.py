"""A model's shape as the API shows it: the engine's ModelSpec plus its KV cost per token at bf16."""

from __future__ import annotations

from typing import Any

from planner.models import ModelProfile
from planner.selectors import cached_model_spec
from planner.sizing import ModelSpec, SizingInputError, model_to_dict
from planner.sizing.figures import kv_bytes_per_token


def model_shape_from_spec(spec: ModelSpec) -> dict[str, Any]:
    # Every attention layer caches every token (vLLM allocates pages per layer, windows only free them later);
    # recurrent-state layers (hybrid models) hold a fixed state per request instead: the engine counts so.
    shape = model_to_dict(spec)
    shape["kv_bytes_per_token_bf16"] = kv_bytes_per_token(spec, "bfloat16")
    return shape


def model_shape(*, profile: ModelProfile) -> dict[str, Any] | None:
    """The stored model's shape; None when its config no longer makes a spec (the row still reads)."""
    try:
        return model_shape_from_spec(cached_model_spec(profile=profile))
    except SizingInputError:
        return None
