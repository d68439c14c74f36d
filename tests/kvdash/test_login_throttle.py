"""Failed log-ins are limited per client address and per username; the limit is shared by every worker."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client, override_settings

LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _users(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    cache.clear()
    User.objects.create_user("alice", password="alice-right")
    User.objects.create_superuser("root", "root@example.com", "root-right")


def _post(path: str, username: str, password: str, address: str) -> int:
    return Client().post(path, {"username": username, "password": password}, REMOTE_ADDR=address).status_code


@override_settings(LOGIN_FAILURE_LIMIT=3)
def test_an_address_that_keeps_failing_is_stopped_whatever_username_it_tries():
    failures = [_post(LOGIN, f"guess{n}", "wrong", "203.0.113.5") for n in range(3)]
    blocked = _post(LOGIN, "alice", "alice-right", "203.0.113.5")
    elsewhere = _post(LOGIN, "alice", "alice-right", "198.51.100.9")

    assert failures == [200, 200, 200]  # the form again, with its error
    assert blocked == 429
    assert elsewhere == 302


@override_settings(LOGIN_FAILURE_LIMIT=3)
def test_one_username_guessed_from_many_addresses_is_stopped():
    failures = [_post(LOGIN, "Alice", "wrong", f"203.0.113.{n}") for n in range(3)]
    blocked = _post(LOGIN, "alice", "alice-right", "198.51.100.9")
    other_user = _post(LOGIN, "root", "root-right", "198.51.100.9")

    assert failures == [200, 200, 200]
    assert blocked == 429
    assert other_user == 302


@override_settings(LOGIN_FAILURE_LIMIT=3)
def test_the_admin_log_in_form_has_the_same_limit():
    failures = [_post(ADMIN_LOGIN, "root", "wrong", "203.0.113.5") for _ in range(3)]
    response = Client().post(ADMIN_LOGIN, {"username": "root", "password": "root-right"}, REMOTE_ADDR="203.0.113.5")

    assert failures == [200, 200, 200]
    assert response.status_code == 429
    assert "Too many failed log-ins" in response.content.decode()
    assert response["Retry-After"] == "900"


@override_settings(LOGIN_FAILURE_LIMIT=3)
def test_successful_log_ins_do_not_count():
    statuses = [_post(LOGIN, "alice", "alice-right", "203.0.113.5") for _ in range(5)]

    assert statuses == [302] * 5
