"""DeepSeek-V4's compressed attention as vLLM 0.33 caches it: the caches of each layer, their pages, and
how vLLM packs them into KV cache groups that share one block pool.

Read from vLLM 0.33.0's source (paths inside the ``vllm`` package):

* Which caches a layer has (``models/deepseek_v4/attention.py``, ``DeepseekV4Attention.__init__`` and
  ``get_kv_cache_spec``; ``models/deepseek_v4/compressor.py``): every layer a sliding-window latent cache
  (``DeepseekV4SWACache``, ``v1/attention/backends/mla/sparse_swa.py``: 64-token blocks, the config's
  ``sliding_window``); a layer with compress ratio r > 1 (``compress_ratios``, 0 meaning none) also a
  compressed latent cache (one state per r tokens, ``MLAAttentionSpec`` with ``tokens_per_state=r`` in blocks
  of ``cache_config.block_size`` tokens) and an fp32 compressor-state cache (``CompressorStateCache``: blocks
  of 4 tokens for r = 4, 8 for r = 128, window 8 and 128, 2 x coff x head_dim floats per token with
  coff 2 for r = 4, 1 otherwise); a ratio-4 layer also an indexer key cache (``DeepseekV4IndexerCache``:
  fp8 key plus a float32 scale per 128 values, one per 4 tokens) with its own compressor state
  (head_dim ``index_head_dim``). MTP layers (ratio 1) are the draft model's: only with speculative decoding.
* The latent format (``_resolve_dsv4_kv_cache_dtype``): the FlashMLA backends (every CUDA GPU but SM12x)
  store ``fp8_ds_mla``, 584 bytes per state (448 fp8 NoPE + 64 bf16 RoPE + 8 scale bytes) whether
  ``--kv-cache-dtype`` is ``auto`` or ``fp8``; every page is padded to a multiple of 576 bytes
  (``v1/kv_cache_interface.py``, ``_apply_alignment_padding``).
* Block size: 256, the only kernel block of the sparse-MLA and indexer backends
  (``models/deepseek_v4/sparse_mla.py``, ``v1/attention/backends/mla/indexer.py``), picked by
  ``platforms/interface.py`` (``_preferred_block_size_for_backends``).
* Grouping (``v1/core/kv_cache_planning.py``, ``_get_packed_kv_cache_groups``): the indexer backend asks for
  a block-outermost layout (BLHNC), so layers of one type (same block size, same window) form a bucket whose
  layers of different page sizes pack side by side inside each block; balanced buckets (as many layers of
  each page size) split into groups of ``_approximate_gcd`` repeats. Bytes per block are the widest group's
  pages (``_get_kv_cache_bytes_per_block``), rounded up to the lcm of the layers' block-stride alignments (1
  here: the 256-token kernel block equals the block).
* A request's blocks (``v1/core/kv_cache_utils.py``, ``get_max_concurrency_for_kv_cache_config``): per group
  ``cdiv(max_memory_usage_bytes, page_size_bytes)``: ``cdiv(L, block)`` for the compressed latents and
  indexer keys (``FullAttentionSpec``), ``cdiv(min(window - 1 + in_flight, L), block) + 1`` for the sliding
  latents and compressor states (``SlidingWindowSpec.max_admission_blocks_per_request``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache

# What vLLM 0.33's DeepSeek-V4 code hard-codes: its fp8_ds_mla state is 584 bytes for a 512-wide latent with a
# 64-wide RoPE part, its pages are padded to 576-byte multiples, and its compressors exist for ratios 4 and 128.
HEAD_DIM = 512
ROPE_HEAD_DIM = 64
FP8_DS_MLA_STATE_BYTES = (HEAD_DIM - ROPE_HEAD_DIM) + 2 * ROPE_HEAD_DIM + ((HEAD_DIM - ROPE_HEAD_DIM) // 64 + 1)
PAGE_ALIGNMENT = 576
SWA_BLOCK_SIZE = 64
BLOCK_SIZE = 256
COMPRESSOR_BLOCK_SIZES = {4: 4, 128: 8}
INDEXER_RATIO = 4
STATE_DTYPE_BYTES = 4  # float32 compressor state
INDEXER_QUANT_BLOCK = 128  # one float32 scale per 128 fp8 index-key values
# The lcm of the layers' block-stride alignments, which a block-outermost block rounds up to: 1. The sparse-MLA
# and indexer layers get MultipleOf(256) (v1/worker/utils.py, customize_attention_spec: their only kernel block),
# which is no constraint when the block is 256 tokens (KVCacheSpec.get_block_stride_alignment); the sliding and
# compressor-state layers declare none.
BLOCK_STRIDE_ALIGNMENT = 1


@dataclass(frozen=True)
class CompressedAttention:
    """A DeepSeek-V4 model's attention caches, as its config gives them.

    ``compress_ratios``: per decoder layer (MTP layers left out), 1 for a sliding-window-only layer (the
    config's 0), else the number of tokens one compressed state covers."""

    compress_ratios: tuple[int, ...]
    sliding_window: int
    index_head_dim: int
    index_n_heads: int = 0
    index_topk: int = 0
    # Output-projection groups: each tensor-parallel rank takes o_groups / tp of them (attention.py, wo_a).
    o_groups: int = 1


@dataclass(frozen=True)
class CacheLayerKind:
    """One kind of per-layer cache: ``kind`` "full" (grows with the context) or "sliding_window"."""

    name: str
    kind: str
    window: int | None
    block_size: int
    page_bytes: int
    num_layers: int


@dataclass(frozen=True)
class CacheGroupKind:
    """A bucket of caches of one type (one block size and window) and the KV cache groups it splits into.

    ``caches``: (cache name, layers of it in one group, page bytes); ``num_groups`` groups hold them,
    ``group_bytes`` is the widest of those groups' pages per block."""

    kind: str
    window: int | None
    block_size: int
    caches: tuple[tuple[str, int, int], ...]
    num_layers: int
    num_groups: int
    group_bytes: int


@dataclass(frozen=True)
class PackedCache:
    """vLLM's KV cache groups for a compressed-attention model and the bytes one block spans."""

    kinds: tuple[CacheLayerKind, ...]
    groups: tuple[CacheGroupKind, ...]
    bytes_per_block: int
    repeats_per_group: int | None

    @property
    def num_kv_cache_groups(self) -> int:
        return sum(group.num_groups for group in self.groups)


# The GPUs whose DeepSeek-V4 attention is FlashMLA's, with the fp8_ds_mla layout sized here
# (models/deepseek_v4/nvidia/model.py, _select_dsv4_attn_cls: FlashMLA on every CUDA capability but 12.x;
# models/deepseek_v4/sparse_mla.py, supports_compute_capability: 9.x and 10.x). SM12x (RTX 50, RTX PRO 6000)
# runs FlashInfer's plain-row layout, ROCm and others their own: not sized.
FLASHMLA_GPU_TAGS = ("h100", "h200", "h800", "h20", "gh200", "b200", "b300", "gb200", "gb300")
# --kv-cache-dtype values that resolve to fp8_ds_mla on those GPUs (attention.py, _resolve_dsv4_kv_cache_dtype:
# auto becomes fp8; the sparse-MLA backend lists auto, fp8 and fp8_ds_mla); bfloat16 is refused there.
KV_CACHE_DTYPES = ("auto", "fp8")
# The first release whose DeepSeek-V4 rules were read (0.33.0); earlier ones grouped these caches otherwise.
SINCE_RELEASE = (0, 33)


def input_errors(
    attention: CompressedAttention,
    *,
    gpu_name: str,
    gpu_slug: str,
    kv_cache_dtype: str,
    block_size: int | None,
    tensor_parallel_size: int,
    pipeline_parallel_size: int,
    num_speculative_tokens: int,
    engine_version: tuple[int, int],
    num_mtp_layers: int = 0,
) -> dict[str, str]:
    """The settings under which a compressed-attention plan would not be vLLM 0.33's exact answer, each
    naming the field and value (a refusal, never a plan that is silently wrong)."""
    errors: dict[str, str] = {}
    if engine_version < SINCE_RELEASE:
        errors["engine_version"] = (
            f"{engine_version[0]}.{engine_version[1]}: DeepSeek-V4's KV cache groups are sized from vLLM 0.33's "
            "source; earlier releases grouped its caches differently and are not modelled"
        )
    name = f"{gpu_name} {gpu_slug}".lower()
    if not any(tag in name for tag in FLASHMLA_GPU_TAGS):
        errors["gpu"] = (
            f"{gpu_name}: DeepSeek-V4 is sized for FlashMLA's fp8_ds_mla cache on Hopper (H100, H200, H20) and "
            "datacenter Blackwell (B200, B300); other GPUs use other cache layouts"
        )
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        errors["kv_cache_dtype"] = (
            f"{kv_cache_dtype}: DeepSeek-V4's FlashMLA cache is fp8_ds_mla, asked for with 'auto' or 'fp8' "
            "(vLLM refuses bfloat16 there; other fp8 spellings are not checked)"
        )
    if block_size is not None and block_size != BLOCK_SIZE:
        errors["block_size"] = f"{block_size}: DeepSeek-V4's sparse-MLA and indexer kernels take 256-token blocks"
    if attention.o_groups % tensor_parallel_size:
        errors["tensor_parallel_size"] = (
            f"{tensor_parallel_size} does not divide the {attention.o_groups} output-projection groups (o_groups)"
        )
    if pipeline_parallel_size != 1:
        errors["pipeline_parallel_size"] = (
            f"{pipeline_parallel_size}: DeepSeek-V4's packed cache groups across pipeline stages are not modelled"
        )
    if num_speculative_tokens and not num_mtp_layers:
        errors["num_speculative_tokens"] = (
            f"{num_speculative_tokens}: this DeepSeek-V4 config has no MTP layer (num_nextn_predict_layers), and "
            "other drafters' caches are not modelled"
        )
    elif num_speculative_tokens > 1 and num_mtp_layers > 1:
        # Several MTP modules read ahead: every sliding cache then retains num_speculative_tokens - 1 more tokens
        # (v1/core/kv_cache_planning.py, extra_retained_tokens; config/speculative.py, use_multi_module_mtp).
        errors["num_speculative_tokens"] = (
            f"{num_speculative_tokens} with {num_mtp_layers} MTP layers: the sliding caches' retained tokens of "
            "multi-module MTP are not modelled"
        )
    return errors


def with_draft_layers(attention: CompressedAttention, num_mtp_layers: int) -> CompressedAttention:
    """The caches vLLM plans with MTP speculative decoding on: the draft's layers register after the decoder's as
    sliding-window-only ones (``attention.py``: ``compress_ratio = 1`` for ``layer_id >= num_hidden_layers``;
    ``transformers_utils/deepseek_v4_utils.py`` gives them ratio 0), one sliding latent each, packed with the
    target's (``is_draft`` takes no part in the spec comparison, ``v1/kv_cache_interface.py``)."""
    if not num_mtp_layers:
        return attention
    return replace(attention, compress_ratios=attention.compress_ratios + (1,) * num_mtp_layers)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _aligned(page: int) -> int:
    return _round_up(page, PAGE_ALIGNMENT)


def _layer_caches(attention: CompressedAttention, ratio: int, block_size: int) -> list[CacheLayerKind]:
    """One layer's caches of the fp8_ds_mla layout in the order vLLM registers them (``DeepseekV4Attention``:
    the indexer's key and compressor state, the sliding latent, the compressed latent, its compressor state),
    each as a kind of one layer."""
    caches: list[CacheLayerKind] = []
    if ratio == INDEXER_RATIO:
        index_key = attention.index_head_dim + attention.index_head_dim // INDEXER_QUANT_BLOCK * 4
        caches.append(
            CacheLayerKind("indexer key", "full", None, block_size, _aligned(block_size // ratio * index_key), 1)
        )
        size = COMPRESSOR_BLOCK_SIZES[ratio]
        index_state = 2 * 2 * attention.index_head_dim * STATE_DTYPE_BYTES  # kv and score states, coff 2
        state_page = _aligned(size * index_state)
        caches.append(CacheLayerKind("indexer compressor state", "sliding_window", 2 * ratio, size, state_page, 1))
    caches.append(
        CacheLayerKind(
            "sliding latent",
            "sliding_window",
            attention.sliding_window,
            SWA_BLOCK_SIZE,
            _aligned(SWA_BLOCK_SIZE * FP8_DS_MLA_STATE_BYTES),
            1,
        )
    )
    if ratio > 1:
        caches.append(
            CacheLayerKind(
                f"C{ratio} latent", "full", None, block_size, _aligned(block_size // ratio * FP8_DS_MLA_STATE_BYTES), 1
            )
        )
        coff = 2 if ratio == INDEXER_RATIO else 1
        size = COMPRESSOR_BLOCK_SIZES[ratio]
        state = 2 * coff * HEAD_DIM * STATE_DTYPE_BYTES
        state_page = _aligned(size * state)
        caches.append(CacheLayerKind(f"C{ratio} compressor state", "sliding_window", coff * ratio, size, state_page, 1))
    return caches


def cache_layer_kinds(attention: CompressedAttention, block_size: int = BLOCK_SIZE) -> tuple[CacheLayerKind, ...]:
    """Every kind of per-layer cache with its layer count, in the order the layers first register them."""
    counts: dict[CacheLayerKind, int] = {}
    for ratio in attention.compress_ratios:
        for cache in _layer_caches(attention, ratio, block_size):
            counts[cache] = counts.get(cache, 0) + 1
    return tuple(
        CacheLayerKind(cache.name, cache.kind, cache.window, cache.block_size, cache.page_bytes, count)
        for cache, count in counts.items()
    )


def approximate_gcd(values: list[int], lower_bound: int) -> int:
    """vLLM's ``_approximate_gcd``: the divisor in [lower_bound, max(values)] that rounds ``values`` up to its
    multiples with the least padding, the larger on ties."""
    low = max(1, lower_bound)
    high = max(values)
    if low > high:
        return low
    best, best_pad = low, -1
    for divisor in range(low, high + 1):
        pad = sum((divisor - value % divisor) % divisor for value in values)
        if best_pad < 0 or pad <= best_pad:  # ascending divisors: a tie goes to the larger
            best, best_pad = divisor, pad
    return best


def pack_caches(kinds: tuple[CacheLayerKind, ...]) -> PackedCache:
    """vLLM's ``_get_packed_kv_cache_groups`` on these caches (no Mamba or circular-buffer layers here)."""
    buckets: dict[tuple[str, int | None, int], list[CacheLayerKind]] = {}
    for cache in kinds:
        buckets.setdefault((cache.kind, cache.window, cache.block_size), []).append(cache)
    members = list(buckets.values())

    def layers_per_page(bucket: list[CacheLayerKind]) -> Counter[int]:
        counts: Counter[int] = Counter()
        for cache in bucket:
            counts[cache.page_bytes] += cache.num_layers
        return counts

    pages = [layers_per_page(bucket) for bucket in members]
    balanced = [len(set(counts.values())) == 1 for counts in pages]
    most = [max(counts.values()) for counts in pages]
    floor = max((most[i] for i, counts in enumerate(pages) if balanced[i] and len(counts) > 1), default=0)
    repeats = approximate_gcd([most[i] for i in range(len(pages)) if balanced[i]], floor) if floor else None

    def num_groups(index: int) -> int:
        return -(-most[index] // repeats) if balanced[index] and repeats is not None else 1

    if repeats is None and any(kind == "sliding_window" for kind, _, _ in buckets):
        # Unsplit sliding-window buckets then become "state" buckets capped at what a block holds; no
        # DeepSeek-V4 config checked leads here, so it is refused rather than guessed.
        raise ValueError("no balanced bucket sets the repeat pattern: this cache layout is not modelled")
    groups: list[CacheGroupKind] = []
    for index, bucket in enumerate(members):
        count = num_groups(index)
        # The widest of the bucket's groups: ceil(layers / groups) of each page size (widest_group_bytes).
        group_bytes = sum(-(-layers // count) * page for page, layers in pages[index].items())
        first = bucket[0]
        groups.append(
            CacheGroupKind(
                kind=first.kind,
                window=first.window,
                block_size=first.block_size,
                caches=tuple((cache.name, -(-cache.num_layers // count), cache.page_bytes) for cache in bucket),
                num_layers=sum(cache.num_layers for cache in bucket),
                num_groups=count,
                group_bytes=group_bytes,
            )
        )
    bytes_per_block = _round_up(max(group.group_bytes for group in groups), BLOCK_STRIDE_ALIGNMENT)
    return PackedCache(tuple(kinds), tuple(groups), bytes_per_block, repeats)


@lru_cache(maxsize=64)
def packed_cache(attention: CompressedAttention, block_size: int = BLOCK_SIZE) -> PackedCache:
    """The KV cache groups and bytes per block of ``attention`` (cached: plans of one model share them)."""
    return pack_caches(cache_layer_kinds(attention, block_size))


@lru_cache(maxsize=64)
def group_descriptions(packed: PackedCache) -> tuple[tuple[str, ...], str]:
    """What each group's layer slots hold ("21 C4 latent (37,440 B), ..."), and all groups in one line."""
    caches = tuple(
        ", ".join(f"{layers} {name} ({page:,} B)" for name, layers, page in group.caches) for group in packed.groups
    )
    summary = f"{packed.num_kv_cache_groups} groups sharing {packed.bytes_per_block:,}-byte blocks: " + "; ".join(
        f"{group.num_groups} x [{text}] block {group.block_size}"
        for group, text in zip(packed.groups, caches, strict=True)
    )
    return caches, summary


def group_request_blocks(group: CacheGroupKind, length: int, in_flight: int) -> int:
    """Blocks one request of ``length`` tokens holds in each of this bucket's groups."""
    if length <= 0:
        return 0
    if group.kind == "full" or group.window is None:
        return -(-length // group.block_size)
    return -(-min(group.window - 1 + in_flight, length) // group.block_size) + 1


def request_blocks(packed: PackedCache, length: int, in_flight: int) -> int:
    """Blocks one request of ``length`` tokens holds over all KV cache groups (its admission worst case)."""
    return sum(group.num_groups * group_request_blocks(group, length, in_flight) for group in packed.groups)


def bytes_per_token(packed: PackedCache) -> int:
    """Bytes per token of context the caches that grow with it take on one rank (the compressed latents and
    indexer keys, padded pages included), per block of ``BLOCK_SIZE`` tokens."""
    full = [group for group in packed.groups if group.kind == "full"]
    return round(sum(group.num_groups * group.group_bytes for group in full) / BLOCK_SIZE) if full else 0
