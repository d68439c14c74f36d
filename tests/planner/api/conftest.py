"""Fixtures for the REST API tests: the catalog in the database, users by role, API clients, scenarios."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from planner_factories import ApiScenarioFactory, UserFactory
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from planner.models import Scenario
from planner.selectors import spec_cache_clear
from planner.services import catalog_load


@pytest.fixture(autouse=True)
def _fresh_caches(request: pytest.FixtureRequest) -> None:
    # Rolled-back rows can reuse primary keys, and throttle counters live in the cache: start each test clean.
    spec_cache_clear()
    # The cache is a database table (or Redis): only tests that may touch the database clear it, once their
    # database access is set up (this fixture runs before the ones that set it up).
    if "transactional_db" in request.fixturenames:
        request.getfixturevalue("transactional_db")
    elif request.node.get_closest_marker("django_db") or "db" in request.fixturenames:
        request.getfixturevalue("db")
    else:
        return
    cache.clear()


@pytest.fixture
def catalog(db: None) -> None:
    catalog_load()


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


def _token_client(user: object) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def planner_user(db: None):
    return UserFactory(username="api-planner", editor=True)


@pytest.fixture
def other_planner(db: None):
    return UserFactory(username="api-planner-2", editor=True)


@pytest.fixture
def viewer_user(db: None):
    return UserFactory(username="api-viewer")


@pytest.fixture
def planner(planner_user) -> APIClient:
    return _token_client(planner_user)


@pytest.fixture
def viewer(viewer_user) -> APIClient:
    return _token_client(viewer_user)


@pytest.fixture
def scenario(catalog: None, planner_user) -> Scenario:
    return ApiScenarioFactory(owner=planner_user, name="Llama on H100")
