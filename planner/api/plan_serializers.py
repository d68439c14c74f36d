"""The plan as the API answers it: plan_to_dict(plan), documented field by field for the OpenAPI schema.

The sizing endpoints answer the engine's plan_to_dict() unchanged (so an answer always equals the engine's plan);
these serializers describe it. tests/planner/api/test_api_schema.py fails when the engine grows a field that is
not described here. Sizes are bytes; floats the engine cannot give as a finite number come back null.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from planner.sizing.layer_runs import layer_runs_json


def _float(help_text: str = "", **kwargs: object) -> serializers.FloatField:
    return serializers.FloatField(allow_null=True, help_text=help_text or None, **kwargs)


class LayerGroupSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=["full", "sliding_window", "chunked_local", "state", "none"],
        help_text="Attention kind; state: a recurrent-state layer (Mamba, gated delta net); none: no cache.",
    )
    num_layers = serializers.IntegerField()
    window = serializers.IntegerField(allow_null=True, help_text="Sliding window or chunk in tokens; null for full.")
    head_size = serializers.IntegerField(
        allow_null=True, help_text="This group's own head size (Gemma 4); null: the model's."
    )
    num_kv_heads = serializers.IntegerField(allow_null=True, help_text="This group's own KV heads; null: the model's.")
    head_size_v = serializers.IntegerField(
        allow_null=True, help_text="This group's V head size where it differs from K's (MiMo-V2); null: K's."
    )


class StateSpecSerializer(serializers.Serializer):
    """The recurrent state of a hybrid model's state layers (vLLM's MambaSpec), before the tp split."""

    kind = serializers.ChoiceField(choices=["mamba1", "mamba2", "gdn", "linear"])
    intermediate_size = serializers.IntegerField()
    n_groups = serializers.IntegerField()
    num_heads = serializers.IntegerField(help_text="Mamba heads; value heads for a gated delta net.")
    head_dim = serializers.IntegerField()
    state_size = serializers.IntegerField()
    conv_kernel = serializers.IntegerField()
    num_k_heads = serializers.IntegerField()
    head_k_dim = serializers.IntegerField()
    conv_dtype = serializers.CharField(allow_null=True, help_text="null: the model dtype.")
    ssm_dtype = serializers.CharField(allow_null=True, help_text="null: the conv state's dtype.")


class CompressedAttentionSerializer(serializers.Serializer):
    """DeepSeek-V4's compressed attention as the engine read it (planner/sizing/compressed_attention.py)."""

    compress_ratios = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Per decoder layer: tokens per compressed state (4 with an indexer, 128), 1 for window-only layers.",
    )
    sliding_window = serializers.IntegerField()
    index_head_dim = serializers.IntegerField()
    index_n_heads = serializers.IntegerField()
    index_topk = serializers.IntegerField()
    o_groups = serializers.IntegerField(help_text="Output-projection groups: tensor parallelism must divide them.")


class LayerRunSerializer(serializers.Serializer):
    unit = serializers.ListField(child=serializers.IntegerField(), help_text="Group indexes of consecutive layers.")
    repeat = serializers.IntegerField(min_value=1)


