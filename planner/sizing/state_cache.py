"""Recurrent-state caches of hybrid models (Mamba1/2, gated delta net, linear attention) as vLLM sizes them.

Sources (vLLM 0.33.0):
- state shapes per tensor-parallel rank: ``model_executor/layers/mamba/mamba_utils.py``
  (``MambaStateShapeCalculator``) and the models' ``get_mamba_state_shape_from_config``; dtypes:
  ``MambaStateDtypeCalculator`` (the conv state in ``mamba_cache_dtype``, ``auto`` = the model dtype; the
  SSM / recurrent state in ``mamba_ssm_cache_dtype``, ``auto`` = the conv dtype), with the models' own
  defaults (``model_executor/models/config.py``: Nemotron-H float32 unless its config says otherwise,
  Qwen3.5 its ``mamba_ssm_dtype``);
- page = the sum of the state tensors' bytes (``MambaSpec.page_size_bytes``), padded to the attention page;
- attention block size grown until one attention page holds a state page
  (``platforms/interface.py``, ``_align_hybrid_block_size``);
- state blocks one request holds (``MambaSpec.max_memory_usage_bytes``): ``1 + speculative`` with prefix
  caching off (``mamba_cache_mode="none"``), ``2 + speculative + prefill checkpoint blocks`` with it on
  (``"align"``, the mode prefix caching selects: ``model_executor/models/config.py``, ``MambaModelConfig``).
"""

from __future__ import annotations

import math

from .errors import SizingInputError
from .model_spec import StateSpec

STATE_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# Smallest kernel block of the attention back-ends vLLM picks on NVIDIA GPUs (FlashAttention and
# FlashInfer: MultipleOf(16)); MLA hybrids are raised to 128 (``_align_hybrid_block_size``).
ATTENTION_KERNEL_BLOCK = 16
MLA_HYBRID_KERNEL_BLOCK = 128
# FlashInfer's GDN prefill exports checkpoints on a 64-token grid (``v1/attention/backends/gdn_attn.py``,
# FLASHINFER_GDN_CHECKPOINT_ALIGNMENT), which the align-mode block size must be a multiple of.
GDN_FLASHINFER_CHECKPOINT_ALIGNMENT = 64
# FlashKDA's prefill checkpoints land on a 16-token grid (model_executor/layers/mamba/kda_checkpoint.py,
# kda_prefill_checkpoint_alignment).
KDA_FLASHKDA_CHECKPOINT_ALIGNMENT = 16


def _divide(errors: dict[str, str], field: str, value: int, tp: int) -> int:
    """vLLM's ``divide`` asserts an even split across tensor-parallel ranks."""
    if value % tp:
        errors.setdefault("tensor_parallel_size", f"{tp} does not divide the state's {field} ({value})")
        return value // tp or 1
    return value // tp


def state_tensors(
    state: StateSpec, tp: int, num_speculative_tokens: int, model_dtype_bytes: int
) -> tuple[tuple[int, int], ...]:
    """``(elements, dtype_bytes)`` of each state tensor on one tp rank (conv state first).

    ``model_dtype_bytes`` is the dtype vLLM runs the model in (the conv state's ``auto``).

    Raises ``SizingInputError`` when tp does not split the state evenly (vLLM refuses to start).
    """
    errors: dict[str, str] = {}
    conv_bytes = STATE_DTYPE_BYTES[state.conv_dtype] if state.conv_dtype else model_dtype_bytes
    ssm_bytes = STATE_DTYPE_BYTES[state.ssm_dtype] if state.ssm_dtype else conv_bytes
    spec = num_speculative_tokens
    tensors: tuple[tuple[int, int], ...]
    if state.kind == "mamba2":
        # mamba2_state_shape: groups replicated up to tp when tp does not divide them.
        groups = state.n_groups + (0 if state.n_groups % tp == 0 else tp - state.n_groups)
        conv_dim = state.intermediate_size + 2 * groups * state.state_size
        conv = _divide(errors, "conv dim", conv_dim, tp) * (state.conv_kernel - 1 + spec)
        ssm = _divide(errors, "heads", state.num_heads, tp) * state.head_dim * state.state_size
        tensors = ((conv, conv_bytes), (ssm, ssm_bytes))
    elif state.kind == "mamba1":
        inner = _divide(errors, "intermediate size", state.intermediate_size, tp)
        tensors = ((inner * (state.conv_kernel - 1), conv_bytes), (inner * state.state_size, ssm_bytes))
    elif state.kind == "gdn":
        conv_dim = 2 * state.num_k_heads * state.head_k_dim + state.num_heads * state.head_dim
        conv = _divide(errors, "conv dim", conv_dim, tp) * (state.conv_kernel - 1 + spec)
        ssm = _divide(errors, "value heads", state.num_heads, tp) * state.head_dim * state.head_k_dim
        tensors = ((conv, conv_bytes), (ssm, ssm_bytes))
    elif state.kind == "kda":
        # kda_state_shape with num_k_heads = num_heads and head_k_dim = head_dim (its defaults, as both Kimi
        # layers call it): conv (heads x head_dim + 2 x heads x head_dim) / tp by kernel - 1 + spec,
        # recurrent (heads / tp, head_dim, head_dim).
        conv_dim = 3 * state.num_heads * state.head_dim
        conv = _divide(errors, "conv dim", conv_dim, tp) * (state.conv_kernel - 1 + spec)
        ssm = _divide(errors, "heads", state.num_heads, tp) * state.head_dim * state.head_dim
        tensors = ((conv, conv_bytes), (ssm, ssm_bytes))
    else:  # linear attention: one (heads / tp, head_dim, head_dim) state in the conv dtype
        tensors = ((_divide(errors, "heads", state.num_heads, tp) * state.head_dim * state.head_dim, conv_bytes),)
    if errors:
        raise SizingInputError(errors)
    return tensors


