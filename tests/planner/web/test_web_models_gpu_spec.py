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


@pytest.mark.django_db
def test_gpu_prices_are_editable_in_the_admin_list(client, catalog):
    from django.contrib.auth import get_user_model

    from planner.models import GpuProfile

    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(admin)
    body = client.get("/admin/planner/gpuprofile/").content.decode()
    h100 = GpuProfile.objects.get(slug="h100-sxm")
    assert f'name="form-{list(GpuProfile.objects.order_by("name")).index(h100)}-price_per_hour"' in body
    assert "price_date" in body
    change = client.get(f"/admin/planner/gpuprofile/{h100.pk}/change/").content.decode()
    assert 'name="price_source"' in change and "deploybase.ai" in change
