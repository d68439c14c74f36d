"""One GPU's memory: weights, activation peak, non-torch memory, and what is left for the KV cache.

vLLM (``vllm/v1/worker/gpu_worker.py``, ``determine_available_memory``) requests
``ceil(total * gpu_memory_utilization)`` and gives the KV cache what the profiled weights, activation
peak and non-torch allocations leave of it; ``--kv-cache-memory-bytes`` skips the profile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .engine import EngineRules
from .hardware import GIB, GpuSpec
from .model_spec import ModelSpec

# Default scheduler sizes (vLLM ``EngineArgs._set_default_args``, OpenAI server): GPUs with 70 GiB or
# more, the A100 excepted, get 8192 batched tokens and 1024 sequences; others 2048 and 256.
LARGE_GPU_BYTES = 70 * GIB

# Weight bytes per parameter. Quantised formats keep embeddings and the LM head in 16 bits.
INT4_BYTES_PER_PARAM = 0.5 + 2 / 128  # 4-bit weights plus an fp16 scale per group of 128
MXFP4_BYTES_PER_PARAM = 0.5 + 1 / 32  # 4-bit weights plus an e8m0 scale per block of 32 (gpt-oss experts)

# Activation peak of vLLM's profile run (a forward pass of max_num_batched_tokens tokens, then the
# dummy sampler over max_num_seqs rows of logits). Per token: the MLP's gate/up and activated outputs
# (3 x intermediate / tp, or top_k x (3 x expert_intermediate / tp + hidden) in the fused MoE caches)
# plus four hidden-size buffers, in 16-bit; per sampled row: vocab logits in float32, twice (logits
# and probabilities). Calibrated on the reference's measured H100 runs (vLLM 0.19, 8192 tokens,
# 1024 seqs): Llama 3.1 8B 1.884 GiB estimated vs 1.89 measured, Qwen3 14B 2.27 vs 2.23.
ACTIVATION_HIDDEN_BUFFERS = 4
LOGITS_BYTES_PER_ENTRY = 8
# Releases before the lean profile measured about 2.5x more: Llama 3.1 8B 4.76 GiB (estimate 4.73),
# Qwen3 14B 5.64 GiB (estimate 5.69).
OLDER_ACTIVATION_FACTOR = 2.51

# Non-torch memory (CUDA context, NCCL and custom all-reduce buffers): measured 0.25 GiB at tp 1 on
# vLLM 0.19 (0.13 GiB on an older release), about 2.1 GiB at tp 2-4. Communication buffers are
# modelled as 1.75 GiB + 0.05 GiB per rank once tp > 1 (2.10 GiB at tp 2, 2.20 at tp 4).
NON_TORCH_BASE_BYTES = round(0.25 * GIB)
NON_TORCH_BASE_BYTES_OLDER = round(0.13 * GIB)
NON_TORCH_COMM_BYTES = round(1.75 * GIB)
NON_TORCH_COMM_PER_RANK_BYTES = round(0.05 * GIB)


def default_max_num_batched_tokens(gpu: GpuSpec) -> int:
    return 8192 if gpu.memory_bytes >= LARGE_GPU_BYTES and not gpu.is_a100 else 2048


def default_max_num_seqs(gpu: GpuSpec) -> int:
    return 1024 if gpu.memory_bytes >= LARGE_GPU_BYTES and not gpu.is_a100 else 256


@dataclass(frozen=True)
class WeightBytes:
    total: int
    routed_experts: int  # part of ``total`` held by routed experts (read only when routed to)
    description: str


def weight_bytes(model: ModelSpec, weight_dtype: str) -> WeightBytes:
    """Bytes of the whole model's weights in ``weight_dtype`` (``auto``: the checkpoint's format)."""
    fmt = weight_dtype
    if fmt == "auto":
        fmt = model.quantization or "bfloat16"  # float32 checkpoints load as 16-bit under dtype=auto
    embeddings = min(model.embedding_params, model.num_params)
    experts = min(model.num_expert_params, model.num_params - embeddings)
    if fmt in ("bfloat16", "float16"):
        expert_bytes = 2.0 * experts
        total = 2.0 * model.num_params
        description = f"{fmt}: 2 bytes per parameter"
    elif fmt == "mxfp4":
        expert_bytes = MXFP4_BYTES_PER_PARAM * experts
        total = expert_bytes + 2.0 * (model.num_params - experts)
        description = "MXFP4 experts (4.25 bits per parameter), other weights 16-bit"
    else:
        per_param = {"fp8": 1.0, "int8": 1.0, "int4": INT4_BYTES_PER_PARAM}[fmt]
        expert_bytes = per_param * experts
        total = 2.0 * embeddings + per_param * (model.num_params - embeddings)
        description = f"{fmt}: {per_param:g} bytes per parameter, embeddings and LM head 16-bit"
        if fmt == "int4":
            description += " (fp16 scale per 128-weight group)"
    return WeightBytes(total=math.ceil(total), routed_experts=math.ceil(expert_bytes), description=description)


def activation_bytes(
    model: ModelSpec,
    *,
    tensor_parallel_size: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    rules: EngineRules,
) -> int:
    """Estimated activation peak of vLLM's profile run on one GPU."""
    mlp_width = 3 * model.intermediate_size / tensor_parallel_size
    if model.is_moe and model.expert_intermediate_size:
        routed = model.num_experts_per_tok * (
            3 * model.expert_intermediate_size / tensor_parallel_size + model.hidden_size
        )
        mlp_width = max(routed, mlp_width)
    per_token = 2 * (mlp_width + ACTIVATION_HIDDEN_BUFFERS * model.hidden_size)
    logits = max_num_seqs * model.vocab_size * LOGITS_BYTES_PER_ENTRY
    peak = max_num_batched_tokens * per_token + logits
    if not rules.lean_activation:
        peak *= OLDER_ACTIVATION_FACTOR
    return math.ceil(peak)


def non_torch_bytes(*, tensor_parallel_size: int, rules: EngineRules) -> int:
    base = NON_TORCH_BASE_BYTES if rules.lean_activation else NON_TORCH_BASE_BYTES_OLDER
    if tensor_parallel_size == 1:
        return base
    return base + NON_TORCH_COMM_BYTES + NON_TORCH_COMM_PER_RANK_BYTES * tensor_parallel_size
