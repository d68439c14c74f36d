"""Nemotron-NAS / DeciLM (``block_configs``) sized as vLLM 0.33.0 builds and caches it.

Read in vLLM 0.33.0's source: ``model_executor/models/nemotron_nas.py`` (a layer whose ``attention.no_op`` is
set has no Attention module, so no KV cache; otherwise ``num_attention_heads // n_heads_in_group`` KV heads;
the FFN is a gated LlamaMLP of ``_ffn_mult_to_intermediate_size(ffn_mult)``), ``config/model.py``
(``get_num_kv_heads``: ``max(1, heads // tp)``, replicated when tp exceeds the heads; the model-level figure
is the first attention layer's, ``NemotronNasModelArchConfigConvertor``), ``v1/core/kv_cache_planning.py``
(``get_kv_cache_groups``: identical layer specs, or specs of one type that differ in heads
(``UniformTypeKVCacheSpecs``), make one KV cache group; a pipeline stage keeps its own layers of it,
``_project_kv_cache_groups_to_worker``), ``v1/kv_cache_interface.py`` (that group's page is the sum of its
layers' pages) and ``distributed/utils.py`` (``get_pp_indices``).

The config is the real nvidia/Llama-3_3-Nemotron-Super-49B-v1 ``config.json``: 80 layers, 64 query heads,
hidden 8,192, head 128, bf16; 49 layers with attention (all ``n_heads_in_group`` 8: 8 KV heads), 31 with a
no-op attention (layers 6, 7, 11, 42-51, 53-70). 40 GiB of KV memory per GPU (--kv-cache-memory-bytes) keeps the
figures independent of the memory estimates: 40 GiB = 42,949,672,960 bytes. max_model_len is the config's
131,072 and the block 16, so a request at max_model_len holds 131,072 / 16 = 8,192 blocks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.sizing import PlanInputs, SizingInputError, catalog_gpus, compute_plan, model_spec_from_hf_config
from planner.sizing.figures import kv_bytes_per_token
from planner.sizing.hf_config import _ffn_mult_to_intermediate_size

CONFIG = Path(__file__).parent / "data" / "hf_configs" / "nvidia--Llama-3_3-Nemotron-Super-49B-v1.json"
HF_ID = "nvidia/Llama-3_3-Nemotron-Super-49B-v1"
NO_ATTENTION = (6, 7, 11, *range(42, 52), *range(53, 71))


def config() -> dict:
    with CONFIG.open(encoding="utf-8") as handle:
        return json.load(handle)


def variable_heads() -> dict:
    """The 49B config with layers 12-41 at n_heads_in_group 32 (2 KV heads): 19 attention layers keep 8 KV heads
    (0-5, 8-10, 52, 71-79), 30 have 2. vLLM's per-layer specs then differ in heads only."""
    cfg = config()
    for index in range(12, 42):
        cfg["block_configs"][index]["attention"]["n_heads_in_group"] = 32
    return cfg


def plan_for(cfg: dict, **kwargs):
    model = model_spec_from_hf_config(cfg, hf_id=HF_ID)
    inputs = PlanInputs(model=model, gpu=catalog_gpus()["h100-sxm"], kv_cache_memory_gib=40, **kwargs)
    return compute_plan(inputs, advice=False)


def test_the_49b_config_has_49_cached_layers_of_8_kv_heads():
    model = model_spec_from_hf_config(config())
    assert [(group.kind, group.num_layers, group.num_kv_heads) for group in model.layer_groups] == [
        ("full", 49, None),
        ("none", 31, None),
    ]
    assert model.num_attention_layers == 49
    assert tuple(i for i, group in enumerate(model.layer_pattern) if group == 1) == NO_ATTENTION
    assert (model.num_kv_heads, model.head_size, model.attention_kind) == (8, 128, "GQA")
    # The widest FFN (ffn_mult 5.25: 28,672), which the activation estimate sizes.
    assert model.intermediate_size == 28_672


