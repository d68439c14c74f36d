"""The API with Kimi-K3's real config (KDA state layers beside MLA layers, linear_attn_config)."""

from __future__ import annotations

from pathlib import Path

SIZE = "/api/v1/size/"
CONFIGS = Path(__file__).parents[1] / "sizing" / "data" / "hf_configs"


def _raw() -> str:
    return (CONFIGS / "moonshotai--Kimi-K3.json").read_text(encoding="utf-8")


def test_kimi_k3_plans_with_kda_state_and_mla(anon, catalog) -> None:
    """Derived in tests/planner/sizing/test_sizing_kimi_linear.py (test_k3_tp8_h200_prefix_caching_on): block 768,
    2,022 blocks, 1,375 per request (1,366 MLA + 3 KDA groups x 3), 1,541,978 tokens reported."""
    body = f'{{"gpu": "h200", "tensor_parallel_size": 8, "kv_cache_memory_gib": 40, "model_config": {_raw()}}}'
    response = anon.post(SIZE, body, content_type="application/json")

    assert response.status_code == 200, response.content
    plan = response.json()
    assert plan["block_size"] == 768
    assert plan["state_page_bytes"] == 814_080
    assert plan["num_gpu_blocks"] == 2_022
    assert plan["worst_case_blocks_per_request"] == 1_375
    assert plan["reported_kv_cache_tokens"] == 1_541_978


def test_a_malformed_linear_attn_config_is_a_400_naming_it(anon, catalog) -> None:
    raw = _raw().replace('"short_conv_kernel_size": 4', '"short_conv_kernel_size": "four"')
    body = f'{{"gpu": "h200", "tensor_parallel_size": 8, "kv_cache_memory_gib": 40, "model_config": {raw}}}'
    response = anon.post(SIZE, body, content_type="application/json")

    assert response.status_code == 400
    # The config's errors come back under model_config, each naming its field and value.
    (message,) = response.json()["model_config"]
    assert message.startswith("linear_attn_config:") and "'four'" in message
