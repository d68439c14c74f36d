"""What the engine knows about a model: attention shapes, per-layer attention kinds, parameter counts."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import SizingInputError
from .validation import MAX_LAYERS, as_choice, as_int

LAYER_KINDS = ("full", "sliding_window", "chunked_local")
ATTENTION_KINDS = ("MHA", "GQA", "MQA", "MLA")
MODEL_DTYPES = ("bfloat16", "float16", "float32")


@dataclass(frozen=True)
class LayerGroup:
    """Layers sharing one attention kind. ``window`` is the sliding window or the chunk, in tokens."""

    kind: str
    num_layers: int
    window: int | None = None


@dataclass(frozen=True)
class ModelSpec:
    """A decoder model as the sizing engine sees it.

    ``num_kv_heads`` is what vLLM caches: 1 for MLA (one latent per token), the config's
    ``num_key_value_heads`` otherwise. ``head_size`` is the cached width per head (MLA:
    ``kv_lora_rank + qk_rope_head_dim``). ``layer_pattern`` gives, per layer, the index of its group in
    ``layer_groups`` (pipeline stages and vLLM's hybrid grouping depend on layer order); empty means
    the groups are laid out one after another.
    """

    name: str
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_size: int
    hidden_size: int
    attention_kind: str
    layer_groups: tuple[LayerGroup, ...] = ()
    dtype: str = "bfloat16"
    num_params: int = 0
    num_active_params: int = 0
    params_estimated: bool = False
    max_position_embeddings: int = 8192
    vocab_size: int = 0
    intermediate_size: int = 0
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    is_moe: bool = False
    # Additions beyond docs/sizing-engine.md.
    hf_id: str | None = None
    slug: str | None = None
    layer_pattern: tuple[int, ...] = ()
    tie_word_embeddings: bool = False
    num_expert_params: int = 0
    num_experts: int = 0
    num_experts_per_tok: int = 0
    expert_intermediate_size: int = 0
    quantization: str | None = None
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        errors: dict[str, str] = {}
        as_int(errors, "num_layers", self.num_layers, maximum=MAX_LAYERS)
        as_int(errors, "num_attention_heads", self.num_attention_heads, maximum=1_000_000)
        as_int(errors, "num_kv_heads", self.num_kv_heads, maximum=1_000_000)
        as_int(errors, "head_size", self.head_size, maximum=1_000_000)
        as_int(errors, "hidden_size", self.hidden_size, maximum=100_000_000)
        as_int(errors, "max_position_embeddings", self.max_position_embeddings, maximum=2**40)
        as_int(errors, "num_params", self.num_params, minimum=0, maximum=10**15)
        as_int(errors, "num_active_params", self.num_active_params, minimum=0, maximum=10**15)
        as_int(errors, "vocab_size", self.vocab_size, minimum=0, maximum=10**9)
        as_int(errors, "intermediate_size", self.intermediate_size, minimum=0, maximum=10**9)
        as_choice(errors, "attention_kind", self.attention_kind, ATTENTION_KINDS)
        as_choice(errors, "dtype", self.dtype, MODEL_DTYPES)
        if errors:
            raise SizingInputError(errors)
        if self.attention_kind != "MLA" and self.num_attention_heads % self.num_kv_heads:
            errors["num_kv_heads"] = (
                f"{self.num_kv_heads} KV heads do not divide {self.num_attention_heads} attention heads"
            )
        if self.attention_kind == "MLA" and self.num_kv_heads != 1:
            errors["num_kv_heads"] = "MLA caches one latent per token: num_kv_heads must be 1"
        groups = self.layer_groups or (LayerGroup("full", self.num_layers, None),)
        if not isinstance(groups, tuple):
            groups = tuple(groups) if isinstance(groups, list) else ()
        for index, group in enumerate(groups):
            if not isinstance(group, LayerGroup):
                errors["layer_groups"] = f"item {index} is not a LayerGroup"
                break
            as_choice(errors, "layer_groups", group.kind, LAYER_KINDS)
            as_int(errors, "layer_groups", group.num_layers, maximum=MAX_LAYERS)
            if group.kind == "full":
                if group.window is not None:
                    errors["layer_groups"] = "full-attention groups have no window"
            else:
                as_int(errors, "layer_groups", group.window, maximum=2**40)
        if not errors and sum(group.num_layers for group in groups) != self.num_layers:
            errors["layer_groups"] = f"group sizes do not add up to num_layers ({self.num_layers})"
        pattern = self.layer_pattern
        if not errors:
            if not pattern:
                pattern = tuple(index for index, group in enumerate(groups) for _ in range(group.num_layers))
            elif (
                len(pattern) != self.num_layers
                or any(not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(groups) for i in pattern)
                or any(pattern.count(i) != group.num_layers for i, group in enumerate(groups))
            ):
                errors["layer_pattern"] = "must give each layer's group index, matching layer_groups"
        if errors:
            raise SizingInputError(errors)
        object.__setattr__(self, "layer_groups", tuple(groups))
        object.__setattr__(self, "layer_pattern", tuple(pattern))
        if not self.num_active_params:
            object.__setattr__(self, "num_active_params", self.num_params)

    @property
    def is_hybrid(self) -> bool:
        return len(self.layer_groups) > 1

    @property
    def embedding_params(self) -> int:
        """Input embedding plus an untied LM head (kept in 16 bits by fp8/int quantisation)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
