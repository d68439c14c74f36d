"""The API with the real configs of 2026's hybrid models: Infinity in a config, state layers in the shape."""

from __future__ import annotations

import json
from pathlib import Path

from planner.models import ModelProfile
from tests.planner.sizing.test_sizing_falcon_h1 import FALCON_H1_TINY

IMPORT = "/api/v1/models/import/"
SIZE = "/api/v1/size/"
CONFIGS = Path(__file__).parents[1] / "sizing" / "data" / "hf_configs"


def _raw(name: str) -> str:
    return (CONFIGS / f"{name}.json").read_text(encoding="utf-8")


def test_a_config_with_infinity_is_imported_and_stored(planner, catalog) -> None:
    """Nemotron 3 Super's config.json holds ``Infinity`` (time_step_limit): read, and stored as a string
    (PostgreSQL's jsonb refuses the JSON extension)."""
    raw = _raw("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    body = '{"save": true, "slug": "nemotron-3-super", "hf_id": "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", '
    body += f'"config": {raw}}}'
    response = planner.post(IMPORT, body, content_type="application/json")

    assert response.status_code == 201, response.content
    profile = ModelProfile.objects.get(slug="nemotron-3-super")
    profile.refresh_from_db()
    assert profile.config["time_step_limit"] == [0.0, "Infinity"]
    shape = response.json()["shape"]
    # 8 attention layers of 88 cache per-token KV: 8 x 2 KV heads x 128 x 2 (K, V) x 2 bytes = 8,192.
    assert shape["kv_bytes_per_token_bf16"] == 8_192
    assert shape["state"]["kind"] == "mamba2"


def test_sizing_a_config_with_infinity_answers_state_figures(anon, catalog) -> None:
    raw = _raw("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16").replace(
        '"time_step_max"', '"time_step_limit": [0.0, Infinity], "time_step_max"'
    )
    body = f'{{"gpu": "h100-sxm", "kv_cache_memory_gib": 40, "model_config": {raw}}}'
    response = anon.post(SIZE, body, content_type="application/json")

    assert response.status_code == 200, response.content
    plan = response.json()
    # Derived in tests/planner/sizing/test_sizing_hybrid.py (test_nemotron_3_nano_mamba2_state).
    assert plan["block_size"] == 2_096
    assert plan["num_gpu_blocks"] == 3_335
    assert plan["reported_kv_cache_tokens"] == 6_335_146


def test_a_non_finite_number_field_is_still_a_400(anon, catalog) -> None:
    body = '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "gpu_memory_utilization": Infinity}'
    response = anon.post(SIZE, body, content_type="application/json")

    assert response.status_code == 400
    assert "gpu_memory_utilization" in response.json()


def test_deepseek_v4_flash_plans_with_its_five_kv_cache_groups(anon, catalog) -> None:
    """Derived in tests/planner/sizing/test_sizing_compressed_attention.py (test_v4_flash_tp4_64k_on_h200):
    42,853 blocks of 1,002,240 bytes, 6,938 per request, 404,787 tokens reported."""
    raw = _raw("deepseek-ai--DeepSeek-V4-Flash")
    body = (
        '{"gpu": "h200", "tensor_parallel_size": 4, "max_model_len": 65536, "kv_cache_memory_gib": 40, '
        f'"model_config": {raw}}}'
    )
    response = anon.post(SIZE, body, content_type="application/json")

    assert response.status_code == 200, response.content
    plan = response.json()
    assert plan["block_size"] == 256
    assert plan["num_gpu_blocks"] == 42_853
    assert plan["worst_case_blocks_per_request"] == 6_938
    assert plan["reported_kv_cache_tokens"] == 404_787
    groups = plan["kv_groups"]
    assert sum(group["num_groups"] for group in groups) == 5
    assert [(group["kind"], group["window"], group["block_size"]) for group in groups] == [
        ("sliding_window", 128, 64),
        ("full", None, 256),
        ("sliding_window", 8, 4),
        ("sliding_window", 128, 8),
    ]
    assert "C4 latent (37,440 B)" in groups[1]["caches"]


def test_deepseek_v4_with_a_bf16_cache_is_a_400_naming_kv_cache_dtype(anon, catalog) -> None:
    body = f'{{"gpu": "h200", "kv_cache_dtype": "bfloat16", "model_config": {_raw("deepseek-ai--DeepSeek-V4-Flash")}}}'
    response = anon.post(SIZE, body, content_type="application/json")

    assert response.status_code == 400
    assert "kv_cache_dtype" in response.json()


def test_an_hf_quant_config_inside_the_config_sizes_nvfp4_weights(anon, catalog) -> None:
    """Nemotron 3 Nano NVFP4: config.json says nothing of the format; its hf_quant_config.json (quant_algo
    NVFP4) sent under the key hf_quant_config makes the weights NVFP4. Of the config's 31,577,940,288
    parameters (its estimate, checked against the model card's 31.6B in test_sizing_quantised_and_moe.py),
    the embeddings and LM head (704,643,072) and the excluded attention and Mamba projections (372,831,360,
    derived there) stay bf16, the rest at 0.5625 bytes:
    2 x 1,077,474,432 + 0.5625 x 30,500,465,856 = 2,154,948,864 + 17,156,512,044 = 19,311,460,908 bytes."""
    config = json.loads(_raw("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"))
    config["hf_quant_config"] = json.loads(_raw("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.hf_quant_config"))
    response = anon.post(
        SIZE,
        {"model_config": config, "gpu": "h100-sxm", "weights_gib": None, "kv_cache_memory_gib": 10},
        format="json",
    )
    assert response.status_code == 200, response.content
    plan = response.json()
    assert plan["inputs"]["model"]["quantization"] == "nvfp4"
    assert plan["inputs"]["model"]["num_params"] == 31_577_940_288
    assert plan["weights_bytes"] == 19_311_460_908


def test_falcon_h1_parallel_hybrid_plans_through_the_api(anon, catalog) -> None:
    """Falcon-H1-Tiny-90M's fields (tests/planner/sizing/test_sizing_falcon_h1.py), H100, 40 GiB, 262,144 tokens.
    Attention 2 x 64 x 2 x 2 = 512 B a token a layer; Mamba2 page conv (3, 768 + 2 x 64 = 896) + ssm (24, 32, 64),
    bf16: 5,376 + 98,304 = 103,680 B; block 16 x cdiv(103,680, 16 x 512) = 208; 24 + 24 layers in one group each:
    24 x 208 x 512 = 2,555,904 B a block, 16,804 blocks; per request cdiv(262,144, 208) = 1,261 + 3 (align mode:
    running, cached, prefill checkpoint) = 1,264; int(16,804 x 262,144 / 1,264) = 3,485,021 tokens."""
    body = {"gpu": "h100-sxm", "kv_cache_memory_gib": 40, "model_config": FALCON_H1_TINY}
    response = anon.post(SIZE, json.dumps(body), content_type="application/json")

    assert response.status_code == 200, response.content
    plan = response.json()
    assert (plan["block_size"], plan["num_gpu_blocks"]) == (208, 16_804)
    assert plan["worst_case_blocks_per_request"] == 1_264
    assert plan["reported_kv_cache_tokens"] == 3_485_021


def test_mimo_v2_flash_plans_with_its_full_and_sliding_groups(anon, catalog) -> None:
    """Derived in tests/planner/sizing/test_sizing_mimo_v2.py (test_tp4_on_h200_at_40_gib_and_64k): 9 full layers
    (block 32 after page unification) and 39 sliding ones in 5 groups; 233,016 blocks, 7,213 per request,
    2,117,140 tokens reported."""
    raw = _raw("XiaomiMiMo--MiMo-V2-Flash")
    body = (
        '{"gpu": "h200", "tensor_parallel_size": 4, "max_model_len": 65536, "kv_cache_memory_gib": 40, '
        f'"model_hf_id": "XiaomiMiMo/MiMo-V2-Flash", "model_config": {raw}}}'
    )
    response = anon.post(SIZE, body, content_type="application/json")

    assert response.status_code == 200, response.content
    plan = response.json()
    assert plan["num_gpu_blocks"] == 233_016
    assert plan["worst_case_blocks_per_request"] == 7_213
    assert plan["reported_kv_cache_tokens"] == 2_117_140
    assert [(group["kind"], group["num_groups"], group["block_size"]) for group in plan["kv_groups"]] == [
        ("full", 1, 32),
        ("sliding_window", 5, 16),
    ]


def test_a_malformed_mimo_v2_layer_pattern_is_a_400_naming_it(anon, catalog) -> None:
    cfg = json.loads(_raw("XiaomiMiMo--MiMo-V2-Flash"))
    cfg["hybrid_layer_pattern"] = cfg["hybrid_layer_pattern"][:-1]
    body = json.dumps({"gpu": "h200", "tensor_parallel_size": 4, "kv_cache_memory_gib": 40, "model_config": cfg})
    response = anon.post(SIZE, body, content_type="application/json")

    assert response.status_code == 400
    assert "hybrid_layer_pattern" in json.dumps(response.json())


def test_nemotron_nas_block_configs_are_sized(anon, catalog) -> None:
    """Nemotron-NAS (block_configs): derived in tests/planner/sizing/test_sizing_nemotron_nas.py
    (test_blocks_tokens_and_concurrency_at_40_gib): 49 attention layers x 2,048 bytes per token at tp 2, 26,749
    blocks of 16 tokens, 427,984 tokens reported."""
    raw = _raw("nvidia--Llama-3_3-Nemotron-Super-49B-v1")
    body = f'{{"gpu": "h100-sxm", "tensor_parallel_size": 2, "kv_cache_memory_gib": 40, "model_config": {raw}}}'
    response = anon.post(SIZE, body, content_type="application/json")

    assert response.status_code == 200, response.content
    plan = response.json()
    assert plan["kv_bytes_per_token_per_gpu"] == 100_352
    assert plan["num_gpu_blocks"] == 26_749
    assert plan["reported_kv_cache_tokens"] == 427_984
    assert [(group["kind"], group["num_layers"]) for group in plan["kv_groups"]] == [("full", 49)]


def test_bad_nemotron_nas_block_configs_are_a_400_naming_the_field(anon, catalog) -> None:
    cfg = json.loads(_raw("nvidia--Llama-3_3-Nemotron-Super-49B-v1"))
    cfg["block_configs"][4]["attention"]["n_heads_in_group"] = 3
    body = json.dumps({"gpu": "h100-sxm", "model_config": cfg})
    response = anon.post(SIZE, body, content_type="application/json")

    assert response.status_code == 400
    (message,) = response.json()["model_config"]
    assert message.startswith("block_configs: layer 4: attention.n_heads_in_group 3 does not divide"), message
