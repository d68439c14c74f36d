"""Planner tests: pages (web/), API (api/) and engine (sizing/). The factories both sets use are in
planner_factories.py, importable from every test module below this folder."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def fast_password_hashing(settings) -> None:
    # Every scenario factory makes an owner with a password; PBKDF2 would spend most of the suite hashing.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
