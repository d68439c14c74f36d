"""One GPU's memory: weights, activation peak, non-torch memory, and what is left for the KV cache.

vLLM (``vllm/v1/worker/gpu_worker.py``, ``determine_available_memory``) requests
``ceil(total * gpu_memory_utilization)`` and gives the KV cache what the profiled weights, activation
peak and non-torch allocations leave of it; ``--kv-cache-memory-bytes`` skips the profile.

The activation and non-torch estimates are calibrated against real start-up logs, listed with their
sources in ``tests/planner/sizing/data/vllm_startups.json`` (mostly llm-d planner's v0.19 H100 sweep,
https://github.com/llm-d-incubation/llm-d-planner/pull/205, whose raw logs vLLM printed with
"Memory profiling takes ... torch peak memory increase ...; non-torch forward increase memory ...").
``tests/planner/sizing/test_sizing_calibration.py`` checks every point.
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
# vLLM 0.33 adds a top tier (get_batch_defaults): GPUs with 160 GiB or more (B200, B300) get 16384 batched
# tokens for the server too. Applied to DeepSeek-V4 only, the one model sized for 0.33 alone: the release that
# brought the tier was not checked, so other models keep the rule their measured start-ups confirm.
LARGEST_TIER_BYTES = 160 * GIB
LARGEST_TIER_BATCHED_TOKENS = 16384

# Weight bytes per parameter. Quantised formats keep embeddings and the LM head in 16 bits.
INT4_BYTES_PER_PARAM = 0.5 + 2 / 128  # 4-bit weights plus an fp16 scale per group of 128
MXFP4_BYTES_PER_PARAM = 0.5 + 1 / 32  # 4-bit weights plus an e8m0 scale per block of 32 (gpt-oss experts)
# Bytes per parameter including scales: NVFP4 4-bit values with an fp8 scale per 16 (0.5625); FP8 with a
# float32 scale per 128x128 block (DeepSeek-style weight_block_size); int4 with an fp16 scale per group
# of 128 (AWQ/GPTQ W4A16; GPTQ's per-channel g_idx is not counted).
NVFP4_BYTES_PER_PARAM = 0.5 + 1 / 16
FP8_BLOCK_BYTES_PER_PARAM = 1 + 4 / (128 * 128)
# DeepSeek-V4's FP8 blocks carry ue8m0 (one-byte) scales when its experts are fp4 (quant_config.py, is_scale_e8m0).
FP8_BLOCK_E8M0_BYTES_PER_PARAM = 1 + 1 / (128 * 128)
QUANTISED_BYTES_PER_PARAM = {
    "fp8": 1.0,
    "fp8_block": FP8_BLOCK_BYTES_PER_PARAM,
    "int8": 1.0,
    "int4": INT4_BYTES_PER_PARAM,
    "nvfp4": NVFP4_BYTES_PER_PARAM,
}
# vLLM pads MXFP4 expert matrices for its kernels: hidden and intermediate sizes rounded up to a
# multiple of 128 (2880 -> 2944 for gpt-oss, 4.5% more expert bytes). Logged weights at tp 1 (H100,
# llm-d-benchmark): gpt-oss-20b 13.47 GiB, gpt-oss-120b 64.38 GiB; unpadded estimates are 4.9% and
# 5.7% under, padded 1.8% and 1.7% under. At tp 2 and 4 each rank pads its own slice (1440 -> 1536,
# 720 -> 768) and v0.19 pads further: its gpt-oss-20b logs (7.01 and 3.63 GiB per GPU) are 5.6% and
# 8.9% over this estimate (0.4% and 0.5% of the KV cache).
MXFP4_PAD_MULTIPLE = 128

# Activation peak of vLLM's profile run, per GPU. The profile is a forward pass of
# max_num_batched_tokens tokens, then the dummy sampler over min(max_num_seqs, tokens) rows of full-
# vocabulary logits (gathered on every tp rank). The two happen one after the other, so the peak is
# the larger of:
#   forward: tokens x (3 x intermediate / tp + 4 x hidden) 16-bit values (gate/up and activated MLP
#            outputs plus hidden-size buffers; dense models only, an MoE's MLP is the workspace below);
#   sampler: rows x vocab x bytes-per-logit, plus the tokens x hidden 16-bit hidden states still held.
# MoE models add the fused-MoE workspace, held through the profile: tokens x top_k x
# (3 x expert_intermediate / tp + hidden) 16-bit values. Calibration (llm-d v0.19 H100 runs, 8192
# tokens, 1024 rows; every dense text-only run within 0.03 GiB):
#   * sampler-bound (vocab >= 100k): Llama 3.1 8B 1.89 GiB measured (1.87 estimated, any tp),
#     Qwen2.5 7B 2.21 (2.20), Qwen3 8B 2.21 (2.21), Gemma 2 2B / 9B / 27B 3.62 / 3.65 / 3.66
#     (3.65 / 3.67 / 3.68: activation independent of model size), phi-4 1.52 (1.49), Qwen2.5 72B
#     tp 2 2.29 (2.27); least squares over these gives 14.7-14.8 bytes per logit;
#   * forward-bound: CodeLlama 7B 0.77 (0.75), Granite 3.1 8B 0.85 (0.84); v0.10.2 LLaVA-NeXT
#     Mistral 7B at 16384 tokens 1.97 (1.81 + its vision encoder);
#   * MoE: Qwen3 30B-A3B 2.68 (2.71), Qwen1.5 MoE 2.47 (2.56), DeepSeek-V2-Lite 1.93 (2.05),
#     Mixtral tp 2 1.21 (1.29), Kimi-VL 2.92 (2.92).
SAMPLER_BYTES_PER_LOGIT = 14.8
# Releases before 0.17 profiled a heavier sampler: Qwen3 14B 5.64 GiB on 0.15 and 0.16 (5.64
# estimated), Llama 3.1 8B 4.76 (4.76), Qwen3 8B FP8 on v0.10.2 at 256 rows 1.40 (1.41).
SAMPLER_BYTES_PER_LOGIT_OLDER = 38.4
# The V0 engine (before 0.8) sampled at most 256 rows: V0's max_num_seqs default on every GPU.
V0_SAMPLER_ROWS = 256
FORWARD_HIDDEN_BUFFERS = 4
# gpt-oss's MXFP4 experts run in a kernel without the fused-MoE workspace: its profile measured
# 2.87 GiB at tp 2, the sampler alone (2.88 estimated; 3.32 with a workspace).
NO_MOE_WORKSPACE_FORMATS = ("mxfp4",)

# CUDA-graph reserve (releases from 0.21, engine.py): vLLM's estimate of the graph pool, taken off the
# KV budget with the activation. Fitted to the estimates v0.19 logged for 42 llm-d runs
# ("Estimated CUDA graph memory: 0.84 GiB total" for Llama 3.1 8B; 0.52-1.92 GiB, median error
# 0.13 GiB): 0.3 GiB + 0.016 GiB per layer.
CUDA_GRAPH_BASE_BYTES = round(0.3 * GIB)
CUDA_GRAPH_PER_LAYER_BYTES = round(0.016 * GIB)

# Non-torch memory (CUDA context, NCCL and custom all-reduce buffers). At tp 1: 0.25 GiB from 0.18
# (0.24-0.27 on llm-d's v0.19 runs, 0.46 on Granite 3.1), 0.13 GiB before (llm-d's 0.15-0.17 sweep;
# 0.13-0.14 on the llm-d-benchmark runs of early 2026). Communication buffers once tp > 1:
#   from 0.18: 1.75 GiB + 0.05 GiB per rank (2.10 GiB at tp 2, 2.20 at tp 4; v0.19 measured
#              2.06-2.11 at tp 2 and 2.13-2.21 at tp 4);
#   before:    0.38 GiB + 0.02 GiB per rank (0.55 GiB at tp 2; measured 0.54 for Qwen3 32B and 0.55
#              for Llama 3.3 70B FP8 at tp 2). The jump is placed with the tp-1 one at 0.18: no
#              tp > 1 log between the two was found.
NON_TORCH_BASE_BYTES = round(0.25 * GIB)
NON_TORCH_BASE_BYTES_OLDER = round(0.13 * GIB)
NON_TORCH_COMM_BYTES = round(1.75 * GIB)
NON_TORCH_COMM_PER_RANK_BYTES = round(0.05 * GIB)
NON_TORCH_COMM_BYTES_OLDER = round(0.38 * GIB)
NON_TORCH_COMM_PER_RANK_BYTES_OLDER = round(0.02 * GIB)


def default_max_num_batched_tokens(gpu: GpuSpec) -> int:
    return 8192 if gpu.memory_bytes >= LARGE_GPU_BYTES and not gpu.is_a100 else 2048


def default_max_num_seqs(gpu: GpuSpec) -> int:
    return 1024 if gpu.memory_bytes >= LARGE_GPU_BYTES and not gpu.is_a100 else 256


@dataclass(frozen=True)
class WeightBytes:
    total: int
    routed_experts: int  # part of ``total`` held by routed experts (read only when routed to)
    description: str


def serving_dtype(model: ModelSpec, weight_dtype: str) -> str:
    """The dtype vLLM runs the model in: ``--dtype`` when given; under ``auto`` the config's dtype, except
    that float32 checkpoints are downcast to bfloat16 (``config/model.py``, ``_resolve_auto_dtype``). The
    KV cache's ``auto`` dtype follows it (``vllm/config/cache.py``)."""
    if weight_dtype in ("bfloat16", "float16", "float32"):
        return weight_dtype
    return "bfloat16" if model.dtype == "float32" else model.dtype


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _mxfp4_padding(model: ModelSpec) -> float:
    hidden = model.hidden_size
    inner = model.expert_intermediate_size or model.intermediate_size
    if hidden <= 0 or inner <= 0:
        return 1.0
    return (_round_up(hidden, MXFP4_PAD_MULTIPLE) * _round_up(inner, MXFP4_PAD_MULTIPLE)) / (hidden * inner)


