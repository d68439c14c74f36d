"""Fixtures for the planner pages: the catalog loaded into the database, users by role, scenarios."""

from __future__ import annotations

import pytest
from web_factories import UserFactory

from planner.services import catalog_load


@pytest.fixture
def catalog(db: None) -> None:
    catalog_load()


@pytest.fixture
def planner_user(db: None):
    return UserFactory(username="planner", planner=True)


@pytest.fixture
def viewer_user(db: None):
    return UserFactory(username="viewer")


@pytest.fixture
def planner_client(client, planner_user):
    client.force_login(planner_user)
    return client


@pytest.fixture
def viewer_client(client, viewer_user):
    client.force_login(viewer_user)
    return client


@pytest.fixture(autouse=True)
def fast_password_hashing(settings) -> None:
    # Every scenario factory makes an owner; PBKDF2 would spend most of the suite hashing passwords.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