def state_page_bytes(state: StateSpec, tp: int, num_speculative_tokens: int, model_dtype_bytes: int) -> int:
    """One state layer's page on one tp rank, unpadded (``MambaSpec.page_size_bytes``)."""
    tensors = state_tensors(state, tp, num_speculative_tokens, model_dtype_bytes)
    return sum(elements * size for elements, size in tensors)


def has_prefill_checkpoint(
    state: StateSpec, *, gdn_flashinfer: bool, mamba2_rule: bool, gdn_rule: bool, kda_flashkda: bool = False
) -> bool:
    """Whether align mode adds a prefill checkpoint block: Mamba2 mixers always (``mamba_mixer2.py``, from
    0.32), GDN only with FlashInfer's prefill kernel (``qwen_gdn_linear_attn.py``, from 0.33), KDA only on
    FlashKDA (``models/kimi_k3/nvidia/kda.py``, ``get_kv_cache_spec``; read in 0.33, so under the 0.33 rule);
    ``*_rule`` say whether the engine release has them (engine.py)."""
    if state.kind == "mamba2":
        return mamba2_rule
    if state.kind == "kda":
        return kda_flashkda and gdn_rule
    return state.kind == "gdn" and gdn_flashinfer and gdn_rule


def state_blocks_per_request(*, align: bool, num_speculative_tokens: int, checkpoint: bool) -> int:
    """``cdiv(MambaSpec.max_memory_usage_bytes, page)``: the state blocks one request holds."""
    if align:
        return 2 + num_speculative_tokens + (1 if checkpoint else 0)
    return 1 + num_speculative_tokens


def hybrid_block_size(
    *,
    state_page: int,
    attention_bytes_per_token: int,
    requested_block_size: int,
    mla: bool,
    checkpoint_alignment: int,
) -> int:
    """The attention block size vLLM settles on so one attention page holds a state page.

    ``_align_hybrid_block_size``: ``k = max(kernel minimum, block_size)`` (128 at least for MLA), made a
    multiple of the checkpoint alignment in align mode; ``block = k * cdiv(state_page, k * bytes/token)``
    rounded up to the back-ends' common kernel block; never below the requested block size.
    """
    kernel = max(ATTENTION_KERNEL_BLOCK, requested_block_size)
    if mla:
        kernel = max(kernel, MLA_HYBRID_KERNEL_BLOCK)
    kernel = math.lcm(kernel, max(1, checkpoint_alignment))
    block = kernel * -(-state_page // (kernel * attention_bytes_per_token))
    block = ATTENTION_KERNEL_BLOCK * -(-block // ATTENTION_KERNEL_BLOCK)
    return max(block, requested_block_size)


_HOPPER = ("h100", "h200", "h800", "h20", "gh200")
_BLACKWELL = ("b200", "b300", "gb200", "gb300", "rtx 50", "rtx-50", "rtx pro 6000", "rtx-pro-6000")


def gdn_flashinfer_prefill(gpu_name: str, state: StateSpec) -> bool:
    """Whether vLLM 0.33 runs gated-delta-net prefill on FlashInfer on this GPU (``qwen_gdn_linear_attn.py``,
    ``_resolve_gdn_prefill_backend``, backend ``auto``): Hopper always; Blackwell with 128-wide keys on a
    CUDA 13 runtime (0.33's wheels are built for torch 2.14 / CUDA 13); Triton elsewhere (Ada, Ampere, ROCm).
    Only FlashInfer exports prefill checkpoints, which adds align mode's checkpoint block."""
    if state.kind != "gdn":
        return False
    name = gpu_name.lower()
    if any(tag in name for tag in _HOPPER):
        return True
    return state.head_k_dim == 128 and any(tag in name for tag in _BLACKWELL)


_AMD = ("mi300", "mi325", "mi350", "mi355", "instinct", "amd", "radeon")


def kda_flashkda_prefill(gpu_name: str, state: StateSpec, model_dtype: str) -> bool:
    """Whether vLLM 0.33 prefills this KDA layer on FlashKDA (``models/kimi_k3/nvidia/kda.py``,
    ``resolve_kda_prefill_backend`` with backend ``auto``, ``is_flashkda_supported``): CUDA compute capability
    9.x, 10.x or 12.x (Hopper, Blackwell), bfloat16 activations, 128-wide heads, a bounded gate (``state.flashkda``);
    Triton elsewhere (Ampere, Ada). Only FlashKDA exports prefill checkpoints.

    Raises ``SizingInputError`` on ROCm GPUs: vLLM runs Kimi-K3 there through ``models/kimi_k3/amd/``, whose
    checkpoint block depends on which aiter prefill kernel the installation has (gluon or fused)."""
    if state.kind != "kda":
        return False
    name = gpu_name.lower()
    if any(tag in name for tag in _AMD):
        raise SizingInputError(
            {
                "gpu": f"{gpu_name.strip()!r}: Kimi delta attention on ROCm (vllm/models/kimi_k3/amd/kda.py) adds a "
                "prefill checkpoint block only with the aiter 'fused' prefill kernel, which depends on the "
                "installation; not sized"
            }
        )
    if not state.flashkda or model_dtype != "bfloat16":
        return False
    return any(tag in name for tag in (*_HOPPER, *_BLACKWELL))
