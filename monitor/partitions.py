"""Daily range partitions of the raw sample tables on PostgreSQL (native declarative partitioning).

Ingest creates the partition a sample needs before writing it; retention drops whole partitions, which is
instant and leaves no dead rows behind (docs/monitor.md). On SQLite the tables are plain and retention
deletes rows.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable

from django.db import connection, transaction

# Tables partitioned by day on "time" (migration 0002), and the key each partition inherits.
PARTITIONED_TABLES: dict[str, str] = {
    "monitor_enginesample": '"endpoint_id", "engine", "time"',
    "monitor_gpusample": '"gpu_id", "time"',
    "monitor_histogramsample": '"endpoint_id", "engine", "name", "time"',
}
_PARTITION_NAME = re.compile(r"^(?P<table>monitor_[a-z]+)_p(?P<day>\d{8})$")
_known: set[str] = set()


def is_partitioned() -> bool:
    return connection.vendor == "postgresql"


def partition_name(table: str, day: dt.date) -> str:
    return f"{table}_p{day:%Y%m%d}"


def partitions_ensure(*, table: str, days: Iterable[dt.date]) -> list[str]:
    """Create the daily partitions of ``table`` for ``days`` that do not exist yet; returns those created.
    Safe with many writers at once: an advisory lock serialises the DDL, IF NOT EXISTS makes it idempotent."""
    if not is_partitioned():
        return []
    if table not in PARTITIONED_TABLES:
        raise ValueError(f"{table} is not a partitioned table")
    created = []
    for day in sorted(set(days)):
        name = partition_name(table, day)
        if name in _known:
            continue
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [table])
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
            exists = cursor.fetchone()[0]
            if not exists:
                start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
                end = start + dt.timedelta(days=1)
                cursor.execute(
                    f'CREATE TABLE IF NOT EXISTS "{name}" PARTITION OF "{table}" FOR VALUES FROM (%s) TO (%s)',
                    [start, end],
                )
                created.append(name)
            # Remembered only once committed: a rolled-back transaction takes the partition with it.
            transaction.on_commit(lambda name=name: _known.add(name))
    return created


def partitions_list(*, table: str) -> list[tuple[str, dt.date]]:
    if not is_partitioned():
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s ORDER BY c.relname",
            [table],
        )
        names = [row[0] for row in cursor.fetchall()]
    found = []
    for name in names:
        match = _PARTITION_NAME.match(name)
        if match and match["table"] == table:
            found.append((name, dt.datetime.strptime(match["day"], "%Y%m%d").date()))
    return found


def partitions_drop_before(*, table: str, cutoff: dt.date) -> list[str]:
    """Drop every daily partition of ``table`` that ends on or before ``cutoff`` (the whole day is older)."""
    dropped = []
    for name, day in partitions_list(table=table):
        if day < cutoff:
            with connection.cursor() as cursor:
                cursor.execute(f'DROP TABLE IF EXISTS "{name}"')
            _known.discard(name)
            dropped.append(name)
    return dropped


def forget_known_partitions() -> None:
    """Tests drop and recreate databases; the cache of partitions seen must go with them."""
    _known.clear()
