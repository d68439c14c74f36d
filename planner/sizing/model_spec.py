"""What the engine knows about a model: attention shapes, per-layer attention kinds, parameter counts."""

from __future__ import annotations

from dataclasses import dataclass, field

from .compressed_attention import CompressedAttention
from .errors import SizingInputError
from .validation import MAX_LAYERS, as_choice, as_int

# "state": a recurrent-state layer (Mamba, gated delta net): a fixed-size state per request, no per-token KV.
# "none": a layer without any cache (Nemotron-H's MLP and MoE layers), kept so pipeline stages split right.
LAYER_KINDS = ("full", "sliding_window", "chunked_local", "state", "none")
ATTENTION_LAYER_KINDS = ("full", "sliding_window", "chunked_local")
STATE_KINDS = ("mamba1", "mamba2", "gdn", "linear", "kda")
STATE_DTYPES = ("bfloat16", "float16", "float32")
ATTENTION_KINDS = ("MHA", "GQA", "MQA", "MLA")
MODEL_DTYPES = ("bfloat16", "float16", "float32")


@dataclass(frozen=True)
class LayerGroup:
    """Layers sharing one attention kind. ``window`` is the sliding window or the chunk, in tokens.

    ``head_size`` / ``num_kv_heads``: this group's own cached shape where it differs from the model's
    (Gemma 4's full layers: ``global_head_dim`` and ``num_global_key_value_heads``); None = the model's.
    ``head_size_v``: the cached V head width where it differs from K's (MiMo-V2: K 192, V 128; vLLM's
    ``AttentionSpec.head_size_v``); None = V as wide as K."""

    kind: str
    num_layers: int
    window: int | None = None
    head_size: int | None = None
    num_kv_heads: int | None = None
    head_size_v: int | None = None


@dataclass(frozen=True)
class StateSpec:
    """The recurrent state one ``state`` layer keeps per request (vLLM's ``MambaSpec``), before the tp split.

    Shapes follow ``MambaStateShapeCalculator`` (``vllm/model_executor/layers/mamba/mamba_utils.py``):
    ``mamba2`` uses ``intermediate_size``, ``n_groups``, ``num_heads``, ``head_dim``, ``state_size``,
    ``conv_kernel``; ``mamba1`` uses ``intermediate_size``, ``state_size``, ``conv_kernel``; ``gdn`` (gated
    delta net) uses ``num_k_heads``, ``head_k_dim``, ``num_heads`` (value heads), ``head_dim`` (value head
    dim), ``conv_kernel``; ``linear`` uses ``num_heads`` and ``head_dim``; ``kda`` (Kimi delta attention,
    ``kda_state_shape``) uses ``num_heads``, ``head_dim`` (keys as wide as values) and ``conv_kernel``.
    ``conv_dtype`` ``None`` follows the model dtype (``mamba_cache_dtype=auto``); ``ssm_dtype`` ``None``
    follows the conv dtype. ``flashkda``: a KDA layer that prefills on FlashKDA where the GPU allows, which
    exports align-mode prefill checkpoints (kimi_linear.py).
    """

    kind: str
    intermediate_size: int = 0
    n_groups: int = 0
    num_heads: int = 0
    head_dim: int = 0
    state_size: int = 0
    conv_kernel: int = 0
    num_k_heads: int = 0
    head_k_dim: int = 0
    conv_dtype: str | None = None
    ssm_dtype: str | None = None
    flashkda: bool = False

    def __post_init__(self) -> None:
        errors: dict[str, str] = {}
        as_choice(errors, "state.kind", self.kind, STATE_KINDS)
        for name in ("intermediate_size", "n_groups", "num_heads", "head_dim", "state_size", "conv_kernel"):
            as_int(errors, f"state.{name}", getattr(self, name), minimum=0, maximum=10**9)
        for name in ("conv_dtype", "ssm_dtype"):
            if getattr(self, name) is not None:
                as_choice(errors, f"state.{name}", getattr(self, name), STATE_DTYPES)
        if errors:
            raise SizingInputError(errors)


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
    # The recurrent state of ``state`` layers (hybrid models); None when the model has none.
    state: StateSpec | None = None
    # Multi-token-prediction layers (draft layers vLLM runs with --speculative-config method mtp); each
    # adds a full-attention layer to the KV cache when speculative tokens are on.
    num_mtp_layers: int = 0
    # DeepSeek V3.2's sparse-attention indexer: its key cache per token per layer (bytes), 0 when none.
    indexer_bytes_per_token: int = 0
    # Weights a quantised checkpoint keeps in 16 bits besides the embeddings and LM head (its exclude list).
    unquantized_params: int = 0
    # DeepSeek-V4's compressed attention: its caches replace the per-layer KV of ``layer_groups`` (whose
    # "full" layers are the compressed ones, "sliding_window" the window-only ones); None for other models.
    compressed_attention: CompressedAttention | None = None
    # Falcon-H1: each decoder layer holds an attention and a state cache layer, alternating in layer_pattern, so
    # num_layers counts cache layers (2 per decoder layer), as vLLM numbers them.
    parallel_hybrid: bool = False
    # The layer kind of the MTP draft layers: "full" for most, "sliding_window" where the draft attends through a
    # window (MiMo-V2-Flash's, mimo_v2_mtp.py); they join the first layer group of that kind.
    mtp_layer_kind: str = "full"

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
            if group.kind in ("full", "state", "none"):
                if group.window is not None:
                    errors["layer_groups"] = f"{group.kind} groups have no window"
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
        if not errors and any(group.kind == "state" for group in groups) and self.state is None:
            errors["state"] = "state layers need the state's shape (StateSpec)"
        if not errors and not any(group.kind in ATTENTION_LAYER_KINDS for group in groups):
            errors["layer_groups"] = "attention-free models (no attention layer) are not supported yet"
        if not errors and self.num_mtp_layers and not any(group.kind == self.mtp_layer_kind for group in groups):
            errors["mtp_layer_kind"] = f"{self.mtp_layer_kind!r}: no layer group of that kind for the MTP layers"
        if errors:
            raise SizingInputError(errors)
        object.__setattr__(self, "layer_groups", tuple(groups))
        object.__setattr__(self, "layer_pattern", tuple(pattern))
        if not self.num_active_params:
            object.__setattr__(self, "num_active_params", self.num_params)

    @property
    def is_hybrid(self) -> bool:
        return len([group for group in self.layer_groups if group.kind != "none"]) > 1

    @property
    def has_state(self) -> bool:
        """Whether some layers keep a recurrent state (vLLM's hybrid attention + Mamba models)."""
        return any(group.kind == "state" for group in self.layer_groups)

    @property
    def num_attention_layers(self) -> int:
        return sum(group.num_layers for group in self.layer_groups if group.kind in ATTENTION_LAYER_KINDS)

    @property
    def num_state_layers(self) -> int:
        return sum(group.num_layers for group in self.layer_groups if group.kind == "state")

    @property
    def embedding_params(self) -> int:
        """Input embedding plus an untied LM head (kept in 16 bits by fp8/int quantisation)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
