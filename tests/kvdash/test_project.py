from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from django.contrib.staticfiles import finders
from django.core.management import call_command, get_commands

ROOT = Path(__file__).resolve().parents[2]


def test_manage_check_reports_no_issues(capsys):
    call_command("check")
    assert "no issues" in capsys.readouterr().out


@pytest.mark.django_db
def test_migrations_are_committed_for_every_model_change():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_plotly_js_is_served_from_our_own_static_files():
    path = finders.find("vendor/plotly/plotly.min.js")
    assert path is not None
    assert Path(path).stat().st_size > 1_000_000


@pytest.mark.django_db
def test_home_page_has_the_navigation(client):
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    for label, href in [
        ("Planner", "/planner/"),
        ("Monitor", "/monitor/"),
        ("API docs", "/api/docs/"),
        ("Admin", "/admin/"),
    ]:
        assert f'href="{href}"' in html
        assert label in html


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _command_words(service: dict) -> list[str]:
    command = service["command"]
    return command if isinstance(command, list) else shlex.split(command)


def test_compose_has_the_production_services_sharing_one_image():
    services = _compose()["services"]
    assert {"postgres", "redis", "web", "worker", "beat"} <= services.keys()
    assert "healthcheck" in services["postgres"]
    assert services["postgres"]["volumes"]
    images = {services[name]["image"] for name in ("web", "worker", "beat")}
    assert images == {"kvdash:latest"}


def _command_parts(service: dict) -> list[list[str]]:
    words = _command_words(service)
    if words[:2] == ["sh", "-c"]:
        return [shlex.split(part) for part in words[2].split("&&")]
    return [words]


def test_every_compose_command_exists_in_the_project():
    services = _compose()["services"]
    known_commands = get_commands()
    seen = set()
    for name in ("migrate", "web", "worker", "beat"):
        for tokens in _command_parts(services[name]):
            seen.add(tokens[0])
            if tokens[:2] == ["python", "manage.py"]:
                assert tokens[2] in known_commands, f"{name}: manage.py {tokens[2]} does not exist"
            elif tokens[0] == "gunicorn":
                module, _, attr = tokens[1].partition(":")
                assert (ROOT / (module.replace(".", "/") + ".py")).exists()
                assert attr == "application"
            elif tokens[0] == "celery":
                assert tokens[1:3] == ["-A", "kvdash"]
                assert (ROOT / "kvdash" / "celery.py").exists()
                assert tokens[3] in {"worker", "beat"}
            else:
                pytest.fail(f"{name}: unknown command {tokens[0]!r}")
    assert seen == {"python", "gunicorn", "celery"}


def test_env_example_names_every_setting_the_compose_file_needs():
    text = (ROOT / ".env.example").read_text()
    for key in ("KVDASH_ENV", "SECRET_KEY", "ALLOWED_HOSTS"):
        assert f"{key}=" in text


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path", ["/", "/accounts/login/", "/planner/", "/planner/models/", "/api/docs/", "/api/redoc/", "/admin/"]
)
def test_pages_send_a_content_security_policy_that_allows_only_our_own_scripts(admin_client, path):
    import re

    response = admin_client.get(path)
    assert response.status_code == 200
    policy = dict(part.partition(" ")[::2] for part in response["Content-Security-Policy"].split("; ") if part.strip())
    assert policy["script-src"] == "'self'"
    assert policy["object-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'"
    # And the pages keep to it: every <script> has a src (or is json_script data, which never runs).
    body = response.content.decode()
    inline = [tag for tag in re.findall(r"<script\b[^>]*>", body) if "src=" not in tag and "json" not in tag]
    assert inline == []
