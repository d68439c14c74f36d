"""Checks behind /healthz: can we reach the database and the Celery broker right now?"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connections


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def check_database() -> Check:
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return Check("database", True, connections["default"].vendor)
    except Exception as exc:  # any driver error means "down"; the message says which
        return Check("database", False, f"{type(exc).__name__}: {exc}")


def check_broker(timeout: float = 2.0) -> Check:
    from kvdash.celery import app

    try:
        with app.connection_for_write(connect_timeout=timeout) as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
            # Kombu's Redis transport connects lazily: ping, or a dead Redis would look healthy.
            client = getattr(conn.default_channel, "client", None)
            if client is not None and hasattr(client, "ping"):
                client.ping()
            transport = conn.transport_cls
        return Check("broker", True, str(transport))
    except Exception as exc:  # kombu raises several families of errors; all mean "down"
        return Check("broker", False, f"{type(exc).__name__}: {exc}")


def run_checks() -> list[Check]:
    return [check_database(), check_broker()]
