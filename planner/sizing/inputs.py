"""What a plan is asked for (``PlanInputs``, the REST API's request fields) and its validation."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .compressed_attention import BLOCK_SIZE as COMPRESSED_BLOCK_SIZE
from .compressed_attention import input_errors as compressed_attention_errors
from .engine import EngineRules, engine_rules
from .errors import SizingInputError
from .hardware import GpuSpec
from .kv_cache import WHAT_IF_KV_DTYPES
from .memory import (
    LARGEST_TIER_BATCHED_TOKENS,
    LARGEST_TIER_BYTES,
    default_max_num_batched_tokens,
    default_max_num_seqs,
)
from .model_spec import ModelSpec
from .validation import as_choice, as_float, as_int

WEIGHT_DTYPES = ("auto", "bfloat16", "float16", "float32", "fp8", "int8", "int4")
KV_CACHE_DTYPES = ("auto", "bfloat16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "int8", "int4")
CONTEXT_ROUNDINGS = ("exact", "pow2")
BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class PlanInputs:
    """One sizing question. ``None`` means "use vLLM's default"; ``compute_plan`` fills them in."""

    model: ModelSpec
    gpu: GpuSpec
    gpu_count: int | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    weight_dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    gpu_memory_utilization: float | None = None
    block_size: int | None = None
    max_num_batched_tokens: int | None = None
    weights_gib: float | None = None
    activation_gib: float | None = None
    non_torch_gib: float | None = None
    kv_cache_memory_gib: float | None = None
    max_model_len: int | None = None
    concurrency: int = 1
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    shared_prefix_tokens: int | None = None
    target_tpot_ms: float | None = None
    target_ttft_ms: float | None = None
    context_rounding: str = "exact"
    engine_version: str = "latest"
    # Additions beyond docs/sizing-engine.md.
    max_num_seqs: int | None = None
    # None: vLLM's default for the model and release (on for hybrid models from 0.28, see engine.py).
    enable_prefix_caching: bool | None = None
    # Speculative (e.g. MTP) tokens per step: more state blocks, and the model's MTP attention layers.
    num_speculative_tokens: int = 0


MAX_MODEL_LEN_LIMIT = 10_485_760  # 10Mi tokens: Llama 4 Scout's max_position_embeddings, the longest in use
MAX_PARALLEL = 1024
MAX_OVERRIDE_GIB = 1_000_000.0


@dataclass(frozen=True)
class Resolved:
    """Validated inputs with every default filled in, and the notes saying where each default came from."""

    inputs: PlanInputs
    rules: EngineRules
    data_parallel_size: int
    assumptions: tuple[tuple[str, str, str], ...]
    warnings: tuple[str, ...]


def _check_model_parallel(model: ModelSpec, tp: int, pp: int, errors: dict[str, str]) -> None:
    if model.num_attention_heads % tp:
        errors["tensor_parallel_size"] = (
            f"{tp} does not divide the model's {model.num_attention_heads} attention heads (vLLM requires it)"
        )
    elif model.attention_kind != "MLA" and model.num_kv_heads % tp and tp % model.num_kv_heads:
        errors["tensor_parallel_size"] = f"{tp} neither divides nor is a multiple of {model.num_kv_heads} KV heads"
    for group in model.layer_groups:
        if (
            "tensor_parallel_size" not in errors
            and group.num_kv_heads
            and group.num_kv_heads % tp
            and tp % group.num_kv_heads
        ):
            errors["tensor_parallel_size"] = (
                f"{tp} neither divides nor is a multiple of the {group.kind} layers' {group.num_kv_heads} KV heads"
            )
    if pp > model.num_layers:
        errors["pipeline_parallel_size"] = f"{pp} stages for {model.num_layers} layers"
    elif model.parallel_hybrid and (model.num_layers // 2) % pp:
        # vLLM splits the decoder layers (get_pp_indices), each with its attention and Mamba cache layer; only an
        # even split is modelled.
        errors["pipeline_parallel_size"] = (
            f"{pp} does not divide the {model.num_layers // 2} decoder layers (attention and Mamba side by side)"
        )


def resolve_inputs(inputs: PlanInputs) -> Resolved:
    """Validate ``inputs`` (raising ``SizingInputError`` naming every bad field) and fill in defaults."""
    if not isinstance(inputs, PlanInputs):
        raise SizingInputError({"inputs": "must be a PlanInputs"})
    errors: dict[str, str] = {}
    if not isinstance(inputs.model, ModelSpec):
        errors["model"] = "must be a ModelSpec"
    if not isinstance(inputs.gpu, GpuSpec):
        errors["gpu"] = "must be a GpuSpec"
    if errors:
        raise SizingInputError(errors)
    model, gpu = inputs.model, inputs.gpu
    tp = as_int(errors, "tensor_parallel_size", inputs.tensor_parallel_size, maximum=MAX_PARALLEL)
    pp = as_int(errors, "pipeline_parallel_size", inputs.pipeline_parallel_size, maximum=MAX_PARALLEL)
    gpu_count = None
    if inputs.gpu_count is not None:
        gpu_count = as_int(errors, "gpu_count", inputs.gpu_count, maximum=MAX_PARALLEL * MAX_PARALLEL)
    as_choice(errors, "weight_dtype", inputs.weight_dtype, WEIGHT_DTYPES)
    as_choice(errors, "kv_cache_dtype", inputs.kv_cache_dtype, KV_CACHE_DTYPES)
    as_choice(errors, "context_rounding", inputs.context_rounding, CONTEXT_ROUNDINGS)
    rules = None
    try:
        rules = engine_rules(inputs.engine_version)
    except SizingInputError as error:
        errors.update(error.errors)
    utilization = None
    if inputs.gpu_memory_utilization is not None:
        utilization = as_float(
            errors,
            "gpu_memory_utilization",
            inputs.gpu_memory_utilization,
            minimum=0.0,
            maximum=1.0,
            inclusive_minimum=False,
        )
    block_size = None
    if inputs.block_size is not None:
        block_size = as_int(errors, "block_size", inputs.block_size, maximum=256)
        if block_size is not None and block_size not in BLOCK_SIZES:
            errors["block_size"] = f"must be one of {', '.join(map(str, BLOCK_SIZES))}"
    batched = None
    if inputs.max_num_batched_tokens is not None:
        batched = as_int(errors, "max_num_batched_tokens", inputs.max_num_batched_tokens, maximum=MAX_MODEL_LEN_LIMIT)
    seqs = None
    if inputs.max_num_seqs is not None:
        seqs = as_int(errors, "max_num_seqs", inputs.max_num_seqs, maximum=1_000_000)
    for name in ("weights_gib", "activation_gib", "non_torch_gib"):
        value = getattr(inputs, name)
        if value is not None:
            as_float(errors, name, value, minimum=0.0, maximum=MAX_OVERRIDE_GIB)
    if inputs.kv_cache_memory_gib is not None:
        as_float(
            errors, "kv_cache_memory_gib", inputs.kv_cache_memory_gib, maximum=MAX_OVERRIDE_GIB, inclusive_minimum=False
        )
    max_len = None
    if inputs.max_model_len is not None:
        max_len = as_int(errors, "max_model_len", inputs.max_model_len, maximum=MAX_MODEL_LEN_LIMIT)
    concurrency = as_int(errors, "concurrency", inputs.concurrency, maximum=1_000_000)
    speculative = as_int(errors, "num_speculative_tokens", inputs.num_speculative_tokens, minimum=0, maximum=64)
    if inputs.enable_prefix_caching is not None and not isinstance(inputs.enable_prefix_caching, bool):
        errors["enable_prefix_caching"] = "must be true, false or null (vLLM's default)"
    prompt = output = shared = None
    if inputs.prompt_tokens is not None:
        prompt = as_int(errors, "prompt_tokens", inputs.prompt_tokens, minimum=0, maximum=MAX_MODEL_LEN_LIMIT)
    if inputs.output_tokens is not None:
        output = as_int(errors, "output_tokens", inputs.output_tokens, minimum=0, maximum=MAX_MODEL_LEN_LIMIT)
    if inputs.shared_prefix_tokens is not None:
        shared = as_int(
            errors, "shared_prefix_tokens", inputs.shared_prefix_tokens, minimum=0, maximum=MAX_MODEL_LEN_LIMIT
        )
    for name in ("target_tpot_ms", "target_ttft_ms"):
        value = getattr(inputs, name)
        if value is not None:
            as_float(errors, name, value, minimum=0.0, maximum=1e9, inclusive_minimum=False)
    if errors:
        raise SizingInputError(errors)
    assert tp is not None and pp is not None and rules is not None and concurrency is not None

    _check_model_parallel(model, tp, pp, errors)
    if model.compressed_attention is not None:
        assert speculative is not None
        errors.update(
            compressed_attention_errors(
                model.compressed_attention,
                gpu_name=gpu.name,
                gpu_slug=gpu.slug,
                kv_cache_dtype=inputs.kv_cache_dtype,
                block_size=block_size,
                tensor_parallel_size=tp,
                pipeline_parallel_size=pp,
                num_speculative_tokens=speculative,
                engine_version=rules.version,
                num_mtp_layers=model.num_mtp_layers,
            )
        )
    if gpu_count is not None and gpu_count % (tp * pp):
        errors["gpu_count"] = f"must be a multiple of tensor_parallel_size x pipeline_parallel_size ({tp * pp})"
    if max_len is not None and max_len > model.max_position_embeddings:
        errors["max_model_len"] = (
            f"{max_len} exceeds the model's max_position_embeddings ({model.max_position_embeddings}); "
            "vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set"
        )
    resolved_len = max_len if max_len is not None else min(model.max_position_embeddings, MAX_MODEL_LEN_LIMIT)
    if prompt is not None and shared is not None and shared > prompt:
        errors["shared_prefix_tokens"] = "cannot be longer than prompt_tokens"
    if (prompt or 0) + (output or 0) > resolved_len:
        errors["prompt_tokens" if prompt else "output_tokens"] = (
            f"prompt plus output tokens exceed max_model_len ({resolved_len})"
        )
    if model.num_params == 0 and inputs.weights_gib is None:
        errors["weights_gib"] = "the model has no parameter count: give the weights' size"
    if errors:
        raise SizingInputError(errors)

    notes: list[tuple[str, str, str]] = []
    warnings: list[str] = []
    vllm_defaults = "vLLM EngineArgs defaults (vllm/engine/arg_utils.py)"
    if gpu_count is None:
        gpu_count = tp * pp
    if utilization is None:
        utilization = rules.default_gpu_memory_utilization
        notes.append(
            ("gpu_memory_utilization", f"{utilization:g}", f"vLLM default for engine {rules.label} (CacheConfig)")
        )
    if block_size is None and model.compressed_attention is not None:
        block_size = COMPRESSED_BLOCK_SIZE
        notes.append(
            (
                "block_size",
                str(block_size),
                "DeepSeek-V4's sparse-MLA and indexer back-ends take 256 only "
                "(vllm/platforms/interface.py, _preferred_block_size_for_backends)",
            )
        )
    elif block_size is None:
        block_size = 64 if model.attention_kind == "MLA" else 16
        source = "MLA back-ends force 64 (FlashMLA)" if model.attention_kind == "MLA" else "vLLM CacheConfig default"
        notes.append(("block_size", str(block_size), source))
    elif model.attention_kind == "MLA" and block_size != 64 and model.compressed_attention is None:
        warnings.append(f"MLA attention back-ends usually need block size 64; {block_size} may be overridden")
    if batched is None and model.compressed_attention is not None and gpu.memory_bytes >= LARGEST_TIER_BYTES:
        # Only DeepSeek-V4 (sized for 0.33 alone) takes 0.33's top tier: the release that added it is unchecked.
        batched = LARGEST_TIER_BATCHED_TOKENS
        notes.append(
            (
                "max_num_batched_tokens",
                str(batched),
                "vLLM 0.33 EngineArgs.get_batch_defaults: 16384 on GPUs with >= 160 GiB (B200, B300)",
            )
        )
    elif batched is None:
        batched = default_max_num_batched_tokens(gpu)
        notes.append(("max_num_batched_tokens", str(batched), f"{vllm_defaults}: 8192 on GPUs >= 70 GiB but A100"))
    if seqs is None:
        seqs = default_max_num_seqs(gpu)
        notes.append(("max_num_seqs", str(seqs), f"{vllm_defaults}: 1024 on GPUs >= 70 GiB but A100, else 256"))
    if max_len is None:
        notes.append(("max_model_len", str(resolved_len), "the model's max_position_embeddings (vLLM default)"))
    prefix_caching = inputs.enable_prefix_caching
    if prefix_caching is None:
        prefix_caching = rules.hybrid_prefix_caching if model.has_state else True
        if model.has_state:
            notes.append(
                (
                    "enable_prefix_caching",
                    str(prefix_caching).lower(),
                    f"vLLM default for hybrid models on engine {rules.label} (on from 0.28; "
                    "engine/arg_utils.py _set_default_chunked_prefill_and_prefix_caching_args)",
                )
            )
    if model.attention_kind == "MLA" and model.indexer_bytes_per_token and block_size != 64:
        errors["block_size"] = "DeepSeek V3.2's indexer cache runs with block size 64 only (its CUDA backend)"
    if inputs.kv_cache_dtype in WHAT_IF_KV_DTYPES:
        warnings.append(
            f"{inputs.kv_cache_dtype} KV cache is a what-if: not supported by every engine "
            "(vLLM has no such --kv-cache-dtype)"
        )
    if inputs.kv_cache_dtype.startswith("fp8") and not gpu.fp8:
        warnings.append(f"{gpu.name} has no native FP8: an fp8 KV cache depends on the attention back-end")
    if inputs.kv_cache_dtype == "fp16" and model.dtype != "float16":
        warnings.append("vLLM has no fp16 --kv-cache-dtype: 'auto' caches in the model dtype")
    if inputs.weight_dtype in ("int8", "int4"):
        warnings.append(f"{inputs.weight_dtype} weights need a pre-quantised checkpoint (AWQ/GPTQ); sized, not served")
    if errors:
        raise SizingInputError(errors)
    assert speculative is not None
    resolved = dataclasses.replace(
        inputs,
        gpu_count=gpu_count,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        gpu_memory_utilization=utilization,
        block_size=block_size,
        max_num_batched_tokens=batched,
        max_num_seqs=seqs,
        max_model_len=resolved_len,
        concurrency=concurrency,
        engine_version=inputs.engine_version.strip() or "latest",
        enable_prefix_caching=prefix_caching,
        num_speculative_tokens=speculative,
    )
    return Resolved(resolved, rules, gpu_count // (tp * pp), tuple(notes), tuple(warnings))
