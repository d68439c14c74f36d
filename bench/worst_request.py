"""What the costliest accepted anonymous request costs against a normal one, through the API in-process.

Run from the repository root: ``.venv/bin/python bench/worst_request.py``. It migrates a throw-away SQLite
database, loads the catalog, and POSTs to /api/v1/size/search/ with Django's test client (no server, no network):

- normal: Llama 3.1 8B from the catalog, 8 users at 32K, every catalog GPU, the default KV dtypes;
- worst: a config at the engine's caps (512 layers alternating sliding/full, tiny widths so that nearly every
  configuration fits), every KV dtype, every GPU, limit 50: the most plans tried and the longest answer.

It prints the median time and the body size of each, and their ratios.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("KVDASH_VAR_DIR", tempfile.mkdtemp(prefix="kvdash-bench-"))
os.environ.pop("DATABASE_URL", None)
os.environ["DJANGO_SETTINGS_MODULE"] = "kvdash.settings"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from planner.sizing.validation import MAX_LAYERS  # noqa: E402

NORMAL = {"model": "llama-3.1-8b", "max_model_len": 32768, "concurrency": 8}
# The same search options as WORST with a real model: separates what the model's size costs from what the
# options (more KV dtypes, a longer answer) cost.
NORMAL_ALL_OPTIONS = {
    **NORMAL,
    "kv_dtypes": ["auto", "bfloat16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "int8", "int4"],
    "max_gpus": 64,
    "limit": 50,
}
WORST = {
    "model_config": {
        "model_type": "llama",
        "num_hidden_layers": MAX_LAYERS,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "hidden_size": 64,
        "intermediate_size": 64,
        "vocab_size": 1000,
        "max_position_embeddings": 2**27,
        "sliding_window": 4096,
        "layer_types": ["sliding_attention" if i % 2 else "full_attention" for i in range(MAX_LAYERS)],
        "torch_dtype": "bfloat16",
    },
    "max_model_len": 32768,
    "concurrency": 8,
    "kv_dtypes": ["auto", "bfloat16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "int8", "int4"],
    "max_gpus": 64,
    "limit": 50,
}


def measure(client: Client, body: dict, runs: int = 9) -> tuple[float, int, int]:
    times, size, count = [], 0, 0
    for _ in range(runs):
        start = time.perf_counter()
        response = client.post("/api/v1/size/search/", json.dumps(body), content_type="application/json")
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, response.content[:300]
        size, count = len(response.content), len(response.json())
    return statistics.median(times), size, count


def main() -> None:
    call_command("migrate", verbosity=0)
    call_command("load_catalog", verbosity=0)
    with override_settings(KVDASH_PUBLIC_SIZING=True, REST_FRAMEWORK={"DEFAULT_THROTTLE_RATES": {"anon_sizing": None}}):
        client = Client()
        normal = measure(client, NORMAL)
        normal_all = measure(client, NORMAL_ALL_OPTIONS)
        worst = measure(client, WORST)
    rows = (("normal", normal), ("normal, all options", normal_all), ("worst accepted", worst))
    for label, (seconds, size, count) in rows:
        print(f"{label:20} {seconds * 1000:8.0f} ms  {size / 1000:8.0f} kB  {count:3} candidates")
    print(f"worst / normal: {worst[0] / normal[0]:.1f}x time, {worst[1] / normal[1]:.1f}x body")
    same = f"{worst[0] / normal_all[0]:.1f}x time, {worst[1] / normal_all[1]:.1f}x body"
    print(f"worst / normal with the same options: {same}")


if __name__ == "__main__":
    main()
