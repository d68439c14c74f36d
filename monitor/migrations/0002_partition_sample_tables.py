"""Turn the raw sample tables into tables partitioned by day on "time" (PostgreSQL only; SQLite keeps
plain tables). The tables are empty here: they were created by 0001 just before."""

from django.db import migrations

TABLES = {
    "monitor_enginesample": '"endpoint_id", "engine", "time"',
    "monitor_gpusample": '"gpu_id", "time"',
    "monitor_histogramsample": '"endpoint_id", "engine", "name", "time"',
}


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, key in TABLES.items():
        schema_editor.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_plain"')
        schema_editor.execute(f'CREATE TABLE "{table}" (LIKE "{table}_plain" INCLUDING DEFAULTS) PARTITION BY RANGE ("time")')
        schema_editor.execute(f'DROP TABLE "{table}_plain"')
        schema_editor.execute(f'ALTER TABLE "{table}" ADD PRIMARY KEY ({key})')
        # Rollups and retention scan by time across all series: BRIN is tiny and suits append-mostly data.
        schema_editor.execute(f'CREATE INDEX "{table}_time_brin" ON "{table}" USING brin ("time")')


def unpartition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, key in TABLES.items():
        schema_editor.execute(f'CREATE TABLE "{table}_plain" (LIKE "{table}" INCLUDING DEFAULTS)')
        schema_editor.execute(f'INSERT INTO "{table}_plain" SELECT * FROM "{table}"')
        schema_editor.execute(f'DROP TABLE "{table}" CASCADE')
        schema_editor.execute(f'ALTER TABLE "{table}_plain" RENAME TO "{table}"')
        schema_editor.execute(f'ALTER TABLE "{table}" ADD PRIMARY KEY ({key})')


class Migration(migrations.Migration):
    dependencies = [("monitor", "0001_initial")]

    operations = [migrations.RunPython(partition, unpartition)]