def weight_bytes(model: ModelSpec, weight_dtype: str) -> WeightBytes:
    """Bytes of the whole model's weights in ``weight_dtype`` (``auto``: the checkpoint's format)."""
    fmt = weight_dtype
    if fmt == "auto":
        fmt = model.quantization or serving_dtype(model, "auto")
    embeddings = min(model.embedding_params, model.num_params)
    experts = min(model.num_expert_params, model.num_params - embeddings)
    if fmt in ("bfloat16", "float16", "float32"):
        size = 4.0 if fmt == "float32" else 2.0
        expert_bytes = size * experts
        total = size * model.num_params
        description = f"{fmt}: {size:g} bytes per parameter"
    elif fmt in ("fp8_block_mxfp4", "fp8_block_nvfp4"):
        # DeepSeek-V4 with expert_dtype fp4 (vllm/models/deepseek_v4/quant_config.py, DeepseekV4FP8Config):
        # MXFP4 routed experts, or NVFP4 ones where moe_quant_algo says so (ModelOpt's nvidia/DeepSeek-V4-*-NVFP4),
        # FP8 128x128 blocks with ue8m0 scales elsewhere; the embeddings, LM head and the layers built without a
        # quant config (compressors, indexer weights_proj) in 16 bits.
        if fmt == "fp8_block_mxfp4":
            expert_bytes = MXFP4_BYTES_PER_PARAM * experts * _mxfp4_padding(model)
            experts_text = "MXFP4 experts (4.25 bits per parameter)"
        else:
            expert_bytes = NVFP4_BYTES_PER_PARAM * experts
            experts_text = "NVFP4 experts (4.5 bits per parameter)"
        kept = min(model.unquantized_params, model.num_params - embeddings - experts)
        rest = model.num_params - embeddings - experts - kept
        total = expert_bytes + FP8_BLOCK_E8M0_BYTES_PER_PARAM * rest + 2.0 * (embeddings + kept)
        description = (
            f"{experts_text}, FP8 128x128 blocks with ue8m0 scales elsewhere, "
            f"embeddings, LM head and {kept / 1e9:.2f}B unquantised compressor parameters 16-bit"
        )
    elif fmt == "mxfp4":
        expert_bytes = MXFP4_BYTES_PER_PARAM * experts * _mxfp4_padding(model)
        total = expert_bytes + 2.0 * (model.num_params - experts)
        description = "MXFP4 experts (4.25 bits per parameter, padded to multiples of 128), other weights 16-bit"
    else:
        if fmt.startswith("int4_g"):
            per_param = 0.5 + 2 / int(fmt.removeprefix("int4_g"))  # 4-bit values, an fp16 scale per group
        else:
            per_param = QUANTISED_BYTES_PER_PARAM[fmt]
        expert_bytes = per_param * experts
        # The checkpoint's exclude list keeps some modules in 16 bits (online --quantization fp8 does not).
        kept = min(model.unquantized_params, model.num_params - embeddings) if fmt == model.quantization else 0
        total = 2.0 * (embeddings + kept) + per_param * (model.num_params - embeddings - kept)
        description = f"{fmt}: {per_param:.5g} bytes per parameter with scales, embeddings and LM head 16-bit"
        if kept:
            description += f", {kept / 1e9:.2f}B parameters the checkpoint leaves unquantised 16-bit"
    return WeightBytes(total=math.ceil(total), routed_experts=math.ceil(expert_bytes), description=description)


