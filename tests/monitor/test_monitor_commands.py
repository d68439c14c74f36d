"""Commands for humans and scripts: node keys, endpoint registration, the agent's start-up checks."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from monitor.models import Endpoint, Node, NodeKey
from monitor.signing import node_key_parse

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def test_create_node_key_prints_the_key_once_and_never_logs_it(caplog):
    caplog.set_level(logging.DEBUG)
    out, err = io.StringIO(), io.StringIO()
    call_command("create_node_key", "gpu-a", stdout=out, stderr=err)
    line = out.getvalue().strip()
    assert line.startswith("KVDASH_NODE_KEY=")
    key = node_key_parse(line.removeprefix("KVDASH_NODE_KEY="))
    stored = NodeKey.objects.get(key_id=key.key_id)
    assert stored.node.name == "gpu-a" and stored.secret == key.secret
    assert key.secret not in err.getvalue() and key.secret not in caplog.text
    assert key.secret not in str(stored) and key.secret not in repr(key)


def test_rotating_keeps_the_previous_key_until_revoked():
    first = io.StringIO()
    call_command("create_node_key", "gpu-a", "--quiet", stdout=first)
    second = io.StringIO()
    call_command("create_node_key", "gpu-a", "--quiet", stdout=second)
    active = set(NodeKey.objects.filter(revoked_at__isnull=True).values_list("key_id", flat=True))
    assert active == {node_key_parse(first.getvalue()).key_id, node_key_parse(second.getvalue()).key_id}
    third = io.StringIO()
    call_command("create_node_key", "gpu-a", "--quiet", "--revoke-others", stdout=third)
    active = set(NodeKey.objects.filter(revoked_at__isnull=True).values_list("key_id", flat=True))
    assert active == {node_key_parse(third.getvalue()).key_id}


def test_register_endpoint_creates_the_node_and_prints_json():
    out = io.StringIO()
    call_command("register_endpoint", "http://127.0.0.1:8100/", "--node", "local", "--json", stdout=out)
    row = json.loads(out.getvalue())
    assert row == {"id": row["id"], "url": "http://127.0.0.1:8100", "node": "local", "scenario": None, "created": True}
    assert Endpoint.objects.get().node == Node.objects.get(name="local")


@pytest.mark.parametrize(
    "args",
    [
        ["register_endpoint", "not a url", "--node", "local"],
        ["register_endpoint", "http://127.0.0.1:8100", "--node", "Not A Node"],
        ["register_endpoint", "http://127.0.0.1:8100", "--node", "local", "--scenario", "424242"],
        ["create_node_key", "UPPER CASE"],
    ],
)
def test_bad_arguments_exit_2_with_the_field(args):
    with pytest.raises(CommandError) as error:
        call_command(*args)
    assert error.value.returncode == 2


def _manage(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_run_agent_refuses_to_start_without_a_key():
    env = {"KVDASH_NODE_KEY": "", "KVDASH_NODE_KEY_FILE": ""}
    result = _manage("run_agent", "--node", "gpu-a", env=env)
    assert result.returncode == 2
    assert "create_node_key gpu-a" in result.stderr


def test_run_agent_refuses_a_bad_node_name_and_an_unreadable_key_file(tmp_path):
    assert _manage("run_agent", "--node", "bad name", env={"KVDASH_NODE_KEY": "abc.def"}).returncode == 2
    missing = str(tmp_path / "missing.key")
    assert _manage("run_agent", "--node", "gpu-a", "--key-file", missing, env={"KVDASH_NODE_KEY": ""}).returncode == 2


def test_only_agents_heard_from_lately_get_scrapes(frozen_now):
    import datetime as dt

    from monitor.selectors import scrape_plan
    from monitor.services import endpoint_register

    for name in ("fresh", "silent", "never"):
        endpoint_register(url=f"http://{name}:8000", node=name)
    Node.objects.filter(name="fresh").update(last_heartbeat_at=frozen_now - dt.timedelta(seconds=30))
    Node.objects.filter(name="silent").update(last_heartbeat_at=frozen_now - dt.timedelta(minutes=6))
    plan = scrape_plan()
    # An agent that never started or went quiet 6 minutes ago would only pile up expired scrapes.
    assert list(plan) == ["fresh"]
    assert [target["url"] for target in plan["fresh"]] == ["http://fresh:8000"]