@pytest.mark.parametrize(
    ("ffn_mult", "size"),
    [
        (5.25, 28_672),  # 2 x 5.25 x 8,192 / 3 = 28,672, a multiple of 256
        (3.28125, 17_920),  # 17,920 = 70 x 256
        (2.625, 14_336),
        (1.3125, 7_168),
        (1.0, 5_632),  # int(5,461.33) = 5,461, rounded up to 22 x 256 = 5,632
        (0.5, 2_816),  # int(2,730.67) = 2,730, rounded up to 11 x 256 = 2,816
    ],
)
def test_ffn_mult_gives_vllms_intermediate_size(ffn_mult, size):
    assert _ffn_mult_to_intermediate_size(ffn_mult, 8192) == size


def test_parameter_count_is_the_49_9b_of_the_model_card():
    """Every weight vLLM builds (nemotron_nas.py), by hand:
    embeddings and the untied LM head 2 x 128,256 x 8,192 = 2,101,346,304; 49 attention layers of
    q/o 2 x 8,192 x 8,192 + k/v 2 x 8,192 x 1,024 = 150,994,944, so 7,398,752,256; FFNs gate/up/down 3 x 8,192 x
    the widths (49 x 28,672 + 10 x 7,168 + 8 x 5,632 + 6 x 14,336 + 6 x 2,816 + 17,920 = 1,642,496) =
    40,365,981,696; RMSNorms 8,192 x (49 before attention + 80 before an FFN + 1 final) = 1,064,960.
    Total 49,867,145,216: the model card's 49.9B (0.07% under 49.9B, within its rounding)."""
    model = model_spec_from_hf_config(config())
    assert model.params_estimated
    assert model.num_params == 49_867_145_216
    assert abs(model.num_params - 49.9e9) / 49.9e9 < 0.001


@pytest.mark.parametrize(
    ("tp", "per_gpu", "whole"),
    [
        (1, 200_704, 200_704),  # 49 layers x 2 (K, V) x 8 heads x 128 x 2 bytes = 49 x 4,096
        (2, 100_352, 200_704),  # 4 heads per rank: 49 x 2,048
        (8, 25_088, 200_704),  # 1 head per rank: 49 x 512
        (16, 25_088, 401_408),  # 8 heads < tp 16: each rank keeps a replicated head, 49 x 512 x 16
    ],
)
def test_kv_bytes_per_token_count_the_49_attention_layers(tp, per_gpu, whole):
    plan = plan_for(config(), tensor_parallel_size=tp)
    assert plan.kv_bytes_per_token_per_gpu == per_gpu
    assert plan.kv_bytes_per_token == whole
    assert plan.layers_per_gpu == 49


@pytest.mark.parametrize(
    ("tp", "blocks", "concurrency", "tokens"),
    [
        # Block 16 x 200,704 = 3,211,264 bytes; 42,949,672,960 // 3,211,264 = 13,374; 13,374 / 8,192 = 1.6326;
        # int(1.6326 x 131,072) = 213,984.
        (1, 13_374, 13_374 / 8_192, 213_984),
        # 16 x 100,352 = 1,605,632 bytes; // gives 26,749; 26,749 / 8,192 = 3.2653; 427,984 tokens.
        (2, 26_749, 26_749 / 8_192, 427_984),
        # 16 x 25,088 = 401,408 bytes; // gives 106,997; 13.0612; 1,711,952 tokens.
        (8, 106_997, 106_997 / 8_192, 1_711_952),
    ],
)
def test_blocks_tokens_and_concurrency_at_40_gib(tp, blocks, concurrency, tokens):
    plan = plan_for(config(), tensor_parallel_size=tp)
    assert plan.block_size == 16
    assert plan.num_gpu_blocks == blocks
    assert plan.worst_case_blocks_per_request == 8_192
    assert plan.max_concurrency == pytest.approx(concurrency)
    assert plan.reported_kv_cache_tokens == tokens
    # One KV cache group of the 49 attention layers; the 31 no-op layers hold nothing.
    assert [(group.kind, group.num_layers, group.num_groups) for group in plan.kv_groups] == [("full", 49, 1)]