@extend_schema_field(LayerRunSerializer(many=True))
class LayerPatternField(serializers.Field):
    """A ModelSpec's per-layer pattern written as runs (``planner.sizing.layer_runs``), as ``plan_to_dict`` does."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value: Any) -> list[dict[str, Any]]:
        if value and isinstance(value[0], dict):  # already runs (a shape dict made by model_to_dict)
            return list(value)
        return layer_runs_json(tuple(value))


class ModelSpecSerializer(serializers.Serializer):
    """The model as the engine read it."""

    name = serializers.CharField()
    num_layers = serializers.IntegerField()
    num_attention_heads = serializers.IntegerField()
    num_kv_heads = serializers.IntegerField(help_text="Heads vLLM caches (1 for MLA: one latent per token).")
    head_size = serializers.IntegerField(help_text="Cached width per head (MLA: kv_lora_rank + qk_rope_head_dim).")
    hidden_size = serializers.IntegerField()
    attention_kind = serializers.ChoiceField(choices=["MHA", "GQA", "MQA", "MLA"])
    layer_groups = LayerGroupSerializer(many=True)
    dtype = serializers.CharField()
    num_params = serializers.IntegerField()
    num_active_params = serializers.IntegerField()
    params_estimated = serializers.BooleanField(help_text="True when counted from the config, not an official figure.")
    max_position_embeddings = serializers.IntegerField()
    vocab_size = serializers.IntegerField()
    intermediate_size = serializers.IntegerField()
    kv_lora_rank = serializers.IntegerField(allow_null=True)
    qk_rope_head_dim = serializers.IntegerField(allow_null=True)
    is_moe = serializers.BooleanField()
    hf_id = serializers.CharField(allow_null=True)
    slug = serializers.CharField(allow_null=True)
    layer_pattern = LayerPatternField(
        help_text=(
            "The layers in order, as runs: each run is `unit` (indexes into layer_groups) repeated `repeat` "
            "times; [{unit: [0, 1], repeat: 128}] is 256 layers alternating groups 0 and 1."
        ),
    )
    tie_word_embeddings = serializers.BooleanField()
    num_expert_params = serializers.IntegerField()
    num_experts = serializers.IntegerField()
    num_experts_per_tok = serializers.IntegerField()
    expert_intermediate_size = serializers.IntegerField()
    quantization = serializers.CharField(allow_null=True)
    notes = serializers.ListField(child=serializers.CharField())
    state = StateSpecSerializer(allow_null=True)
    num_mtp_layers = serializers.IntegerField(help_text="Multi-token-prediction (draft) layers in the checkpoint.")
    indexer_bytes_per_token = serializers.IntegerField(
        help_text="DeepSeek V3.2's indexer key cache per token per layer; 0 when none."
    )
    unquantized_params = serializers.IntegerField(
        help_text="Parameters a quantised checkpoint keeps in 16 bits besides embeddings and LM head."
    )
    compressed_attention = CompressedAttentionSerializer(
        allow_null=True, help_text="DeepSeek-V4's caches (compress ratios, window, indexer); null for other models."
    )
    mtp_layer_kind = serializers.CharField(
        help_text="The layer kind of the MTP draft layers: full, or sliding_window (MiMo-V2-Flash)."
    )
    parallel_hybrid = serializers.BooleanField(
        help_text=(
            "Falcon-H1: every decoder layer holds an attention and a Mamba2 cache layer, so num_layers counts "
            "two per decoder layer."
        )
    )


class GpuSpecSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    memory_bytes = serializers.IntegerField(help_text="CUDA-visible total memory.")
    marketed_memory_gb = serializers.FloatField()
    bandwidth_bytes_per_s = serializers.FloatField()
    bf16_tflops = serializers.FloatField()
    price_per_hour = serializers.FloatField(allow_null=True)
    fp8 = serializers.BooleanField()
    memory_note = serializers.CharField(allow_blank=True)


class PlanInputsSerializer(serializers.Serializer):
    """The inputs the plan answers, with every default resolved (model and GPU in full)."""

    model = ModelSpecSerializer()
    gpu = GpuSpecSerializer()
    gpu_count = serializers.IntegerField()
    tensor_parallel_size = serializers.IntegerField()
    pipeline_parallel_size = serializers.IntegerField()
    weight_dtype = serializers.CharField()
    kv_cache_dtype = serializers.CharField()
    gpu_memory_utilization = _float()
    block_size = serializers.IntegerField()
    max_num_batched_tokens = serializers.IntegerField()
    weights_gib = _float("Override given, GiB; null when computed.")
    activation_gib = _float("Override given, GiB; null when estimated.")
    non_torch_gib = _float("Override given, GiB; null when estimated.")
    kv_cache_memory_gib = _float("Fixed KV memory per GPU given, GiB; null when budgeted from the utilisation.")
    max_model_len = serializers.IntegerField()
    concurrency = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField(allow_null=True)
    output_tokens = serializers.IntegerField(allow_null=True)
    shared_prefix_tokens = serializers.IntegerField(allow_null=True)
    target_tpot_ms = _float()
    target_ttft_ms = _float()
    context_rounding = serializers.CharField(help_text="exact or pow2.")
    engine_version = serializers.CharField()
    max_num_seqs = serializers.IntegerField(allow_null=True)
    enable_prefix_caching = serializers.BooleanField(allow_null=True)
    num_speculative_tokens = serializers.IntegerField()


class MemoryBreakdownSerializer(serializers.Serializer):
    """One GPU's memory in bytes; requested_bytes + unrequested_bytes == total_bytes."""

    total_bytes = serializers.IntegerField(help_text="CUDA-visible total.")
    requested_bytes = serializers.IntegerField(help_text="ceil(total x gpu_memory_utilization).")
    weights_bytes = serializers.IntegerField()
    activation_bytes = serializers.IntegerField(help_text="Activation peak of the profiling run.")
    non_torch_bytes = serializers.IntegerField(help_text="CUDA graphs, NCCL buffers and other non-torch memory.")
    kv_cache_bytes = serializers.IntegerField()
    unrequested_bytes = serializers.IntegerField(help_text="Left outside vLLM's budget.")


