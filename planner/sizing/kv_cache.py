"""KV cache arithmetic as vLLM's V1 engine does it: bytes per token, pages, groups, blocks, worst cases.

Sources (vLLM repository): ``vllm/config/model.py`` (``get_num_kv_heads``, ``get_head_size``),
``vllm/v1/kv_cache_interface.py`` (``page_size_bytes``, ``SlidingWindowSpec``,
``ChunkedLocalAttentionSpec``), ``vllm/v1/core/kv_cache_utils.py`` (hybrid grouping,
``estimate_max_model_len``), ``vllm/distributed/utils.py`` (``get_pp_indices``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

from .model_spec import ATTENTION_LAYER_KINDS, LayerGroup, ModelSpec

# Bytes per cached element. int8/int4 are what-if options: vLLM has no such --kv-cache-dtype.
KV_ELEMENT_BYTES = {
    "bfloat16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}
MODEL_DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0}
WHAT_IF_KV_DTYPES = ("int8", "int4")


def kv_element_bytes(kv_cache_dtype: str, model_dtype: str) -> float:
    """``auto`` caches in the model dtype (``vllm/config/cache.py``)."""
    if kv_cache_dtype == "auto":
        return MODEL_DTYPE_BYTES[model_dtype]
    return KV_ELEMENT_BYTES[kv_cache_dtype]


def kv_heads_per_rank(model: ModelSpec, tensor_parallel_size: int) -> int:
    """MLA keeps one latent on every rank; otherwise heads split by tp and replicate when tp > heads."""
    if model.attention_kind == "MLA":
        return 1
    return max(1, model.num_kv_heads // tensor_parallel_size)


# DeepSeek V3.2's fp8 latent format: 512 fp8 values, 4 float32 scales and 64 bf16 RoPE values per token
# (v1/attention/backends/mla/flashmla_sparse.py, the "FP8 with scale" layout).
FP8_DS_MLA_BYTES = 656


def kv_bytes_per_token_per_layer(
    model: ModelSpec,
    tensor_parallel_size: int,
    element_bytes: float,
    kv_cache_dtype: str = "auto",
    group: LayerGroup | None = None,
) -> int:
    """One attention layer, one token, one rank: ``2 * heads * head_size * e`` (K and V); MLA
    ``head_size * e``. A sparse-MLA model (DeepSeek V3.2) adds its indexer key, and with an fp8 cache
    stores the latent as ``fp8_ds_mla`` (656 bytes). ``group``: a layer group with its own shape; with a V
    head unlike K's, ``heads * (head_size + head_size_v) * e`` (``AttentionSpec.state_content_size_bytes``)."""
    if model.attention_kind == "MLA":
        if model.indexer_bytes_per_token and kv_cache_dtype.startswith("fp8"):
            return FP8_DS_MLA_BYTES + model.indexer_bytes_per_token
        return math.ceil(model.head_size * element_bytes) + model.indexer_bytes_per_token
    total_heads = group.num_kv_heads if group is not None and group.num_kv_heads else model.num_kv_heads
    head_size = group.head_size if group is not None and group.head_size else model.head_size
    heads = max(1, total_heads // tensor_parallel_size)
    if group is not None and group.head_size_v:
        return math.ceil(heads * (head_size + group.head_size_v) * element_bytes)
    return math.ceil(2 * heads * head_size * element_bytes)


def group_bytes_per_token(
    model: ModelSpec, tensor_parallel_size: int, element_bytes: float, kv_cache_dtype: str
) -> tuple[int, ...]:
    """Per layer group: bytes per token per layer on one rank (0 for state and cacheless groups)."""
    return tuple(
        kv_bytes_per_token_per_layer(model, tensor_parallel_size, element_bytes, kv_cache_dtype, group)
        if group.kind in ATTENTION_LAYER_KINDS
        else 0
        for group in model.layer_groups
    )


def unified_block_sizes(group_bytes: tuple[int, ...], block_size: int) -> tuple[int, ...]:
    """Per layer group: its block size once vLLM unifies page sizes (``unify_kv_cache_spec_page_size``):
    a group whose page divides the largest page grows its block by the ratio; one that does not keeps
    its block and pads its page."""
    largest = max(group_bytes)
    return tuple(block_size * (largest // size) if size and largest % size == 0 else block_size for size in group_bytes)


def pipeline_stages(num_layers: int, pipeline_parallel_size: int) -> list[range]:
    """Layer ranges per stage; leftover layers go to the stages before the last (``get_pp_indices``)."""
    sizes = [num_layers // pipeline_parallel_size] * pipeline_parallel_size
    for i in range(2, num_layers % pipeline_parallel_size + 2):
        sizes[-i] += 1
    stages = []
    start = 0
    for size in sizes:
        stages.append(range(start, start + size))
        start += size
    return stages


@dataclass(frozen=True)
class StageGroups:
    """One pipeline stage's KV cache groups.

    vLLM groups a hybrid model's layers so every group has ``group_size`` layer slots: the smallest
    attention type's layer count (or the largest, when it is under 1.5x the smallest); each type is split into
    ``ceil(n / group_size)`` groups. One block holds a page for each of ``group_size`` layers, so
    ``num_blocks = budget // (page_size * group_size)``, and every group draws from the same pool.
    """

    num_layers: int
    group_size: int
    groups: tuple[tuple[int, int, int], ...]  # (layer group index, layers of that kind, kv cache groups)
    # The kinds ``groups`` index, when they are not the model's layer groups: DeepSeek-V4's KV cache groups hold
    # caches (compressed latents, compressor states) rather than decoder layers (compressed_attention.py).
    kinds: tuple[LayerGroup, ...] = ()
    # (layer group index, layers) of the one KV cache group when its layers' pages differ in size (vLLM's
    # ``UniformTypeKVCacheSpecs``: every layer full attention, KV heads per layer, Nemotron-NAS); ``groups``
    # then names that KV cache group by its first layer group. Empty otherwise.
    layer_counts: tuple[tuple[int, int], ...] = ()

    def bytes_per_token(self, group_bytes: tuple[int, ...]) -> int:
        """The stage's KV bytes per token on one rank, every layer's page summed (``group_bytes``: per layer
        group, one layer's bytes per token). A block of a KV cache group holds ``block_size`` times this over
        ``group_size`` layers' slots."""
        counts = self.layer_counts or tuple((index, count) for index, count, _ in self.groups)
        return sum(count * group_bytes[index] for index, count in counts)


def stage_kinds(model: ModelSpec, stage: StageGroups) -> tuple[LayerGroup, ...]:
    """What the stage's group indices refer to: its own kinds, else the model's layer groups."""
    return stage.kinds or model.layer_groups


def is_uniform_type(model: ModelSpec) -> bool:
    """Whether vLLM keeps every cached layer in one KV cache group although their pages differ: several layer
    groups of one attention type and window, differing only in shape (Nemotron-NAS's KV heads per layer).
    ``get_kv_cache_groups`` (``v1/core/kv_cache_planning.py``) finds the specs not uniform but of uniform type
    (``UniformTypeKVCacheSpecs.from_specs``, ``v1/kv_cache_interface.py``) and makes one group of all layers,
    whose page is the sum of the layers' pages; no page unification, no hybrid grouping."""
    cached = [group for group in model.layer_groups if group.kind != "none"]
    return len(cached) > 1 and len({(group.kind, group.window) for group in cached}) == 1


def stage_groups(model: ModelSpec, layers: range, *, extra_full_layers: int = 0) -> StageGroups:
    """``extra_full_layers``: draft (MTP) attention layers vLLM adds to this stage's KV cache, of the model's
    ``mtp_layer_kind`` (full attention for most models)."""
    # Counted in C over the stage's slice: a Python loop per layer made plans cost in proportion to depth.
    counts = {
        index: count
        for index, count in Counter(model.layer_pattern[layers.start : layers.stop]).items()
        if model.layer_groups[index].kind != "none"
    }
    if extra_full_layers:
        full = next((i for i, group in enumerate(model.layer_groups) if group.kind == model.mtp_layer_kind), None)
        if full is not None:
            counts[full] = counts.get(full, 0) + extra_full_layers
    if not counts:  # a pipeline stage of cacheless layers only
        return StageGroups(0, 1, ())
    if is_uniform_type(model):
        # One KV cache group over the whole model, projected on each stage (_project_kv_cache_groups_to_worker):
        # the stage's block holds a page for each of its own layers, even when they are of one shape.
        total = sum(counts.values())
        return StageGroups(total, total, ((min(counts), total, 1),), layer_counts=tuple(sorted(counts.items())))
    if len(counts) == 1:
        ((index, count),) = counts.items()
        return StageGroups(count, count, ((index, count, 1),))
    smallest = min(counts.values())
    largest = max(counts.values())
    # vLLM 0.33 _get_kv_cache_groups_uniform_page_size: the largest count when within 1.5x of the smallest.
    group_size = largest if largest < smallest * 1.5 else smallest
    groups = tuple((index, count, math.ceil(count / group_size)) for index, count in sorted(counts.items()))
    return StageGroups(sum(counts.values()), group_size, groups)


def worst_case_blocks(
    kind: str, window: int | None, length: int, block_size: int, in_flight: int, state_blocks: int = 1
) -> int:
    """Blocks one request of ``length`` tokens may hold in one group (vLLM's admission worst case).

    A state group holds ``state_blocks`` whatever the length (``MambaSpec.max_memory_usage_bytes``)."""
    if length <= 0:
        return 0
    if kind == "state":
        return state_blocks
    if kind == "full" or window is None:
        return math.ceil(length / block_size)
    if kind == "sliding_window":
        return math.ceil(min(window - 1 + in_flight, length) / block_size) + 1
    return math.ceil(min(window + in_flight, length) / block_size)  # chunked_local


def request_blocks(
    model: ModelSpec,
    stage: StageGroups,
    length: int,
    block_size: int,
    in_flight: int,
    state_blocks: int = 1,
    block_sizes: tuple[int, ...] = (),
) -> int:
    """Blocks one request of ``length`` tokens needs, summed over the stage's KV cache groups.

    ``block_sizes``: per layer group, when page unification gave groups different block sizes."""
    total = 0
    kinds = stage_kinds(model, stage)
    for index, _count, num_groups in stage.groups:
        group = kinds[index]
        size = block_sizes[index] if block_sizes else block_size
        total += num_groups * worst_case_blocks(group.kind, group.window, length, size, in_flight, state_blocks)
    return total


class Terms(NamedTuple):
    """A stage's worst case as terms (``stage_terms``), with what every length search of it needs."""

    fixed: int  # the state groups' blocks, whatever the length
    full: tuple[tuple[int, int], ...]  # (groups, block size) of groups that grow with the length
    capped: tuple[tuple[int, int, int, int], ...]  # (groups, tokens held at most, block size, extra block)
    saturation: int  # the length past which only the full groups grow (0: none is capped)
    saturated: int  # blocks of the state and capped groups once past it
    base: int  # below every cap: fixed + the capped groups' extra blocks
    rate: float  # ... and blocks per token, at least (sum of groups / block size)
    slack: int  # ... give or take one block per group


def _terms(
    kinds: tuple[LayerGroup, ...],
    groups: tuple[tuple[int, int, int], ...],
    block_size: int,
    in_flight: int,
    state_blocks: int,
    block_sizes: tuple[int, ...],
) -> Terms:
    fixed = 0
    full: list[tuple[int, int]] = []  # (groups, block size)
    capped: list[tuple[int, int, int, int]] = []  # (groups, tokens held at most, block size, extra block)
    for index, _count, num_groups in groups:
        group = kinds[index]
        size = block_sizes[index] if block_sizes else block_size
        if group.kind == "state":
            fixed += num_groups * state_blocks
        elif group.kind == "full" or group.window is None:
            full.append((num_groups, size))
        elif group.kind == "sliding_window":
            capped.append((num_groups, group.window - 1 + in_flight, size, 1))
        else:  # chunked_local
            capped.append((num_groups, group.window + in_flight, size, 0))
    return Terms(
        fixed=fixed,
        full=tuple(full),
        capped=tuple(capped),
        saturation=max((cap for _, cap, _, _ in capped), default=0),
        saturated=fixed + sum(groups * (-(-cap // size) + extra) for groups, cap, size, extra in capped),
        base=fixed + sum(groups * extra for groups, _, _, extra in capped),
        rate=sum(groups / size for groups, size in full) + sum(groups / size for groups, _, size, _ in capped),
        slack=sum(groups for groups, _ in full) + sum(groups for groups, _, _, _ in capped),
    )


def stage_terms(
    model: ModelSpec,
    stage: StageGroups,
    block_size: int,
    in_flight: int,
    state_blocks: int = 1,
    block_sizes: tuple[int, ...] = (),
) -> Terms:
    """``worst_case_blocks`` of every group of the stage, as terms: the state groups' fixed blocks, the full
    groups' (groups, block size) and the capped groups' (groups, tokens held at most, block size, the sliding
    window's extra block). Worked out once per stage by callers that ask many lengths of it."""
    return _terms(stage_kinds(model, stage), stage.groups, block_size, in_flight, state_blocks, block_sizes)


def max_length_for_blocks(
    model: ModelSpec,
    stage: StageGroups,
    blocks: int,
    concurrency: int,
    block_size: int,
    in_flight: int,
    upper: int,
    state_blocks: int = 1,
    block_sizes: tuple[int, ...] = (),
    *,
    terms: Terms | None = None,
) -> int:
    """Largest length <= ``upper`` whose worst case times ``concurrency`` fits (``estimate_max_model_len``).

    The groups' terms are read once and summed in integers in the loop (``request_blocks``' arithmetic,
    without its per-call lookups): this search runs for every row of the concurrency table."""
    if terms is None:
        terms = stage_terms(model, stage, block_size, in_flight, state_blocks, block_sizes)
    fixed, full, capped = terms.fixed, terms.full, terms.capped

    def needed(length: int) -> int:
        total = fixed
        for groups, size in full:
            total += groups * -(-length // size)
        for groups, cap, size, extra in capped:
            total += groups * (-(-min(cap, length) // size) + extra)
        return total

    low, high = 1, upper
    # Below every group's cap, needed(T) = base + sum(g * ceil(T / s)): at least base + T * rate, at most that
    # plus slack. When the answer lies there, that brackets it to a few tokens before bisecting.
    budget = blocks // concurrency
    base, rate = terms.base, terms.rate
    top = int((budget - base) / rate) + 1 if rate else upper
    if top < min((cap for _, cap, _, _ in capped), default=upper):
        high = max(1, min(high, top))
        bottom = max(1, min(high, int((budget - base - terms.slack) / rate) - 1))
        if concurrency * needed(bottom) <= blocks:
            low = bottom  # and so does every shorter length
    if low == 1 and concurrency * needed(1) > blocks:
        return 0
    while low < high:
        middle = (low + high + 1) // 2
        if concurrency * needed(middle) <= blocks:
            low = middle
        else:
            high = middle - 1
    return low
