"""Two PATCHes of different fields of one scenario at the same moment: both changes are kept."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from planner.models import Scenario

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="needs a server database: SQLite serialises the writers"
)


def _client(user: object) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def _patch_at_once(user: object, pk: int, changes: list[dict[str, object]]) -> list[int]:
    barrier = threading.Barrier(len(changes))
    statuses: list[int] = []

    def patch(change: dict[str, object]) -> None:
        client = _client(user)
        try:
            barrier.wait(timeout=10)
            statuses.append(client.patch(f"/api/v1/scenarios/{pk}/", change, format="json").status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=patch, args=(change,)) for change in changes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return statuses


@pytest.mark.django_db(transaction=True)
def test_simultaneous_patches_of_different_fields_both_land(scenario, planner_user, settings) -> None:
    settings.ATOMIC_REQUESTS = True
    changes = [{"concurrency": 3}, {"notes": "checked by ops"}, {"max_model_len": 4096}, {"name": "renamed"}]
    for round_ in range(3):  # a race: several rounds, so that the requests really overlap
        Scenario.objects.filter(pk=scenario.pk).update(concurrency=1, notes="", max_model_len=8192, name="start")
        statuses = _patch_at_once(planner_user, scenario.pk, changes)

        row = Scenario.objects.get(pk=scenario.pk)
        assert statuses == [200] * len(changes), round_
        assert (row.concurrency, row.notes, row.max_model_len, row.name) == (3, "checked by ops", 4096, "renamed")
