"""A throw-away PostgreSQL database for a benchmark: created, migrated, and dropped by the caller."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import psycopg

SERVER = os.environ.get("KVDASH_BENCH_PG", "postgres://postgres@127.0.0.1:5432")


def admin_sql(sql: str) -> None:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as connection:
        connection.execute(sql)


def django_on(db_name: str) -> None:
    """Point Django at ``db_name`` on the benchmark server, set it up and migrate it."""
    os.environ["DATABASE_URL"] = f"{SERVER}/{db_name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvdash.settings")
    os.environ.setdefault("KVDASH_VAR_DIR", str(Path(tempfile.mkdtemp()) / "var"))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
