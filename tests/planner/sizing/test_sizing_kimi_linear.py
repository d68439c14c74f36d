"""Kimi-K3 / Kimi Linear (``linear_attn_config``): KDA state layers beside MLA layers, sized as vLLM 0.33.0 does.

Every expected figure is derived by hand below from vLLM 0.33.0's source; the config is the model's real
config.json (tests/planner/sizing/data/hf_configs/SOURCES.md). Sources:
- layer kinds: ``transformers_utils/configs/kimi_linear.py`` ``is_kda_layer``: layer i is KDA when i + 1 is in
  ``kda_layers`` (1-based: K3 lists 93 as a full layer of 93); the others are MLA (``models/kimi_k3/nvidia/model.py``
  ``KimiDecoderLayer``);
- KDA state: ``model_executor/layers/mamba/mamba_utils.py`` ``kda_state_shape`` (conv
  ``(heads x head_dim + 2 x heads x head_dim) / tp`` by ``kernel - 1 + spec``, recurrent ``(heads / tp, head_dim,
  head_dim)``) and ``kda_state_dtype`` (conv in the model dtype, recurrent float32 under ``auto``);
- checkpoint block: ``models/kimi_k3/nvidia/kda.py`` ``get_kv_cache_spec`` adds one prefill checkpoint block when
  ``resolve_kda_prefill_backend`` picks FlashKDA (auto: SM 9.x/10.x/12.x, bf16, head_dim 128, a gate_lower_bound),
  on a 16-token grid (``layers/mamba/kda_checkpoint.py``); ``v1/kv_cache_interface.py``
  ``MambaSpec.max_memory_usage_bytes``: align mode 2 + spec + checkpoint blocks, none mode 1 + spec;
- MLA latent: ``models/kimi_k3/nvidia/mla.py`` ``get_kv_cache_spec``: ``kv_lora_rank + qk_rope_head_dim`` = 512 + 64
  = 576 values per token per layer, one latent on every rank: 576 x 2 bytes (bf16) = 1,152 bytes;
- block size: ``platforms/interface.py`` ``_align_hybrid_block_size`` (MLA: kernel block at least 128);
- groups: ``v1/core/kv_cache_utils.py`` ``_get_kv_cache_groups_uniform_page_size``; reported tokens:
  ``int(num_blocks / blocks per request x max_model_len)``.

Shared figures (tp 8): conv dim 96 x 128 + 2 x 96 x 128 = 36,864, / 8 = 4,608, x (4 - 1) = 13,824 bf16 = 27,648 B;
recurrent 96 / 8 = 12 x 128 x 128 = 196,608 float32 = 786,432 B; state page 814,080 B.
Block: k = lcm(max(16, 128 for MLA), 16) = 128; 128 x cdiv(814,080, 128 x 1,152 = 147,456) = 128 x 6 = 768.
Attention page 768 x 1,152 = 884,736 B (the state page is padded to it). Groups: 69 KDA and 24 MLA layers;
69 >= 1.5 x 24 so group size 24: 1 MLA group and cdiv(69, 24) = 3 KDA groups. Bytes per block 24 x 884,736 =
21,233,664; with 40 GiB (42,949,672,960 B) per GPU: 42,949,672,960 // 21,233,664 = 2,022 blocks.
max_model_len = max_position_embeddings 1,048,576: MLA blocks cdiv(1,048,576, 768) = 1,366.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from planner.sizing import PlanInputs, SizingInputError, catalog_gpus, compute_plan, model_spec_from_hf_config
from planner.sizing.kimi_linear import kda_mixer_params

CONFIGS = Path(__file__).parent / "data" / "hf_configs"
K3 = "moonshotai--Kimi-K3"


def k3_config() -> dict:
    with (CONFIGS / f"{K3}.json").open(encoding="utf-8") as handle:
        return json.load(handle)


def plan_for(cfg: dict | None = None, *, gpu: str = "h200", **kwargs):
    model = model_spec_from_hf_config(k3_config() if cfg is None else cfg, hf_id="moonshotai/Kimi-K3")
    inputs = PlanInputs(model=model, gpu=catalog_gpus()[gpu], tensor_parallel_size=8, kv_cache_memory_gib=40, **kwargs)
    return compute_plan(inputs, advice=False)


def test_k3_layers_are_kda_and_mla_from_one_based_lists():
    """kda_layers 1, 2, 3, 5, ... 91 (69 layers) are KDA; full_attn_layers 4, 8, ..., 92 and 93 (24) MLA. 1-based:
    layer index 3 (number 4) is the first MLA layer, and index 92 (number 93) the last."""
    model = model_spec_from_hf_config(k3_config())
    assert {group.kind: group.num_layers for group in model.layer_groups} == {"state": 69, "full": 24}
    kinds = [model.layer_groups[index].kind for index in model.layer_pattern]
    assert kinds[:4] == ["state", "state", "state", "full"]
    assert kinds[-2:] == ["full", "full"]  # numbers 92 and 93
    assert (model.attention_kind, model.head_size, model.num_kv_heads) == ("MLA", 576, 1)
    assert model.state is not None
    assert (model.state.kind, model.state.num_heads, model.state.head_dim, model.state.conv_kernel) == (
        "kda",
        96,
        128,
        4,
    )
    assert model.state.ssm_dtype == "float32" and model.state.flashkda


def test_k3_tp8_h200_prefix_caching_on():
    """Align mode (vLLM's default for hybrids). H200 is SM 9.0: FlashKDA, one checkpoint block.
    Per request: 1,366 MLA blocks + 3 KDA groups x (2 + 0 spec + 1 checkpoint) = 1,366 + 9 = 1,375.
    Concurrency 2,022 / 1,375 = 1.47054...; reported tokens int(2,022 x 1,048,576 / 1,375) =
    int(2,120,220,672 / 1,375) = int(1,541,978.67) = 1,541,978. Per token per GPU: 24 MLA layers x 1,152 = 27,648 B.
    """
    plan = plan_for()
    assert plan.state_page_bytes == 814_080
    assert plan.block_size == 768
    assert plan.group_size == 24
    assert {(group.kind, group.num_groups) for group in plan.kv_groups} == {("state", 3), ("full", 1)}
    assert plan.kv_bytes_per_token_per_gpu == 27_648
    assert plan.state_blocks_per_request == 3
    assert plan.num_gpu_blocks == 2_022
    assert plan.worst_case_blocks_per_request == 1_375
    assert plan.max_concurrency == pytest.approx(2_022 / 1_375)
    assert plan.reported_kv_cache_tokens == 1_541_978


def test_k3_tp8_h200_prefix_caching_off():
    """mamba_cache_mode none: 1 state block per KDA group, no checkpoint; the block stays 768 (the MLA kernel
    block 128 and the state page set it, not the grid). Per request 1,366 + 3 x 1 = 1,369; reported tokens
    int(2,120,220,672 / 1,369) = int(1,548,736.79) = 1,548,736."""
    plan = plan_for(enable_prefix_caching=False)
    assert plan.block_size == 768
    assert plan.state_blocks_per_request == 1
    assert plan.num_gpu_blocks == 2_022
    assert plan.worst_case_blocks_per_request == 1_369
    assert plan.reported_kv_cache_tokens == 1_548_736


def test_k3_on_a100_prefills_on_triton_without_a_checkpoint_block():
    """A100 is SM 8.0: is_flashkda_supported is false, Triton prefill, no checkpoint block. Align mode: 2 state
    blocks per KDA group; per request 1,366 + 3 x 2 = 1,372; tokens int(2,120,220,672 / 1,372) = 1,545,350."""
    plan = plan_for(gpu="a100-80gb")
    assert plan.state_blocks_per_request == 2
    assert plan.num_gpu_blocks == 2_022
    assert plan.worst_case_blocks_per_request == 1_372
    assert plan.reported_kv_cache_tokens == 1_545_350


def test_kimi_linear_low_rank_gate_is_triton_only():
    """Without use_full_rank_gate the layer is the shared KimiGatedDeltaNetAttention
    (layers/mamba/gdn/kimi_gdn_linear_attn.py), which asserts the Triton prefill backend and keeps the default
    MambaSpec (no checkpoint block): on H200 too, 2 state blocks per KDA group, 1,372 per request."""
    cfg = k3_config()
    cfg["text_config"]["linear_attn_config"]["use_full_rank_gate"] = False
    plan = plan_for(cfg)
    assert plan.state_page_bytes == 814_080  # same shapes (kda_state_shape)
    assert plan.state_blocks_per_request == 2
    assert plan.worst_case_blocks_per_request == 1_372


def test_k3_speculative_tokens_widen_the_conv_state_and_add_state_blocks():
    """num_speculative_tokens 2: conv 4,608 x (4 - 1 + 2) = 23,040 bf16 = 46,080 B; page 46,080 + 786,432 =
    832,512 B; block 128 x cdiv(832,512, 147,456) = 128 x 6 = 768 still. State blocks 2 + 2 spec + 1 checkpoint = 5;
    K3 has no MTP layer (num_nextn_predict_layers 0): per request 1,366 + 3 x 5 = 1,381."""
    plan = plan_for(num_speculative_tokens=2)
    assert plan.state_page_bytes == 832_512
    assert plan.block_size == 768
    assert plan.state_blocks_per_request == 5
    assert plan.worst_case_blocks_per_request == 1_381


def test_k3_weights_and_parameter_estimate():
    """compressed-tensors mxfp4-pack-quantized under KimiK3ForConditionalGeneration: vLLM rewrites it to mxfp4
    (model_executor/models/config.py), routed experts MXFP4 and every linear layer 16-bit.
    Routed experts: 896 x 3 x 3,584 (latent routed_expert_hidden_size) x 3,072 = 29,595,009,024 per MoE layer,
    x 92 MoE layers (first_k_dense_replace 1) = 2,722,740,830,208.
    One full-rank-gate KDA mixer (P = 96 x 128 = 12,288): in_proj 7,168 x (4P + 128 + 96) = 353,927,168,
    f_b_proj 128 x P = 1,572,864, dt_bias 12,288, conv1d 3P x 4 = 147,456, A_log 96, o_norm 128,
    o_proj P x 7,168 = 88,080,384: 443,740,384."""
    cfg = k3_config()
    model = model_spec_from_hf_config(cfg)
    assert model.quantization == "mxfp4"
    assert model.is_moe and (model.num_experts, model.num_experts_per_tok) == (896, 16)
    assert model.num_expert_params == 2_722_740_830_208
    assert kda_mixer_params(cfg["text_config"], 7_168) == 443_740_384
    assert model.params_estimated
    # Unchecked against a published total (none in the config or vLLM): the estimate is the routed experts plus
    # about 57B of attention, KDA, shared-expert, dense and embedding weights.
    assert 2.75e12 < model.num_params < 2.80e12


def _with_kda(**changes) -> dict:
    cfg = k3_config()
    cfg["text_config"]["linear_attn_config"].update(changes)
    return cfg


@pytest.mark.parametrize(
    ("cfg", "field"),
    [
        (_with_kda(kda_layers=[0, 1, 2]), "linear_attn_config"),  # 0 is not a 1-based layer number
        (_with_kda(kda_layers=[1, 2, 3, 4]), "linear_attn_config"),  # 4 is also a full layer
        (_with_kda(full_attn_layers=[4, 8]), "linear_attn_config"),  # layers in neither list
        (_with_kda(kda_layers="1-3"), "linear_attn_config"),
        (_with_kda(num_heads=None), "linear_attn_config"),
        (_with_kda(gate_lower_bound=-9.0), "linear_attn_config"),
    ],
)
def test_malformed_linear_attn_config_names_it(cfg, field):
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(cfg)
    assert field in error.value.errors


def test_linear_attn_config_that_is_not_an_object_names_it():
    cfg = k3_config()
    cfg["text_config"]["linear_attn_config"] = [1, 2, 3]
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(cfg)
    assert "[1, 2, 3]" in error.value.errors["linear_attn_config"]


def test_mla_with_rope_is_refused_as_vllm_asserts_nope():
    cfg = k3_config()
    cfg["text_config"]["mla_use_nope"] = False
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(cfg)
    assert "mla_use_nope" in error.value.errors


def test_standalone_kimi_linear_with_mxfp4_pack_is_refused():
    """vLLM's mxfp4 rewrite is keyed on KimiK3ForConditionalGeneration; the text model alone stays on
    compressed-tensors (a layout the engine does not size)."""
    cfg = k3_config()
    text = copy.deepcopy(cfg["text_config"])
    with pytest.raises(SizingInputError) as error:
        model_spec_from_hf_config(text)
    assert "mxfp4-pack-quantized" in error.value.errors["quantization_config"]


def test_k3_on_rocm_is_refused_naming_the_gpu():
    """ROCm runs models/kimi_k3/amd/kda.py, whose checkpoint block depends on the installed aiter kernel."""
    with pytest.raises(SizingInputError) as error:
        plan_for(gpu="mi300x")
    assert "aiter" in error.value.errors["gpu"]


def test_tp_that_does_not_split_the_kda_heads_is_refused():
    """KimiK3DeltaAttention asserts num_heads % tp == 0 (and kda_state_shape divides): 100 KDA heads over tp 8
    is 12.5 a rank, so vLLM refuses to start."""
    cfg = k3_config()
    cfg["text_config"]["linear_attn_config"]["num_heads"] = 100  # 100 / 8 is not whole
    with pytest.raises(SizingInputError) as error:
        plan_for(cfg)
    assert "tensor_parallel_size" in error.value.errors