def _moe_workspace(model: ModelSpec, tensor_parallel_size: int, tokens: int) -> float:
    if not model.is_moe or not model.expert_intermediate_size or model.quantization in NO_MOE_WORKSPACE_FORMATS:
        return 0.0
    per_token = model.num_experts_per_tok * (
        3 * model.expert_intermediate_size / tensor_parallel_size + model.hidden_size
    )
    return 2.0 * tokens * per_token


def cuda_graph_reserve_bytes(model: ModelSpec) -> int:
    """vLLM's CUDA-graph estimate (taken off the KV budget from 0.21): 0.3 GiB + 0.016 GiB a layer."""
    return CUDA_GRAPH_BASE_BYTES + CUDA_GRAPH_PER_LAYER_BYTES * model.num_layers


def activation_bytes(
    model: ModelSpec,
    *,
    tensor_parallel_size: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    rules: EngineRules,
) -> int:
    """Estimated activation peak of vLLM's profile run on one GPU (plus the CUDA-graph reserve from 0.21)."""
    tokens = max_num_batched_tokens
    hidden = model.hidden_size
    dense_mlp = 0.0 if model.is_moe else 3 * model.intermediate_size / tensor_parallel_size
    forward = 2.0 * tokens * (dense_mlp + FORWARD_HIDDEN_BUFFERS * hidden)
    rows = min(max_num_seqs, tokens)
    if not rules.v1_engine:
        rows = min(rows, V0_SAMPLER_ROWS)
    per_logit = SAMPLER_BYTES_PER_LOGIT if rules.lean_activation else SAMPLER_BYTES_PER_LOGIT_OLDER
    sampler = rows * model.vocab_size * per_logit + 2.0 * tokens * hidden
    peak = max(forward, sampler) + _moe_workspace(model, tensor_parallel_size, tokens)
    if rules.cuda_graph_reserve:
        peak += cuda_graph_reserve_bytes(model)
    return math.ceil(peak)


def non_torch_bytes(*, tensor_parallel_size: int, rules: EngineRules) -> int:
    if not rules.non_torch_025:
        if tensor_parallel_size == 1:
            return NON_TORCH_BASE_BYTES_OLDER
        comm = NON_TORCH_COMM_BYTES_OLDER + NON_TORCH_COMM_PER_RANK_BYTES_OLDER * tensor_parallel_size
        return NON_TORCH_BASE_BYTES_OLDER + comm
    if tensor_parallel_size == 1:
        return NON_TORCH_BASE_BYTES
    return NON_TORCH_BASE_BYTES + NON_TORCH_COMM_BYTES + NON_TORCH_COMM_PER_RANK_BYTES * tensor_parallel_size
