"""bench/calibrate.py refits memory.py's coefficients from the start-ups, holds a quarter out, and reports both;
the data file's links point at files that exist (a commit, not a branch, and no empty anchors)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DATA = json.loads((ROOT / "tests/planner/sizing/data/vllm_startups.json").read_text(encoding="utf-8"))


def _calibrate():
    spec = importlib.util.spec_from_file_location("calibrate", ROOT / "bench" / "calibrate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["calibrate"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_a_stable_quarter_of_the_start_ups_is_held_out():
    calibrate = _calibrate()
    points = calibrate.load_points()
    held = [p.id for p in points if p.held_out]
    assert 0.15 * len(points) < len(held) < 0.35 * len(points)
    assert held == [p.id for p in calibrate.load_points() if p.held_out]  # the same split every run


def test_the_refit_agrees_with_memory_py_and_holds_on_unseen_start_ups(capsys):
    calibrate = _calibrate()
    points = calibrate.load_points()
    refit = calibrate.fit([p for p in points if not p.held_out], calibrate.current())
    # memory.py's figures (14.8 bytes per logit, 4 hidden buffers, 0.3 + 0.016 GiB a layer, 0.25 GiB) were fitted
    # on all the points by hand; a refit on three quarters of them lands within a few per cent.
    assert refit.sampler_lean == pytest.approx(14.8, rel=0.05)
    assert refit.sampler_older == pytest.approx(38.4, rel=0.05)
    assert refit.forward_buffers == pytest.approx(4, rel=0.1)
    assert refit.graph_base_gib == pytest.approx(0.3, abs=0.05)
    assert refit.graph_per_layer_gib == pytest.approx(0.016, abs=0.002)
    assert refit.non_torch_tp1_gib == pytest.approx(0.25, abs=0.02)
    results = calibrate.report(points)
    held_activation = sorted(abs(e) for e in results["activation"]["refit"])
    assert held_activation and held_activation[len(held_activation) // 2] < 0.1  # median |error| in GiB
    out = capsys.readouterr().out
    assert "held out" in out and "sampler_lean" in out


def test_source_links_name_a_commit_and_no_empty_anchor():
    links = [u for p in DATA["points"] for u in (p.get("source"), p.get("log")) if u] + list(DATA["sources"].values())
    for link in links:
        assert "#issuecomment " not in link and not link.endswith("#issuecomment"), link
        if link.startswith("https://github.com/") and "/blob/" in link:
            assert re.search(r"/blob/[0-9a-f]{40}/", link), link
    # The v0.19 per-run JSON files were removed from the repository after cb66659: links use that commit.
    runs = [u for u in links if "/accuracy/results/v0.19.0/runs/" in u]
    assert runs and all("/blob/cb666596283a96db2b66e72c79f773add871020f/" in u for u in runs)
