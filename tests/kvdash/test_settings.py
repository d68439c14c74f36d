from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def _django_eval(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **env}
    full_env.pop("DJANGO_SETTINGS_MODULE", None)
    script = f"import django, os; os.environ['DJANGO_SETTINGS_MODULE']='kvdash.settings'; django.setup(); {code}"
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=60
    )


def test_database_url_selects_postgresql_through_psycopg3():
    url = "postgres://postgres@127.0.0.1:5432/postgres"
    result = _django_eval(
        "from django.db import connection; import psycopg; print(connection.vendor, connection.Database.__name__)",
        DATABASE_URL=url,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["postgresql", "psycopg"]


def test_without_database_url_the_default_is_a_sqlite_file_under_var():
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django,os;django.setup();from django.db import connection as c;"
            "print(c.vendor, c.settings_dict['NAME'])",
        ],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "kvdash.settings", "KVDASH_VAR_DIR": "/tmp/kvdash-var-x"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    vendor, name = result.stdout.split()
    assert vendor == "sqlite"
    assert name == "/tmp/kvdash-var-x/kvdash.sqlite3"


def test_current_connection_matches_database_url():
    expected = "postgresql" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"
    assert connection.vendor == expected


def test_broker_defaults_to_filesystem_transport_and_follows_celery_broker_url():
    expected = os.environ.get("CELERY_BROKER_URL", "filesystem://")
    assert settings.CELERY_BROKER_URL == expected
    result = _django_eval(
        "from kvdash.celery import app; print(app.conf.broker_url)", CELERY_BROKER_URL="redis://127.0.0.1:6379/3"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "redis://127.0.0.1:6379/3"


def test_production_refuses_to_start_without_a_real_secret_key():
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    result = subprocess.run(
        [sys.executable, "-c", "import django;django.setup()"],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "kvdash.settings", "KVDASH_ENV": "production"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_production_settings_pass_check_deploy():
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={
            # The browser tests allow async-unsafe ORM calls in this process; a deployment never does.
            **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
            "KVDASH_ENV": "production",
            "SECRET_KEY": "x" * 20 + "a-real-looking-random-secret-key-0123456789-abcdefgh",
            "ALLOWED_HOSTS": "kvdash.example.com",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_bad_boolean_in_environment_fails_loudly():
    result = _django_eval("pass", DEBUG="maybe")
    assert result.returncode != 0
    assert "DEBUG must be a boolean" in result.stderr
