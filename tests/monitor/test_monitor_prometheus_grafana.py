"""The Grafana dashboard shipped in docs/grafana/: it parses, it is importable with any Prometheus data source, and
it overlays kvdash's plan metrics (as the exporter names and labels them) on vLLM's own KV and request series."""

from __future__ import annotations

import json
import re
from pathlib import Path

from monitor.exporter import LABELS, PLANNED

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "kvdash-plan-overlay.json"


def _targets(dashboard: dict) -> list[dict]:
    return [target for panel in dashboard["panels"] for target in panel.get("targets", [])]


def test_the_dashboard_parses_and_takes_its_data_source_as_an_import_input():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["panels"]
    assert [item["name"] for item in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    for panel in dashboard["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
    for target in _targets(dashboard):
        assert target["datasource"]["uid"] == "${DS_PROMETHEUS}"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_the_dashboard_overlays_the_plan_on_vllms_kv_usage_and_running_requests():
    exprs = [target["expr"] for target in _targets(json.loads(DASHBOARD.read_text()))]
    text = "\n".join(exprs)
    for name in ("vllm:kv_cache_usage_perc", "vllm:num_requests_running", *(name for _key, name, _help in PLANNED)):
        assert name in text, name
    # One panel holds both vLLM's KV usage and a plan series: the overlay.
    assert any("vllm:kv_cache_usage_perc" in e and "kvdash_endpoint_planned_" in e for e in exprs)
    # The kvdash series are matched on the label the exporter writes.
    used = set(re.findall(r"kvdash_endpoint_\w+\{(\w+)=~", text))
    assert used and used <= set(LABELS)


def test_every_query_is_balanced():
    for target in _targets(json.loads(DASHBOARD.read_text())):
        expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', target["expr"])  # label values may hold anything
        for opening, closing in ("()", "{}", "[]"):
            depth = 0
            for char in expr:
                depth += (char == opening) - (char == closing)
                assert depth >= 0, target["expr"]
            assert depth == 0, target["expr"]


def test_deploy_md_says_how_to_import_it():
    deploy = (DASHBOARD.parents[1] / "deploy.md").read_text()
    assert "docs/grafana/kvdash-plan-overlay.json" in deploy and "DS_PROMETHEUS" in deploy