def test_pipeline_stages_keep_their_own_attention_layers():
    """pp 2 splits 80 layers 40 / 40 (get_pp_indices); layers 0-39 hold 37 attention layers, 40-79 hold 12
    (40, 41, 52, 71-79). Each stage's block spans its own layers; vLLM takes the smaller block count: at tp 2 the
    first stage's 16 x 37 x 2,048 = 1,212,416 bytes gives 42,949,672,960 // 1,212,416 = 35,424 blocks."""
    plan = plan_for(config(), tensor_parallel_size=2, pipeline_parallel_size=2)
    assert plan.layers_per_gpu == 37
    assert plan.kv_bytes_per_token_per_gpu == 75_776
    assert plan.num_gpu_blocks == 35_424
    assert plan.reported_kv_cache_tokens == 566_784  # int(35,424 / 8,192 x 131,072)


def test_layers_with_their_own_kv_heads_share_one_kv_cache_group():
    """vLLM merges specs that differ only in KV heads into one UniformTypeKVCacheSpecs group: a block holds a page
    per layer, each its own size, with no page unification or hybrid grouping. At tp 2: 19 x 2,048 + 30 x
    512 (2 heads / 2 = 1 per rank) = 54,272 bytes per token; block 16 x 54,272 = 868,352 bytes; 42,949,672,960 //
    868,352 = 49,461 blocks; 49,461 / 8,192 = 6.0377; int(6.0377 x 131,072) = 791,376 tokens."""
    model = model_spec_from_hf_config(variable_heads())
    assert [(group.kind, group.num_layers, group.num_kv_heads) for group in model.layer_groups] == [
        ("full", 19, None),
        ("none", 31, None),
        ("full", 30, 2),
    ]
    assert model.num_kv_heads == 8  # the first attention layer's (NemotronNasModelArchConfigConvertor)
    plan = plan_for(variable_heads(), tensor_parallel_size=2)
    assert plan.kv_bytes_per_token_per_gpu == 54_272
    assert plan.num_gpu_blocks == 49_461
    assert plan.worst_case_blocks_per_request == 8_192
    assert plan.reported_kv_cache_tokens == 791_376
    assert [(group.kind, group.num_layers, group.num_groups) for group in plan.kv_groups] == [("full", 49, 1)]
    assert plan.group_block_sizes == ()
    names = {assumption.name for assumption in plan.assumptions}
    assert "kv_cache_groups" in names and "page_size_unification" not in names
    # What the pages and charts show: bf16 at tp 1, 19 x 4,096 + 30 x 1,024.
    assert kv_bytes_per_token(model, "bfloat16") == 108_544


def test_variable_heads_replicate_past_tp_and_stages_sum_their_own_pages():
    """tp 8: 8 heads give 1 per rank and 2 heads are replicated to 1 per rank: 49 x 512 = 25,088 bytes per GPU,
    25,088 x 8 = 200,704 per replica instead of 19 x 4,096 + 30 x 1,024 = 108,544 unreplicated.
    pp 2 at tp 2: layers 0-39 hold 9 layers of 8 heads (0-5, 8-10) and 28 of 2 (12-39): 9 x 2,048 + 28 x 512 =
    32,768 bytes per token (not 37 x 2,048, its largest page over every layer); 40-79 hold 2 of 2 heads and 10 of
    8: 21,504. Blocks 42,949,672,960 // (16 x 32,768) = 81,920, 10 requests of 131,072 tokens."""
    wide = plan_for(variable_heads(), tensor_parallel_size=8)
    assert (wide.kv_bytes_per_token_per_gpu, wide.kv_bytes_per_token) == (25_088, 200_704)
    assert any("tp 8 > 2 KV heads" in warning and "instead of 108,544" in warning for warning in wide.warnings)
    staged = plan_for(variable_heads(), tensor_parallel_size=2, pipeline_parallel_size=2)
    assert staged.kv_bytes_per_token_per_gpu == 32_768
    assert staged.num_gpu_blocks == 81_920
    assert staged.max_concurrency == pytest.approx(10.0)


