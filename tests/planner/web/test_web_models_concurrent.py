"""Two saves of a custom model at the same moment: one transaction each, racing on the slug's unique index."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection, connections
from django.test import Client
from planner_factories import UserFactory

from planner.models import ModelProfile

CONFIG = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="needs a server database: SQLite serialises the writers"
)


def _save_at_once(users: list, form: dict[str, str]) -> list[int]:
    barrier = threading.Barrier(len(users))
    statuses: list[int] = []

    def save(user: object) -> None:
        client = Client()
        client.force_login(user)
        try:
            barrier.wait(timeout=10)
            statuses.append(client.post("/planner/models/new/", {**form, "save": "1"}).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=save, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return statuses


@pytest.mark.django_db(transaction=True)
def test_simultaneous_saves_of_one_name_are_numbered(settings):
    settings.ATOMIC_REQUESTS = True  # each request one transaction, as a save in production
    users = [UserFactory(username=f"p{i}", planner=True) for i in range(4)]
    statuses = _save_at_once(users, {"name": "Racer", "config_text": json.dumps(CONFIG)})

    assert statuses == [302, 302, 302, 302]
    assert sorted(ModelProfile.objects.values_list("slug", flat=True)) == ["racer", "racer-2", "racer-3", "racer-4"]


@pytest.mark.django_db(transaction=True)
def test_simultaneous_saves_of_one_chosen_slug_keep_one_and_tell_the_others(settings):
    users = [UserFactory(username=f"q{i}", planner=True) for i in range(4)]
    statuses = _save_at_once(users, {"name": "Racer", "slug": "racer", "config_text": json.dumps(CONFIG)})

    # The winner is redirected to its model; the others see the form again with the slug's error.
    assert sorted(statuses) == [200, 200, 200, 302]
    assert list(ModelProfile.objects.values_list("slug", flat=True)) == ["racer"]
