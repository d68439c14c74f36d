"""The monitor's admin: pages open, and a node key's secret is never shown there."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from monitor_factories import endpoint_on, node_with_key

from monitor.models import IngestDrop, Node

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    return client


def test_admin_lists_and_changes_open_and_never_show_a_secret(admin_client, frozen_now):
    node, key = node_with_key("gpu-a")
    endpoint = endpoint_on("gpu-a", 9001)
    IngestDrop.objects.create(node_name="gpu-a", reason="bad_signature", count=2, last_at=frozen_now)
    pages = [
        "/admin/monitor/node/",
        f"/admin/monitor/node/{node.pk}/change/",
        "/admin/monitor/endpoint/",
        f"/admin/monitor/endpoint/{endpoint.pk}/change/",
        "/admin/monitor/ingestdrop/",
        "/admin/monitor/alertrule/",
        "/admin/monitor/alert/",
    ]
    for path in pages:
        response = admin_client.get(path)
        assert response.status_code == 200, path
        assert key.secret not in response.content.decode()
    assert key.key_id in admin_client.get(f"/admin/monitor/node/{node.pk}/change/").content.decode()


def test_revoking_keys_from_the_admin(admin_client, frozen_now):
    node, _key = node_with_key("gpu-a")
    response = admin_client.post(
        "/admin/monitor/node/", {"action": "revoke_keys", "_selected_action": [node.pk]}, follow=True
    )
    assert response.status_code == 200
    assert Node.objects.get(pk=node.pk).keys.filter(revoked_at__isnull=True).count() == 0


def test_an_endpoint_with_a_short_cluster_host_name_saves_in_the_admin(admin_client):
    node, _key = node_with_key("gpu-a")
    response = admin_client.post(
        "/admin/monitor/endpoint/add/",
        {"node": node.pk, "url": "http://vllm-0:8000", "name": "", "enabled": "on", "gpu_indices": "[]"},
    )
    assert response.status_code == 302
    bad = admin_client.post(
        "/admin/monitor/endpoint/add/", {"node": node.pk, "url": "ftp://x", "enabled": "on", "gpu_indices": "[]"}
    )
    assert bad.status_code == 200 and "http(s) URL" in bad.content.decode()
