"""The ``vllm serve`` command line that deploys a plan."""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .inputs import PlanInputs

GIB = 2**30
# What the command names when the model has no Hugging Face repo id (a pasted config.json without one).
MODEL_PLACEHOLDER = "<hf-repo-id>"
# Checkpoint formats that are FP8 already: asking for fp8 weights adds no --quantization flag.
FP8_CHECKPOINT_FORMATS = ("fp8", "fp8_block", "fp8_block_mxfp4", "fp8_block_nvfp4")


def vllm_command(inputs: PlanInputs, *, data_parallel_size: int = 1) -> str:
    """``inputs`` must have its defaults resolved (``Plan.inputs``)."""
    model = inputs.model
    parts = [
        "vllm serve",
        shlex.quote(model.hf_id) if model.hf_id else MODEL_PLACEHOLDER,
        f"--tensor-parallel-size {inputs.tensor_parallel_size}",
        f"--pipeline-parallel-size {inputs.pipeline_parallel_size}",
    ]
    if data_parallel_size > 1:
        parts.append(f"--data-parallel-size {data_parallel_size}")
    parts += [f"--max-model-len {inputs.max_model_len}", f"--max-num-seqs {inputs.max_num_seqs}"]
    if inputs.kv_cache_memory_gib is not None:
        parts.append(f"--kv-cache-memory-bytes {round(inputs.kv_cache_memory_gib * GIB)}")
    else:
        parts.append(f"--gpu-memory-utilization {inputs.gpu_memory_utilization:g}")
    # vLLM has no "fp16" cache dtype: "auto" caches in the model dtype.
    kv_dtype = "auto" if inputs.kv_cache_dtype == "fp16" else inputs.kv_cache_dtype
    parts += [
        f"--kv-cache-dtype {kv_dtype}",
        f"--block-size {inputs.block_size}",
        f"--max-num-batched-tokens {inputs.max_num_batched_tokens}",
    ]
    if model.has_state and inputs.enable_prefix_caching is not None:
        # Stated for hybrid models: the default changed in 0.28, and it decides the state blocks per request.
        parts.append("--enable-prefix-caching" if inputs.enable_prefix_caching else "--no-enable-prefix-caching")
    elif inputs.enable_prefix_caching is False:
        parts.append("--no-enable-prefix-caching")
    if inputs.num_speculative_tokens:
        method = "mtp" if model.num_mtp_layers else "ngram"
        speculative = {"method": method, "num_speculative_tokens": inputs.num_speculative_tokens}
        parts.append(f"--speculative-config {shlex.quote(json.dumps(speculative))}")
    if inputs.weight_dtype in ("bfloat16", "float16", "float32"):
        parts.append(f"--dtype {inputs.weight_dtype}")
    elif inputs.weight_dtype == "fp8" and model.quantization not in FP8_CHECKPOINT_FORMATS:
        parts.append("--quantization fp8")  # online FP8 weight quantisation of a 16-bit checkpoint
    return " ".join(parts)
