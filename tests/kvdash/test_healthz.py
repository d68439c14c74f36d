from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvdash.celery import app

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_healthz_is_200_when_database_and_broker_answer(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["failing"] == []
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["broker"]["ok"] is True


@pytest.mark.django_db
def test_healthz_is_503_naming_the_broker_when_it_does_not_answer(client):
    saved = app.conf.broker_url, app.conf.broker_write_url
    # Nothing listens on port 1. Celery also fills broker_write_url from CELERY_BROKER_URL: set both.
    app.conf.broker_url = app.conf.broker_write_url = "redis://127.0.0.1:1/0"
    try:
        response = client.get("/healthz")
    finally:
        app.conf.broker_url, app.conf.broker_write_url = saved
    assert response.status_code == 503
    body = response.json()
    assert body["failing"] == ["broker"]
    assert body["checks"]["database"]["ok"] is True


def test_healthz_is_503_naming_the_database_when_it_does_not_answer():
    code = (
        "import django, os; django.setup();"
        "from django.test import Client; r = Client().get('/healthz');"
        "print(r.status_code, ','.join(r.json()['failing']))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "kvdash.settings", "DATABASE_URL": "postgres://nobody@127.0.0.1:1/x"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["503", "database"]


@pytest.mark.django_db
def test_healthz_names_the_failing_part_without_its_error_text(client, caplog):
    saved = app.conf.broker_url, app.conf.broker_write_url
    app.conf.broker_url = app.conf.broker_write_url = "redis://secret-user:hunter2@127.0.0.1:1/0"
    try:
        response = client.get("/healthz")
    finally:
        app.conf.broker_url, app.conf.broker_write_url = saved
    assert response.status_code == 503
    body = response.json()
    assert body == {
        "status": "fail",
        "failing": ["broker"],
        "checks": {"database": {"ok": True}, "broker": {"ok": False}, "pages": {"ok": True}},
    }
    # The reason is in the log for the operator, never in the answer.
    assert "Error" not in response.content.decode()
    assert any(record.name == "kvdash.health" and record.exc_info for record in caplog.records)
