"""Fuzz every API operation from its own OpenAPI schema (schemathesis): no 5xx, no answer off the schema.

Runs against the Django test database with the catalog loaded, as a planner with a token, so the sizing,
scenario and import operations get past authentication and reach the engine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from planner_factories import ApiScenarioFactory
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

# The schema as /api/schema/ serves it (same generator, same JSON rendering), built once at collection.
RAW_SCHEMA = json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))
# The coverage phase sends every boundary case of every field, whatever max_examples says: ~3,000 requests for the
# big request bodies, over a minute. Explicit examples plus bounded random fuzzing keep the test under ~30 s.
CONFIG = schemathesis.Config.from_dict({"phases": {"coverage": {"enabled": False}}})
schema = schemathesis.openapi.from_dict(RAW_SCHEMA, config=CONFIG)


@pytest.fixture
def wsgi_app() -> Iterator[WSGIHandler]:
    # Django closes "stale" connections around each request; inside the test transaction that would break the
    # transaction, so (as django.test.Client does) keep the test's connection while fuzzing.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield WSGIHandler()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def planner_token(catalog, planner_user) -> str:
    # A few rows so the id and slug paths sometimes hit something real.
    ApiScenarioFactory.create_batch(3, owner=planner_user)
    return Token.objects.get_or_create(user=planner_user)[0].key


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_api_fuzz(case, wsgi_app, planner_token) -> None:
    response = case.call_and_validate(
        app=wsgi_app,
        headers={"Authorization": f"Token {planner_token}"},
        checks=[not_a_server_error, response_schema_conformance],
    )
    assert response.status_code < 500
