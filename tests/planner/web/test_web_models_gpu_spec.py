from __future__ import annotations

import pytest

from planner.models import GpuProfile
from planner.sizing import GpuSpec


@pytest.mark.django_db
def test_a_custom_gpu_without_a_marketed_figure_still_gives_a_spec():
    gpu = GpuProfile.objects.create(
        slug="lab-card", name="Lab card", memory_bytes=24 * 2**30, bandwidth_tbs=1.0, bf16_tflops=100.0
    )
    spec = gpu.spec()
    assert isinstance(spec, GpuSpec)
    assert spec.memory_bytes == 24 * 2**30
    assert spec.marketed_memory_gb == pytest.approx(25.8)