def test_the_stage_with_the_widest_block_binds():
    """Layers 0-39 at 2 KV heads (n_heads_in_group 32), 40-79 keep 8: the model's KV heads are layer 0's, 2. At pp 2,
    tp 2 the first stage holds 37 x 512 = 18,944 bytes per token, the second 12 x 2,048 = 24,576: its blocks of
    16 x 24,576 = 393,216 bytes number 42,949,672,960 // 393,216 = 109,226, the fewer, and vLLM takes those."""
    cfg = config()
    for block in cfg["block_configs"][:40]:
        if not block["attention"]["no_op"]:
            block["attention"]["n_heads_in_group"] = 32
    model = model_spec_from_hf_config(cfg)
    assert model.num_kv_heads == 2
    assert [(group.num_layers, group.num_kv_heads) for group in model.layer_groups] == [(37, None), (31, None), (12, 8)]
    plan = plan_for(cfg, tensor_parallel_size=2, pipeline_parallel_size=2)
    assert plan.num_gpu_blocks == 109_226
    assert (plan.layers_per_gpu, plan.kv_bytes_per_token_per_gpu) == (12, 24_576)


def test_a_full_plan_with_advice_and_command():
    model = model_spec_from_hf_config(config(), hf_id=HF_ID)
    plan = compute_plan(PlanInputs(model=model, gpu=catalog_gpus()["h100-sxm"], tensor_parallel_size=4))
    assert plan.num_gpu_blocks > 0
    assert f"vllm serve {HF_ID}" in plan.vllm_command


def _bad(mutate) -> SizingInputError:
    cfg = config()
    mutate(cfg)
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(cfg)
    return error.value


@pytest.mark.parametrize(
    ("mutate", "says"),
    [
        (lambda cfg: cfg["block_configs"].pop(), "one block per layer (80)"),
        (lambda cfg: cfg.update(block_configs={"attention": {}}), "one block per layer (80)"),
        (lambda cfg: cfg["block_configs"][3].pop("ffn"), "layer 3: needs both an attention and an ffn"),
        (lambda cfg: cfg["block_configs"][0]["attention"].pop("n_heads_in_group"), "layer 0: attention.n_heads_in"),
        (lambda cfg: cfg["block_configs"][5]["attention"].update(n_heads_in_group=3), "3 does not divide the 64"),
        (lambda cfg: cfg["block_configs"][5]["attention"].update(n_heads_in_group=0), "positive integer"),
        (lambda cfg: cfg["block_configs"][2]["ffn"].pop("ffn_mult"), "layer 2: ffn.ffn_mult"),
        (lambda cfg: cfg["block_configs"][2]["ffn"].update(ffn_mult="5.25"), "ffn.ffn_mult must be a positive"),
        (lambda cfg: cfg["block_configs"][1]["attention"].update(no_op="yes"), "must be true or false"),
        (lambda cfg: cfg["block_configs"][1]["attention"].update(no_op=True, replace_with_linear=True), "both"),
        (
            lambda cfg: cfg["block_configs"][9]["attention"].update(replace_with_linear=True, n_heads_in_group=None),
            "layer 9: attention.replace_with_linear: vLLM 0.33's nemotron_nas.py has no linear replacement",
        ),
        (lambda cfg: cfg["block_configs"][9]["ffn"].update(replace_with_linear=True), "ffn.replace_with_linear"),
        (lambda cfg: [block["attention"].update(no_op=True) for block in cfg["block_configs"]], "no layer has"),
    ],
)
def test_bad_block_configs_name_block_configs(mutate, says):
    error = _bad(mutate)
    assert set(error.errors) == {"block_configs"}
    assert says in error.errors["block_configs"]


def test_no_op_ffns_and_intermediate_size_blocks():
    """An ffn no_op drops the layer's MLP (and its norm); an ffn without ffn_mult but with intermediate_size is
    read as vLLM's other branch reads it (``block_config.ffn.intermediate_size``)."""
    base = model_spec_from_hf_config(config())
    cfg = config()
    cfg["block_configs"][0]["ffn"] = {"no_op": True}  # ffn_mult 2.625: 3 x 8,192 x 14,336 + a norm of 8,192
    cfg["block_configs"][1]["ffn"] = {"intermediate_size": 28_672}  # ffn_mult 5.25's width: no change
    assert base.num_params - model_spec_from_hf_config(cfg).num_params == 3 * 8_192 * 14_336 + 8_192
