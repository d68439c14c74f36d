"""The anonymous sizing limit: one count per real client, shared by every worker process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import override_settings

from kvdash.client_address import client_address

ROOT = Path(__file__).resolve().parents[3]
SIZE = "/api/v1/size/"
BASE = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "max_model_len": 32768, "concurrency": 8}
RATES = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_RATES": {"anon_sizing": "3/min"},
}


@pytest.mark.django_db
@override_settings(REST_FRAMEWORK=RATES, TRUSTED_PROXIES=[])
def test_a_made_up_forwarded_for_address_per_call_does_not_dodge_the_limit(anon, catalog) -> None:
    statuses = [
        anon.post(SIZE, BASE, format="json", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}").status_code for n in range(4)
    ]

    assert statuses == [200, 200, 200, 429]


@pytest.mark.django_db
@override_settings(REST_FRAMEWORK=RATES, TRUSTED_PROXIES=["10.0.0.0/8"])
def test_behind_a_trusted_proxy_clients_are_told_apart_by_the_address_it_saw(anon, catalog) -> None:
    def post(forwarded: str) -> int:
        return anon.post(SIZE, BASE, format="json", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=forwarded).status_code

    # The client's own (left) entries change every time; the proxy's (right-most) entry is what counts.
    first = [post(f"198.51.100.{n}, 203.0.113.7") for n in range(4)]
    second = post("203.0.113.8")

    assert first == [200, 200, 200, 429]
    assert second == 200


@pytest.mark.parametrize(
    ("meta", "trusted", "expected"),
    [
        ({"REMOTE_ADDR": "203.0.113.9", "HTTP_X_FORWARDED_FOR": "1.2.3.4"}, [], "203.0.113.9"),
        ({"REMOTE_ADDR": "203.0.113.9", "HTTP_X_FORWARDED_FOR": "1.2.3.4"}, ["10.0.0.1"], "203.0.113.9"),
        ({"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "1.2.3.4, 203.0.113.9"}, ["10.0.0.1"], "203.0.113.9"),
        # Two proxies of ours in a row: skip both.
        (
            {"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "1.2.3.4, 203.0.113.9, 10.0.0.5"},
            ["10.0.0.0/24"],
            "203.0.113.9",
        ),
        # Our proxy wrote something that is not an address: fall back to the proxy's own.
        ({"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "garbage"}, ["10.0.0.1"], "10.0.0.1"),
        ({"REMOTE_ADDR": "10.0.0.1"}, ["10.0.0.1"], "10.0.0.1"),
        ({"REMOTE_ADDR": "::1", "HTTP_X_FORWARDED_FOR": "2001:db8::7"}, ["::1"], "2001:db8::7"),
    ],
)
def test_client_address_believes_forwarded_for_only_from_trusted_proxies(meta, trusted, expected) -> None:
    with override_settings(TRUSTED_PROXIES=trusted):
        assert client_address(meta) == expected


WORKER = """
import django; django.setup()
from django.test import Client
from django.test.utils import override_settings
from django.core.cache import caches
print(type(caches["default"]).__name__)
rates = {"DEFAULT_THROTTLE_RATES": {"anon_sizing": "3/min"}}
with override_settings(REST_FRAMEWORK=rates, KVDASH_PUBLIC_SIZING=True):
    for _ in range(2):
        print(Client().post("/api/v1/size/", {"model": "llama-3.1-8b", "gpu": "h100-sxm"},
                            content_type="application/json").status_code)
"""


def _redis_answers() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url("redis://127.0.0.1:6379/13", socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


@pytest.mark.parametrize("cache", ["database", "redis"])
def test_two_worker_processes_count_against_one_limit(tmp_path, cache) -> None:
    if cache == "redis" and not _redis_answers():
        pytest.skip("no Redis on 127.0.0.1:6379")
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL"}}
    env.update(
        DJANGO_SETTINGS_MODULE="kvdash.settings",
        KVDASH_VAR_DIR=str(tmp_path / "var"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
    )
    if cache == "redis":
        env["CACHE_URL"] = "redis://127.0.0.1:6379/13"
    setup = "import django; django.setup(); from django.core.management import call_command; "
    setup += "call_command('migrate', verbosity=0); call_command('load_catalog', verbosity=0); "
    setup += "from django.core.cache import cache; cache.clear()"
    done = subprocess.run([sys.executable, "-c", setup], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

    outputs = []
    for _ in range(2):  # one process after the other, as two gunicorn workers taking turns
        worker = subprocess.run(
            [sys.executable, "-c", WORKER], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert worker.returncode == 0, worker.stderr
        outputs.append(worker.stdout.split())

    backend = {"database": "DatabaseCache", "redis": "RedisCache"}[cache]
    assert outputs == [[backend, "200", "200"], [backend, "200", "429"]]
