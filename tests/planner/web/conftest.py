"""Fixtures for the planner pages: the catalog loaded into the database, users by role, scenarios."""

from __future__ import annotations

import pytest
from planner_factories import UserFactory

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
