"""The OpenAPI schema and docs, the documented plan, API tokens (command and admin)."""

from __future__ import annotations

import re
from io import StringIO
from typing import Any

import pytest
from django.contrib import admin
from django.core.management import CommandError, call_command
from drf_spectacular.generators import SchemaGenerator
from rest_framework.authtoken.models import Token, TokenProxy

from planner.api.plan_serializers import CandidateSerializer, PlanSerializer
from planner.models import GpuProfile, ModelProfile
from planner.sizing import PlanInputs, compute_plan, custom_gpu, plan_to_dict

pytestmark = pytest.mark.django_db


def _documented_keys(serializer: Any) -> dict[str, Any]:
    return {name: field for name, field in serializer.fields.items()}


def _assert_documented(serializer: Any, value: dict[str, Any], path: str = "plan") -> None:
    fields = _documented_keys(serializer)
    assert set(value) == set(fields), (
        f"{path}: undocumented {set(value) - set(fields)}, stale {set(fields) - set(value)}"
    )
    for key, field in fields.items():
        child = getattr(field, "child", None) if hasattr(field, "many") or hasattr(field, "child") else None
        if hasattr(field, "fields") and isinstance(value[key], dict):
            _assert_documented(field, value[key], f"{path}.{key}")
        elif child is not None and hasattr(child, "fields") and value[key]:
            _assert_documented(child, value[key][0], f"{path}.{key}[0]")


@pytest.mark.parametrize(
    ("model", "gpu", "extra"),
    [
        ("llama-3.1-8b", "h100-sxm", {"max_model_len": 32768, "concurrency": 8}),
        ("gemma-3-27b", "l40s", {"tensor_parallel_size": 2}),  # sliding-window layers: several KV groups
        ("deepseek-v3", "h200", {"tensor_parallel_size": 8}),  # MLA, MoE
        ("deepseek-v4-flash", "h200", {"tensor_parallel_size": 8}),  # compressed attention: five cache groups
        ("llama-3.1-405b", "l4", {"target_tpot_ms": 1}),  # does not fit: problems and advice rows
    ],
)
def test_plan_serializer_documents_every_field_the_engine_answers(catalog, model, gpu, extra) -> None:
    inputs = PlanInputs(
        model=ModelProfile.objects.get(slug=model).spec(), gpu=GpuProfile.objects.get(slug=gpu).spec(), **extra
    )
    plan = plan_to_dict(compute_plan(inputs))

    _assert_documented(PlanSerializer(), plan)


def test_candidate_serializer_documents_the_search_rows(anon, catalog) -> None:
    rows = anon.post("/api/v1/size/search/", {"model": "llama-3.1-8b", "limit": 1}, format="json").json()

    _assert_documented(CandidateSerializer(), rows[0], "candidate")


def test_plan_of_an_ad_hoc_gpu_is_documented_too(db) -> None:
    from planner.sizing import catalog_models

    plan = plan_to_dict(compute_plan(PlanInputs(model=catalog_models()["qwen3-8b"], gpu=custom_gpu(memory_gib=48))))

    _assert_documented(PlanSerializer(), plan)


def test_schema_lists_every_endpoint(client) -> None:
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    paths = response.json()["paths"]
    assert {
        "/api/v1/size/",
        "/api/v1/size/search/",
        "/api/v1/scenarios/",
        "/api/v1/scenarios/{id}/",
        "/api/v1/scenarios/{id}/plan/",
        "/api/v1/models/",
        "/api/v1/models/{slug}/",
        "/api/v1/models/import/",
        "/api/v1/gpus/",
        "/api/v1/gpus/{slug}/",
    } <= set(paths)
    size = paths["/api/v1/size/"]["post"]
    assert set(size["responses"]) >= {"200", "400"}
    bad_request = size["responses"]["400"]["content"]["application/json"]["schema"]
    assert bad_request["type"] == "object" and "additionalProperties" in bad_request
    schemas = response.json()["components"]["schemas"]
    assert "kv_bytes_per_token_per_gpu" in schemas["Plan"]["properties"]
    assert "model_config" in schemas["SizeRequestRequest"]["properties"]
    assert {"tokenAuth", "cookieAuth"} <= set(response.json()["components"]["securitySchemes"])


def test_schema_is_valid_openapi_without_warnings() -> None:
    # --validate checks against the OpenAPI 3 meta-schema; --fail-on-warn catches unresolvable fields.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")


def test_schema_generation_covers_all_views() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)

    assert schema["info"]["title"] == "kvdash API"
    operation_ids = {op["operationId"] for path in schema["paths"].values() for op in path.values()}
    assert {"size", "size_search", "models_import"} <= operation_ids


def test_docs_page_loads_only_our_own_assets(client) -> None:
    response = client.get("/api/docs/")

    assert response.status_code == 200
    html = response.content.decode()
    urls = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html) + re.findall(r"""url:\s*["']([^"']+)""", html)
    assert any("swagger-ui" in url for url in urls)
    assert all(not re.match(r"^(https?:)?//", url) for url in urls), urls
    assert "cdn." not in html and "unpkg" not in html and "jsdelivr" not in html


def test_redoc_page_loads_only_our_own_assets(client) -> None:
    html = client.get("/api/redoc/").content.decode()

    urls = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html)
    assert urls
    assert all(not re.match(r"^(https?:)?//", url) for url in urls), urls


def test_docs_assets_are_served_from_static_files(client) -> None:
    from django.contrib.staticfiles import finders

    html = client.get("/api/docs/").content.decode()
    scripts = re.findall(r"""src\s*=\s*["']/static/([^"']+)["']""", html)
    assert scripts
    assert all(finders.find(path) for path in scripts)


# --- tokens ---------------------------------------------------------------------------------------------------


def test_create_api_token_prints_a_working_token(django_user_model, anon) -> None:
    user = django_user_model.objects.create_user("tool-bot")
    out = StringIO()

    call_command("create_api_token", "tool-bot", stdout=out, stderr=StringIO())

    key = out.getvalue().strip()
    assert Token.objects.get(user=user).key == key
    anon.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert anon.get("/api/v1/scenarios/").status_code == 200


def test_create_api_token_is_idempotent_and_resets_on_request(django_user_model) -> None:
    django_user_model.objects.create_user("tool-bot")

    def run(*args: str) -> str:
        out = StringIO()
        call_command("create_api_token", "tool-bot", *args, stdout=out, stderr=StringIO())
        return out.getvalue().strip()

    first = run()
    assert run() == first
    reset = run("--reset")
    assert reset != first
    assert Token.objects.filter(user__username="tool-bot").count() == 1


def test_create_api_token_for_an_unknown_user_fails_cleanly(db) -> None:
    with pytest.raises(CommandError, match="No user"):
        call_command("create_api_token", "nobody", stdout=StringIO(), stderr=StringIO())


def test_create_api_token_refuses_an_inactive_user(django_user_model) -> None:
    django_user_model.objects.create_user("gone", is_active=False)

    with pytest.raises(CommandError, match="inactive"):
        call_command("create_api_token", "gone", stdout=StringIO(), stderr=StringIO())


def test_tokens_are_managed_in_the_admin(admin_client, django_user_model) -> None:
    assert admin.site.is_registered(TokenProxy)
    user = django_user_model.objects.create_user("via-admin")

    response = admin_client.post("/admin/authtoken/tokenproxy/add/", {"user": user.pk})

    assert response.status_code == 302
    assert Token.objects.filter(user=user).exists()