class ConcurrencyRowSerializer(serializers.Serializer):
    concurrency = serializers.IntegerField()
    max_context_len = serializers.IntegerField(help_text="Longest context each sequence can have at this concurrency.")
    kv_limited_context_len = serializers.IntegerField(help_text="What the KV cache alone would allow.")
    limited_by = serializers.ChoiceField(
        choices=["max_model_len", "max_position_embeddings", "kv_cache"],
        help_text="What binds: the scenario's max_model_len, the model's positions, or the KV cache.",
    )


class AllocationSerializer(serializers.Serializer):
    """Sequences of sequence_tokens that fit: contiguous max_model_len reservations vs vLLM's paged blocks."""

    naive_sequences = serializers.IntegerField()
    paged_sequences = serializers.IntegerField()
    sequence_tokens = serializers.IntegerField()


class EstimatesSerializer(serializers.Serializer):
    """Speed estimates (roofline), labelled as such: decode memory-bound, prefill compute-bound."""

    decode_step_ms = _float()
    tokens_per_s_per_seq = _float()
    tokens_per_s_total = _float()
    tpot_ms = _float("Time per output token.")
    prefill_ttft_ms = _float("Time to first token of one prompt.")
    prefill_mfu = _float("Model FLOPs utilisation assumed for prefill.")
    label = serializers.CharField()


class AdviceRowSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="What to change (an input name, gpu, search, ...).")
    message = serializers.CharField()
    changes = serializers.DictField(help_text="The input changes this advice means, by request field name.")


class AssumptionSerializer(serializers.Serializer):
    name = serializers.CharField()
    value = serializers.CharField()
    source = serializers.CharField()


class KvCacheGroupSerializer(serializers.Serializer):
    """vLLM's KV cache groups (hybrid models): num_groups groups of layers of one attention kind."""

    kind = serializers.CharField()
    window = serializers.IntegerField(allow_null=True)
    num_layers = serializers.IntegerField()
    num_groups = serializers.IntegerField()
    worst_case_blocks = serializers.IntegerField()
    block_size = serializers.IntegerField(help_text="Tokens per block of this group (page unification, DeepSeek-V4).")
    caches = serializers.CharField(help_text="What the group's layer slots hold, where not one attention kind.")


