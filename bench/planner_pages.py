"""Planner pages with 500 saved scenarios: server time of list, detail and compare against /healthz.

Usage: .venv/bin/python bench/planner_pages.py [--scenarios 500] [--repeat 30]

Builds a throw-away database (a temp SQLite file, or a test database beside DATABASE_URL's when that is
set), loads the catalog, saves the scenarios, and times each page through django.test.Client. The target
is under 200 ms per page; the ratio to /healthz (a view that only pings the database and the broker) is
measured in the same run so machines of different speed can be compared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvdash.settings")
os.environ.setdefault("KVDASH_VAR_DIR", tempfile.mkdtemp(prefix="kvdash-bench-var-"))
os.environ.setdefault("KVDASH_ENV", "test")

TARGET_MS = 200.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection

    if connection.vendor == "sqlite":
        # A file, like the embedded set-up, rather than the in-memory database tests get.
        connection.settings_dict["TEST"]["NAME"] = str(Path(os.environ["KVDASH_VAR_DIR"]) / "bench.sqlite3")
    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        return run(args.scenarios, args.repeat, test_db)
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)


def run(count: int, repeat: int, test_db: str) -> int:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from planner.models import GpuProfile, ModelProfile, Scenario
    from planner.selectors import scenario_outcome
    from planner.services import catalog_load

    catalog_load()
    user = get_user_model().objects.create_user("bench")  # force_login: no password needed
    user.user_permissions.add(Permission.objects.get(content_type__app_label="planner", codename="add_scenario"))
    models = list(ModelProfile.objects.filter(slug__in=["qwen3-8b", "llama-3.1-8b", "mistral-7b", "gemma-2-9b"]))
    gpus = list(GpuProfile.objects.filter(slug__in=["rtx-4090", "l4", "a100-80gb", "h100-sxm", "h200"]))
    contexts = (4096, 8192, 16384, 32768)
    Scenario.objects.bulk_create(
        Scenario(
            name=f"bench scenario {i}",
            owner=user,
            model=models[i % len(models)],
            gpu=gpus[i % len(gpus)],
            max_model_len=contexts[i % len(contexts)],
            concurrency=(1, 4, 16, 64)[i % 4],
        )
        for i in range(count)
    )
    scenarios = list(Scenario.objects.select_related("model", "gpu").order_by("pk"))
    fits = [s for s in scenarios if scenario_outcome(scenario=s).fits]
    misses = [s for s in scenarios if not scenario_outcome(scenario=s).fits]
    compare_ids = "&".join(f"ids={s.pk}" for s in scenarios[:4])

    client = Client()
    client.force_login(user)
    pages = [
        ("/healthz (baseline)", "/healthz"),
        ("scenario list, page 1 of 50 rows", "/planner/"),
        ("scenario list, search + GPU filter", "/planner/?q=bench&gpu=h100-sxm"),
        ("scenario detail, plan fits", f"/planner/scenarios/{fits[0].pk}/"),
        ("scenario detail, misses (with advice)", f"/planner/scenarios/{misses[0].pk}/"),
        ("compare 4 scenarios", f"/planner/scenarios/compare/?{compare_ids}"),
        ("new scenario form", "/planner/scenarios/new/"),
    ]
    print(f"database: {connection.vendor} ({test_db}); {count} scenarios ({len(fits)} fit); {repeat} runs per page")
    print(f"{'page':42} {'median ms':>10} {'p95 ms':>8} {'queries':>8} {'× healthz':>10}")
    baseline = None
    worst = 0.0
    for label, url in pages:
        for _ in range(3):  # warm caches, template loading, connections
            assert client.get(url).status_code == 200, url
        with CaptureQueriesContext(connection) as queries:
            client.get(url)
        num_queries = len(queries.captured_queries)  # read now: each request clears Django's query log
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - start) * 1000)
            assert response.status_code == 200
        median = statistics.median(times)
        p95 = sorted(times)[max(0, round(0.95 * len(times)) - 1)]
        baseline = baseline or median
        if url != "/healthz":
            worst = max(worst, p95)
        print(f"{label:42} {median:10.1f} {p95:8.1f} {num_queries:8d} {median / baseline:10.1f}")
    print(f"slowest page p95: {worst:.1f} ms (target < {TARGET_MS:.0f} ms): {'OK' if worst < TARGET_MS else 'SLOW'}")
    return 0 if worst < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
