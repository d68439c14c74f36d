"""The production image: static files collected the way the Dockerfile does, pages rendered under production
settings, what the build context leaves out, the secrets production refuses, the one-off migrate service."""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PYTHON_BIN = str(Path(sys.executable).parent)


def _production_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE"}}
    env.update(
        KVDASH_ENV="production",
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="testserver",
        SECURE_SSL_REDIRECT="false",
        KVDASH_VAR_DIR=str(tmp_path / "var"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        STATIC_ROOT=str(tmp_path / "static"),
        PATH=f"{PYTHON_BIN}:{env.get('PATH', '')}",
    )
    env.pop("CELERY_BROKER_URL", None)
    env.pop("CELERY_RESULT_BACKEND", None)
    env.update(extra)
    return env


def _dockerfile_collectstatic() -> str:
    """The Dockerfile's collectstatic step, as the shell command it runs."""
    lines = [line for line in (ROOT / "Dockerfile").read_text().splitlines() if "collectstatic" in line]
    assert len(lines) == 1, lines
    assert lines[0].startswith("RUN ")
    return lines[0].removeprefix("RUN ")


PAGES_SCRIPT = """
import django; django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth.models import User
from django.test import Client
from planner.services import catalog_load
catalog_load()
user = User.objects.create_user("ops", password="x")
client = Client()
for path in ("/", "/accounts/login/", "/healthz"):
    print(path, client.get(path).status_code)
client.force_login(user)
for path in ("/planner/", "/planner/models/", "/planner/models/llama-3.1-8b/", "/monitor/"):
    print(path, client.get(path).status_code)
"""


def test_pages_render_under_production_settings_with_static_files_collected_as_the_dockerfile_does(tmp_path):
    env = _production_env(tmp_path)
    built = subprocess.run(
        ["sh", "-c", _dockerfile_collectstatic()], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "static" / "staticfiles.json").exists()
    result = subprocess.run(
        [sys.executable, "-c", PAGES_SCRIPT],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "kvdash.settings"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    statuses = dict(line.split() for line in result.stdout.splitlines())
    assert statuses == {
        "/": "200",
        "/accounts/login/": "200",
        "/healthz": "200",
        "/planner/": "200",
        "/planner/models/": "200",
        "/planner/models/llama-3.1-8b/": "200",
        "/monitor/": "200",
    }


def test_healthz_fails_when_pages_cannot_render_for_want_of_collected_static_files(tmp_path):
    # What the old image did: no manifest under production settings. /healthz must not call that healthy.
    code = (
        "import django; django.setup(); from django.core.management import call_command;"
        "call_command('migrate', verbosity=0); from django.test import Client; r = Client().get('/healthz');"
        "print(r.status_code, ','.join(r.json()['failing']))"
    )
    env = {**_production_env(tmp_path), "DJANGO_SETTINGS_MODULE": "kvdash.settings"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["503", "pages"]


def _dockerignore_patterns() -> set[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def test_dockerignore_keeps_secrets_local_state_and_git_out_of_the_image():
    patterns = _dockerignore_patterns()
    assert {".env", ".venv", ".git", "var"} <= patterns
    # The example file documents the settings; it holds no secret.
    assert "!.env.example" in patterns


def _settings_load(tmp_path: Path, secret_key: str) -> subprocess.CompletedProcess[str]:
    env = {**_production_env(tmp_path), "SECRET_KEY": secret_key, "DJANGO_SETTINGS_MODULE": "kvdash.settings"}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "key",
    [
        # What .env.example shipped until now: 56 characters, but public.
        "change-me-to-a-random-value-of-at-least-fifty-characters",
        "dev-only-insecure-key-never-use-in-production",
        "django-insecure-" + "k3y" * 20,
        # 60 characters, 2 different ones.
        "ab" * 30,
        # 64 characters, 16 different ones (a hex digest is long but has little variety).
        "0123456789abcdef" * 4,
        "short-but-random-Zq8",
    ],
)
def test_production_refuses_a_public_or_weak_secret_key_and_says_how_to_make_one(tmp_path, key):
    result = _settings_load(tmp_path, key)
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr
    assert "secrets.token_urlsafe" in result.stderr


def test_production_starts_with_a_generated_secret_key(tmp_path):
    result = _settings_load(tmp_path, secrets.token_urlsafe(64))
    assert result.returncode == 0, result.stderr


def test_env_example_ships_no_secret_and_compose_has_no_default_database_password():
    example = dict(
        line.split("=", 1) for line in (ROOT / ".env.example").read_text().splitlines() if re.match(r"^[A-Z_]+=", line)
    )
    assert example["SECRET_KEY"] == ""
    assert example["POSTGRES_PASSWORD"] == ""
    compose = (ROOT / "docker-compose.yml").read_text()
    # ${POSTGRES_PASSWORD:-kvdash} would start a database anyone can guess; without a default an unset password
    # leaves the postgres image refusing to initialise. (Not ${VAR:?}: a GPU node's agent needs no password.)
    assert "POSTGRES_PASSWORD:-" not in compose
    assert "POSTGRES_PASSWORD: ${POSTGRES_PASSWORD}" in compose


def test_migrations_and_catalog_load_run_once_in_a_one_off_service_before_web_starts():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    migrate = services["migrate"]
    command = migrate["command"] if isinstance(migrate["command"], str) else shlex.join(migrate["command"])
    assert "manage.py migrate" in command
    assert "manage.py load_catalog" in command
    assert migrate["restart"] == "no"
    for name in ("web", "worker", "beat"):
        web_command = services[name]["command"]
        text = web_command if isinstance(web_command, str) else " ".join(web_command)
        assert "migrate" not in text and "load_catalog" not in text
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}


@pytest.mark.django_db
def test_load_catalog_keeps_admin_edits_to_catalog_rows_unless_asked_to_reset():
    from django.core.management import call_command

    from planner.models import GpuProfile, ModelProfile

    call_command("load_catalog", verbosity=0)
    GpuProfile.objects.filter(slug="h100-sxm").update(price_per_hour=1.23)
    ModelProfile.objects.filter(slug="llama-3.1-8b").update(notes="our fine-tune")
    GpuProfile.objects.filter(slug="l40s").delete()

    call_command("load_catalog", verbosity=0)
    assert GpuProfile.objects.get(slug="h100-sxm").price_per_hour == 1.23
    assert ModelProfile.objects.get(slug="llama-3.1-8b").notes == "our fine-tune"
    assert GpuProfile.objects.filter(slug="l40s").exists()  # a missing catalog row comes back

    call_command("load_catalog", "--reset", verbosity=0)
    assert GpuProfile.objects.get(slug="h100-sxm").price_per_hour != 1.23
    assert ModelProfile.objects.get(slug="llama-3.1-8b").notes != "our fine-tune"
