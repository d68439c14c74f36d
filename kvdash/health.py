"""Checks behind /healthz: can we reach the database and the Celery broker, and render a page, right now?

The answer names the failing parts only; the reasons go to the log (they can hold hosts, users, paths).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import connections
from django.template.loader import render_to_string

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool


def check_database() -> Check:
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return Check("database", True)
    except Exception:  # any driver error means "down"
        logger.exception("health check: the database does not answer")
        return Check("database", False)


def check_broker(timeout: float = 2.0) -> Check:
    from kvdash.celery import app

    try:
        with app.connection_for_write(connect_timeout=timeout) as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
            # Kombu's Redis transport connects lazily: ping, or a dead Redis would look healthy.
            client = getattr(conn.default_channel, "client", None)
            if client is not None and hasattr(client, "ping"):
                client.ping()
        return Check("broker", True)
    except Exception:  # kombu raises several families of errors; all mean "down"
        logger.exception("health check: the broker does not answer")
        return Check("broker", False)


def check_pages() -> Check:
    # The home page goes through the base template's {% static %}: with the manifest storage of production and
    # no collected manifest every page is a 500 while the database and broker are fine.
    try:
        render_to_string("home.html")
        return Check("pages", True)
    except Exception:  # a template, static-files or settings error: pages cannot render
        logger.exception("health check: a page does not render")
        return Check("pages", False)


def run_checks() -> list[Check]:
    return [check_database(), check_broker(), check_pages()]
