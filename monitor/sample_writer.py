"""Sample rows into the sample tables, ignoring any (series, time) already stored.

On PostgreSQL a table's rows go in one ``INSERT ... SELECT FROM unnest(column arrays)`` on a cursor that binds
parameters on the server: one statement per table whatever the row count, each column sent as one binary
array (no per-element quoting). Django's own cursor binds on the client and quotes every value in Python, which
cost more than the insert itself (docs/benchmarks.md, ingest). Elsewhere (SQLite) ``bulk_create``.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import psycopg
from django.db import connection
from django.db.models import Model

_JSON_TYPES = {"jsonb", "json"}
_INTEGER_TYPES = {"smallint", "integer", "bigint"}
_FLOAT_TYPES = {"double precision", "real"}


@cache
def _insert_plan(model: type[Model]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(SQL, (attribute, kind) per column) for ``model``; kind is "json", "int" or "" (passed as it is)."""
    fields = model._meta.concrete_fields
    columns, arrays, selects, attributes = [], [], [], []
    for index, field in enumerate(fields):
        db_type = field.db_type(connection)
        assert db_type is not None
        name = f"c{index}"
        columns.append(connection.ops.quote_name(field.column))
        if db_type in _JSON_TYPES:
            arrays.append("%b::text[]")
            selects.append(f"{name}::{db_type}")
            kind = "json"
        else:
            arrays.append(f"%b::{db_type}[]")
            selects.append(name)
            kind = "int" if db_type in _INTEGER_TYPES else "float" if db_type in _FLOAT_TYPES else ""
        attributes.append((field.attname, kind))
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(f"c{index}" for index in range(len(fields)))
    sql = (
        f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(selects)} "
        f"FROM unnest({', '.join(arrays)}) AS u({names}) ON CONFLICT DO NOTHING"
    )
    return sql, tuple(attributes)


def _column(objs: list[Any], attribute: str, kind: str) -> list[Any]:
    values = [getattr(obj, attribute) for obj in objs]
    if kind == "json":
        return [None if value is None else json.dumps(value) for value in values]
    # One Python type per array (binary arrays refuse mixed int and float), converted as Django's fields do.
    if kind == "int":
        return [None if value is None else int(value) for value in values]
    if kind == "float":
        return [None if value is None else float(value) for value in values]
    return values


def server_bound_cursor() -> psycopg.Cursor[Any]:
    """A cursor on Django's connection (inside its transaction) that binds parameters on the server."""
    connection.ensure_connection()
    return psycopg.Cursor(connection.connection)


def insert_statement(model: type[Model], objs: list[Any]) -> tuple[str, list[Any]]:
    """The PostgreSQL ``INSERT`` of ``objs`` ignoring stored keys, and its parameters (one array per column);
    the SQL is the same whatever the rows, so psycopg prepares it once."""
    sql, attributes = _insert_plan(model)
    return sql, [_column(objs, attribute, kind) for attribute, kind in attributes]


def insert_ignoring(model: type[Model], objs: list[Any]) -> None:
    """Insert ``objs`` (unsaved instances of ``model``), skipping rows whose key is already stored."""
    if not objs:
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(objs, ignore_conflicts=True, batch_size=2000)
        return
    sql, attributes = _insert_plan(model)
    with server_bound_cursor() as cursor:
        cursor.execute(sql, [_column(objs, attribute, kind) for attribute, kind in attributes])