class PlanSerializer(serializers.Serializer):
    """A plan: what the KV cache holds, what that buys, and the vllm serve command."""

    inputs = PlanInputsSerializer()
    kv_bytes_per_token = serializers.IntegerField(help_text="What one token costs the whole replica (all ranks).")
    kv_bytes_per_token_per_gpu = serializers.IntegerField(
        help_text="What one token costs one GPU rank, as vLLM lays out its pages."
    )
    page_size_bytes = serializers.IntegerField(help_text="One KV block of one layer group on one GPU.")
    weights_bytes = serializers.IntegerField(help_text="Whole model.")
    weights_bytes_per_gpu = serializers.IntegerField()
    memory_per_gpu = MemoryBreakdownSerializer()
    kv_budget_bytes_per_gpu = serializers.IntegerField()
    num_gpu_blocks = serializers.IntegerField(help_text="KV blocks per GPU, as vLLM reports it.")
    block_size = serializers.IntegerField(help_text="Tokens per block.")
    kv_capacity_tokens = serializers.IntegerField(help_text="num_gpu_blocks x block_size.")
    worst_case_blocks_per_request = serializers.IntegerField(help_text="Blocks one max_model_len request may need.")
    max_concurrency = _float("Concurrent requests of max_model_len tokens the KV cache holds.")
    max_context_len = serializers.IntegerField(
        help_text="Longest context per sequence at the requested concurrency, never above max_model_len."
    )
    fits = serializers.BooleanField(help_text="The model loads and at least one max_model_len request fits.")
    problems = serializers.ListField(child=serializers.CharField(), help_text="Why it does not fit or meet the SLA.")
    concurrency_table = ConcurrencyRowSerializer(many=True)
    allocation = AllocationSerializer()
    estimates = EstimatesSerializer(allow_null=True, help_text="Null when vLLM would not start (starts false).")
    advice = AdviceRowSerializer(many=True)
    vllm_command = serializers.CharField()
    assumptions = AssumptionSerializer(many=True)
    meets_sla = serializers.BooleanField(help_text="Fits, and meets the concurrency and latency targets given.")
    warnings = serializers.ListField(child=serializers.CharField())
    usable_blocks = serializers.IntegerField(help_text="num_gpu_blocks less vLLM's null block.")
    layers_per_gpu = serializers.IntegerField()
    group_size = serializers.IntegerField(help_text="Layers per KV cache group (vLLM's hybrid allocator).")
    kv_groups = KvCacheGroupSerializer(many=True)
    in_flight_tokens = serializers.IntegerField(help_text="Tokens scheduled at once, which sliding windows keep.")
    data_parallel_size = serializers.IntegerField(help_text="Replicas: gpu_count / (tp x pp).")
    longest_max_model_len = serializers.IntegerField(
        help_text="Longest max_model_len vLLM would start with here (one request fits; capped by the model's "
        "positions), whatever the scenario's max_model_len."
    )
    starts = serializers.BooleanField(
        help_text="Whether vLLM would start with these settings; when false the vllm_command is one it refuses."
    )
    shortfall_bytes_per_gpu = serializers.IntegerField(
        help_text="Memory per GPU missing for vLLM to start with one max_model_len request (0 when it starts)."
    )
    reported_kv_cache_tokens = serializers.IntegerField(
        help_text='What vLLM logs as "GPU KV cache size: N tokens" for this engine version (from 0.24: max '
        "concurrency x max_model_len; before: blocks // groups x block size). kv_capacity_tokens is the physical "
        "blocks x block size."
    )
    reported_max_concurrency = _float('What vLLM logs as "Maximum concurrency for N tokens per request".')
    reported_tokens_rule = serializers.CharField(help_text="How reported_kv_cache_tokens is computed.")
    state_page_bytes = serializers.IntegerField(help_text="Hybrid models: one state layer's state per GPU rank.")
    state_blocks_per_request = serializers.IntegerField(
        help_text="Hybrid models: state blocks one request holds (more with prefix caching and speculation)."
    )


class CandidateSerializer(serializers.Serializer):
    """One configuration found by the search, with its full plan."""

    gpu = serializers.CharField(help_text="GPU slug.")
    gpu_name = serializers.CharField()
    gpu_count = serializers.IntegerField()
    tensor_parallel_size = serializers.IntegerField()
    data_parallel_size = serializers.IntegerField()
    kv_cache_dtype = serializers.CharField()
    cost_per_hour = serializers.FloatField(allow_null=True)
    price_note = serializers.CharField(
        help_text="Empty when priced; otherwise says the GPU has no price and ranks after every priced one."
    )
    plan = PlanSerializer()
