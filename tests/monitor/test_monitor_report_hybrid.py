"""Planned against actual for 2026's hybrid models: vLLM's cache_config_info gives the minimum block size over
KV cache groups and the shared pool's num_gpu_blocks, which is what the plan's num_gpu_blocks x block_size is."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from monitor.models import Endpoint, Node
from monitor.report import endpoint_report
from planner.models import GpuProfile, ModelProfile, Scenario
from planner.services import catalog_load


def _endpoint(slug: str, *, tp: int, num_gpu_blocks: int, block_size: int) -> Endpoint:
    catalog_load()
    owner = get_user_model().objects.create(username="owner")
    scenario = Scenario.objects.create(
        name=slug,
        owner=owner,
        model=ModelProfile.objects.get(slug=slug),
        gpu=GpuProfile.objects.get(slug="h100-sxm"),
        tensor_parallel_size=tp,
        kv_cache_memory_gib=40,
    )
    node = Node.objects.create(name="gpu-1")
    return Endpoint.objects.create(
        node=node,
        url="http://127.0.0.1:8000",
        scenario=scenario,
        latest={
            "0": {
                "num_gpu_blocks": num_gpu_blocks,
                "block_size": block_size,
                "gpu_memory_utilization": 0.92,
                "cache_dtype": "auto",
            }
        },
    )


@pytest.mark.django_db
def test_qwen3_next_server_matching_the_plan_is_not_flagged():
    """Qwen3-Next tp 2, 40 GiB: 6,068 blocks of 576 tokens (derivation in tests/planner/sizing/
    test_sizing_hybrid.py, test_qwen3_next_tp2_prefix_caching_on_h100). vLLM labels block_size 576, the
    attention groups' block (the state groups' block equals it in align mode): 6,068 x 576 tokens either way."""
    report = endpoint_report(endpoint=_endpoint("qwen3-next-80b-a3b", tp=2, num_gpu_blocks=6_068, block_size=576))
    assert report is not None
    assert (report["planned_num_gpu_blocks"], report["planned_block_size"]) == (6_068, 576)
    assert report["actual_kv_tokens"] == report["planned_kv_tokens"] == 6_068 * 576
    assert report["deviation_pct"] == 0.0
    assert report["flagged"] is False


@pytest.mark.django_db
def test_gemma4_is_compared_at_the_minimum_block_size():
    """Gemma 4 26B-A4B tp 1, 40 GiB: 65,536 blocks; the full layers' blocks grew to 32 tokens, the sliding
    layers' stay 16, and cache_config_info says block_size 16 (the minimum over groups, vLLM issue #51163)."""
    report = endpoint_report(endpoint=_endpoint("gemma-4-26b-a4b", tp=1, num_gpu_blocks=65_536, block_size=16))
    assert report is not None
    assert report["planned_block_size"] == 16
    assert report["deviation_pct"] == 0.0
    assert report["flagged"] is False


@pytest.mark.django_db
def test_deepseek_v4_is_compared_in_cache_config_info_units():
    """DeepSeek-V4-Flash tp 8 on an H200 at 1M tokens with 100 GiB: 107,134 blocks of 256 tokens
    (test_sizing_compressed_attention.py). vLLM sets cache_config.block_size to the smallest group's block, the
    window-8 compressor states' 4 (v1/engine/core.py), so cache_config_info says num_gpu_blocks 107,134 and
    block_size 4: 428,536 "tokens" in its units. The plan compared in the same units is not flagged; counting
    the plan's 256-token blocks against it flagged this exact match as -98%."""
    endpoint = _endpoint("deepseek-v4-flash", tp=8, num_gpu_blocks=107_134, block_size=4)
    scenario = endpoint.scenario
    scenario.gpu = GpuProfile.objects.get(slug="h200")
    scenario.max_model_len = 1_048_576
    scenario.kv_cache_memory_gib = 100
    scenario.save()
    report = endpoint_report(endpoint=endpoint)
    assert report is not None
    assert (report["planned_num_gpu_blocks"], report["planned_block_size"]) == (107_134, 4)
    assert report["planned_kv_tokens"] == report["actual_kv_tokens"] == 428_536
    assert report["deviation_pct"] == 0.0
    assert report["flagged"] is False
