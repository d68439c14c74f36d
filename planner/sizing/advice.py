"""What to change when a plan misses its targets: each option re-planned, so the advice says what it buys."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .figures import replica_concurrency
from .hardware import GIB

if TYPE_CHECKING:
    from .hardware import GpuSpec
    from .inputs import PlanInputs
    from .model_spec import ModelSpec
    from .plan import Plan
    from .search import Candidate

MAX_TENSOR_PARALLEL = 8  # one node
MAX_PIPELINE_GPUS = 32  # four nodes of eight: the most GPUs the advice suggests across nodes
# Weight formats the advice tries on a 16-bit checkpoint, smallest change first.
SMALLER_WEIGHTS = ("fp8", "int4")


@dataclass(frozen=True)
class AdviceRow:
    """One suggestion. ``changes`` holds the PlanInputs fields to change to follow it."""

    kind: str
    message: str
    changes: dict[str, Any] = field(default_factory=dict)


def _summary(plan: Plan) -> str:
    concurrency = plan.inputs.concurrency
    if not plan.starts:
        return f"vLLM still would not start ({plan.shortfall_bytes_per_gpu / GIB:.2f} GiB short per GPU)"
    assert plan.estimates is not None  # a plan that starts has them
    text = (
        f"{plan.kv_capacity_tokens:,} KV tokens per replica, {plan.max_concurrency:.2f} concurrent requests of "
        f"{plan.inputs.max_model_len:,} tokens, longest context at concurrency {concurrency}: "
        f"{plan.max_context_len:,} tokens, TPOT ~{plan.estimates.tpot_ms:.1f} ms"
    )
    return text + (" — meets the targets" if plan.meets_sla else "")


def valid_tensor_parallel(model: ModelSpec, tp: int) -> bool:
    """vLLM needs tp to divide the attention heads, and KV heads to split or replicate evenly."""
    if model.num_attention_heads % tp:
        return False
    if model.attention_kind == "MLA":
        return True
    # Layer groups with KV heads of their own (Gemma 4's full layers, Nemotron-NAS) must split evenly too.
    heads = {model.num_kv_heads, *(group.num_kv_heads for group in model.layer_groups if group.num_kv_heads)}
    return all(kv_heads % tp == 0 or tp % kv_heads == 0 for kv_heads in heads)


def advise(
    plan: Plan,
    *,
    requested: PlanInputs,
    replan: Callable[[PlanInputs], Plan | None],
    search: Callable[[PlanInputs], Sequence[Candidate]],
    gpus: Sequence[GpuSpec],
) -> tuple[AdviceRow, ...]:
    """Advice for a plan that misses its SLA (does not fit, or misses a TPOT/TTFT target).

    ``requested`` is the caller's inputs before defaults were filled in: options that change the GPU
    start from it, so GPU-dependent defaults (batched tokens, sequences) are chosen afresh.
    """
    if plan.meets_sla:
        return ()
    inputs = plan.inputs
    model = inputs.model
    rows: list[AdviceRow] = []

    if inputs.weights_gib is None and (
        inputs.weight_dtype in ("bfloat16", "float16") or (inputs.weight_dtype == "auto" and model.quantization is None)
    ):
        for weight_dtype in SMALLER_WEIGHTS:
            alternative = replan(dataclasses.replace(inputs, weight_dtype=weight_dtype))
            if alternative is None or alternative.weights_bytes_per_gpu >= plan.weights_bytes_per_gpu:
                continue
            how = (
                "--quantization fp8, online from the 16-bit checkpoint"
                if weight_dtype == "fp8"
                else "a pre-quantised AWQ/GPTQ checkpoint"
            )
            message = (
                f"{weight_dtype} weights ({how}): {plan.weights_bytes_per_gpu / GIB:.2f} -> "
                f"{alternative.weights_bytes_per_gpu / GIB:.2f} GiB per GPU; {_summary(alternative)}."
            )
            if weight_dtype == "fp8" and not inputs.gpu.fp8:
                message += f" {inputs.gpu.name} has no native FP8: vLLM runs fp8 weights there weight-only (slower)."
            rows.append(AdviceRow("weight_dtype", message, {"weight_dtype": weight_dtype}))
            if alternative.meets_sla:
                break

    # DeepSeek-V4's cache is fp8_ds_mla under auto already: fp8 would change nothing.
    if inputs.kv_cache_dtype not in ("fp8", "fp8_e4m3", "fp8_e5m2", "int8", "int4") and not (
        model.compressed_attention is not None
    ):
        alternative = replan(dataclasses.replace(inputs, kv_cache_dtype="fp8"))
        if alternative is not None:
            message = (
                f"FP8 KV cache (--kv-cache-dtype fp8): {plan.kv_bytes_per_token_per_gpu:,} -> "
                f"{alternative.kv_bytes_per_token_per_gpu:,} bytes per token per GPU; {_summary(alternative)}."
            )
            if not inputs.gpu.fp8:
                message += f" {inputs.gpu.name} has no native FP8: support depends on the attention backend."
            rows.append(AdviceRow("kv_cache_dtype", message, {"kv_cache_dtype": "fp8"}))

    tp = inputs.tensor_parallel_size * 2
    while tp * inputs.pipeline_parallel_size <= MAX_TENSOR_PARALLEL and not valid_tensor_parallel(model, tp):
        tp *= 2
    if tp * inputs.pipeline_parallel_size <= MAX_TENSOR_PARALLEL:
        replicas = plan.data_parallel_size
        changes: dict[str, Any] = {
            "tensor_parallel_size": tp,
            "gpu_count": replicas * tp * inputs.pipeline_parallel_size,
        }
        alternative = replan(dataclasses.replace(inputs, **changes))
        if alternative is not None:
            rows.append(
                AdviceRow(
                    "tensor_parallel_size",
                    f"Tensor parallel {tp} (--tensor-parallel-size {tp}, {changes['gpu_count']} GPUs): "
                    f"{max(0, alternative.kv_budget_bytes_per_gpu) / GIB:.2f} GiB of KV cache per GPU; "
                    f"{_summary(alternative)}.",
                    changes,
                )
            )
    else:
        _advise_pipeline(plan, replan, rows)

    if plan.max_concurrency < _replica_concurrency(plan) and plan.max_context_len > 0:
        assert inputs.max_model_len is not None  # resolved by compute_plan
        length = min(plan.max_context_len, inputs.max_model_len)
        rows.append(
            AdviceRow(
                "max_model_len",
                f"Shorter context (--max-model-len {length}): {inputs.concurrency} concurrent requests of up to "
                f"{length:,} tokens fit.",
                {"max_model_len": length},
            )
        )

    bigger = sorted((gpu for gpu in gpus if gpu.memory_bytes > inputs.gpu.memory_bytes), key=lambda g: g.memory_bytes)
    chosen = None
    utilization = inputs.gpu_memory_utilization or 1.0
    for gpu in bigger:
        if plan.weights_bytes_per_gpu >= gpu.memory_bytes * utilization:
            continue  # the weights alone fill it: no need to plan it to know it cannot meet the targets
        alternative = replan(dataclasses.replace(requested, gpu=gpu))
        if alternative is not None and alternative.meets_sla:
            chosen = (gpu, alternative)
            break
    if chosen is None and bigger:
        alternative = replan(dataclasses.replace(requested, gpu=bigger[-1]))
        if alternative is not None:
            chosen = (bigger[-1], alternative)
    if chosen is not None:
        gpu, alternative = chosen
        rows.append(
            AdviceRow(
                "gpu",
                f"Bigger GPU: {gpu.name} ({gpu.memory_gib:.1f} GiB CUDA-visible): {_summary(alternative)}.",
                {"gpu": gpu.slug},
            )
        )

    candidates = search(requested)
    if candidates:
        best = candidates[0]
        cost = f"${best.cost_per_hour:.2f}/h" if best.cost_per_hour is not None else best.price_note
        rows.append(
            AdviceRow(
                "search",
                f"Cheapest catalog configuration meeting the targets: {best.gpu_count} x {best.gpu.name} "
                f"(tp {best.tensor_parallel_size}, {best.data_parallel_size} replica(s), KV {best.kv_cache_dtype}), "
                f"{cost}.",
                {
                    "gpu": best.gpu.slug,
                    "gpu_count": best.gpu_count,
                    "tensor_parallel_size": best.tensor_parallel_size,
                    "pipeline_parallel_size": 1,
                    "kv_cache_dtype": best.kv_cache_dtype,
                },
            )
        )
    else:
        rows.append(AdviceRow("search", "No catalog configuration of up to 8 GPUs meets these targets."))
    return tuple(rows)


def _advise_pipeline(plan: Plan, replan: Callable[[PlanInputs], Plan | None], rows: list[AdviceRow]) -> None:
    """More GPUs once tensor parallel fills a node: pipeline stages across nodes, the fewest that work."""
    inputs = plan.inputs
    pp = inputs.pipeline_parallel_size * 2
    tp = inputs.tensor_parallel_size
    fallback: tuple[dict[str, Any], Plan] | None = None
    while tp * pp <= MAX_PIPELINE_GPUS and pp <= inputs.model.num_layers:
        changes: dict[str, Any] = {"pipeline_parallel_size": pp, "gpu_count": plan.data_parallel_size * tp * pp}
        alternative = replan(dataclasses.replace(inputs, **changes))
        if alternative is not None and alternative.starts:
            fallback = (changes, alternative)
            if alternative.meets_sla:
                break
        pp *= 2
    if fallback is not None:
        changes, alternative = fallback
        rows.append(
            AdviceRow(
                "pipeline_parallel_size",
                f"More GPUs: pipeline parallel {changes['pipeline_parallel_size']} across nodes "
                f"(--pipeline-parallel-size {changes['pipeline_parallel_size']}, {changes['gpu_count']} GPUs): "
                f"{_summary(alternative)}.",
                changes,
            )
        )


def _replica_concurrency(plan: Plan) -> int:
    return replica_concurrency(plan)
