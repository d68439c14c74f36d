"""docker-compose.yml read as compose would: every command exists in the project, dependencies and health checks
line up, no secret is written into the file, and the GPU-node agent never gets database credentials."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error}, ${NAME?error} or $NAME; $$ is a literal $.
INTERPOLATION = re.compile(
    r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?][^}]*)?\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|_KEY$|^KEY$|WEBHOOK", re.IGNORECASE)


def _words(command: Any) -> list[str]:
    return command if isinstance(command, list) else shlex.split(command)


def _parts(command: Any) -> list[list[str]]:
    """A command as the programs it runs: ``sh -c "a && b"`` is two."""
    words = _words(command)
    if words[:2] == ["sh", "-c"]:
        return [shlex.split(part) for part in re.split(r"&&|;", words[2])]
    return [words]


def _healthcheck_parts(service: dict[str, Any]) -> list[list[str]]:
    test = service["healthcheck"]["test"]
    if isinstance(test, str):
        return _parts(["sh", "-c", test])
    kind, *rest = test
    assert kind in ("CMD", "CMD-SHELL"), f"healthcheck test starts with {kind!r}"
    return _parts(["sh", "-c", rest[0]]) if kind == "CMD-SHELL" else [rest]


def _without_interpolation(text: str) -> str:
    """What the container sees, with every compose variable replaced by a placeholder and $$ by $."""
    return INTERPOLATION.sub("VAR", text.replace("$$", "\0")).replace("\0", "$")


def _option(words: list[str], flag: str) -> str | None:
    return words[words.index(flag) + 1] if flag in words else None


def _check_program(service: str, tokens: list[str]) -> None:
    program = tokens[0]
    if tokens[:2] == ["python", "manage.py"]:
        assert tokens[2] in get_commands(), f"{service}: manage.py {tokens[2]} does not exist"
    elif program == "gunicorn":
        module, _, attr = tokens[1].partition(":")
        assert (ROOT / (module.replace(".", "/") + ".py")).exists() and attr == "application"
    elif program == "celery":
        assert tokens[1:3] == ["-A", "kvdash"] and (ROOT / "kvdash" / "celery.py").exists()
        assert tokens[3] in {"worker", "beat", "inspect"}, f"{service}: celery {tokens[3]}"
    elif program == "python" and tokens[1] == "-c":
        compile(tokens[2], f"<{service} healthcheck>", "exec")
    else:
        assert program in {"pg_isready", "redis-cli", "redis-server", "find", "grep"}, f"{service}: {program}?"


@pytest.mark.parametrize("name", list(SERVICES))
def test_every_command_of_every_service_exists(name):
    service = SERVICES[name]
    if "command" in service:
        for tokens in _parts(service["command"]):
            _check_program(name, [_without_interpolation(token) for token in tokens])
    if "healthcheck" in service:
        for tokens in _healthcheck_parts(service):
            _check_program(name, tokens)


def _worker_name(service: dict[str, Any]) -> str:
    """The node name a Celery worker of this service answers pings as (%h is the container's hostname)."""
    tokens = _words(service["command"])
    if tokens[:3] == ["python", "manage.py", "run_agent"]:
        return f"agent-{_option(tokens, '--node')}@%h"  # run_agent's own naming
    return _option(tokens, "-n") or "celery@%h"


@pytest.mark.parametrize("name", ["worker", "agent", "agent-local"])
def test_celery_health_checks_ping_the_worker_the_service_runs(name):
    service = SERVICES[name]
    [ping] = _healthcheck_parts(service)
    assert ping[:4] == ["celery", "-A", "kvdash", "inspect"] and ping[4] == "ping"
    # $$HOSTNAME reaches the shell as $HOSTNAME: the container's hostname, which Celery's %h also is.
    destination = _option(ping, "-d")
    assert destination is not None and destination.endswith("@$$HOSTNAME")
    assert destination.replace("@$$HOSTNAME", "@%h") == _worker_name(service)
    timeout = float(_option(ping, "--timeout") or 1)
    assert timeout < float(service["healthcheck"]["timeout"].rstrip("s"))


def test_worker_beat_and_agents_have_health_checks_and_the_worker_consumes_ingest():
    for name in ("worker", "beat", "agent", "agent-local"):
        assert "healthcheck" in SERVICES[name], name
    queues = _option(_words(SERVICES["worker"]["command"]), "-Q").split(",")
    assert settings.KVDASH_INGEST_QUEUE in queues and "celery" in queues


def _profiles(name: str) -> set[str]:
    return set(SERVICES[name].get("profiles", []))


@pytest.mark.parametrize("name", list(SERVICES))
def test_dependencies_exist_and_wait_on_what_their_targets_report(name):
    depends_on = SERVICES[name].get("depends_on") or {}
    if isinstance(depends_on, list):
        depends_on = {target: {"condition": "service_started"} for target in depends_on}
    for target, rule in depends_on.items():
        assert target in SERVICES, f"{name} depends on a missing service {target}"
        condition = rule.get("condition", "service_started")
        if condition == "service_healthy":
            assert "healthcheck" in SERVICES[target], f"{name} waits for {target} to be healthy; it has no check"
        elif condition == "service_completed_successfully":
            assert SERVICES[target].get("restart") == "no", f"{target} is a one-off: it must not restart"
        else:
            assert condition == "service_started"
        # A service that always starts cannot wait for one that only a profile starts.
        target_profiles = _profiles(target)
        assert not target_profiles or _profiles(name) & target_profiles, f"{name} -> {target}: profiles"


def test_the_agent_deploys_as_gpu_node_software_with_broker_and_key_only():
    agent = SERVICES["agent"]
    assert agent["image"] == SERVICES["web"]["image"]  # the same image, through the anchor
    assert agent["profiles"] == ["agent"]
    assert _words(agent["command"])[:5] == ["python", "manage.py", "run_agent", "--node", "${NODE_NAME:-}"]
    assert agent["pid"] == "host"
    [device] = agent["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert agent["env_file"] == [] and not agent["depends_on"]
    assert set(agent["environment"]) == {"CELERY_BROKER_URL", "KVDASH_NODE_KEY"}


@pytest.mark.parametrize("name", ["agent", "agent-local"])
def test_no_agent_gets_a_database_url(name):
    service = SERVICES[name]
    environment = service.get("environment") or {}
    assert "DATABASE_URL" not in environment and "POSTGRES_PASSWORD" not in environment
    assert not any("postgres" in str(value) for value in environment.values())
    assert not service.get("env_file"), "the .env file holds the database password"


def _environments() -> list[tuple[str, str, str]]:
    rows = []
    for name, service in SERVICES.items():
        environment = service.get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.partition("=")[::2] for item in environment)
        rows.extend((name, key, str(value)) for key, value in environment.items())
    return rows


@pytest.mark.parametrize(("service", "key", "value"), _environments())
def test_no_secret_is_written_into_the_compose_file(service, key, value):
    # Secrets come from the environment or .env, never from the file, and never as an interpolation default.
    for match in INTERPOLATION.finditer(value):
        default = (match.group("op") or "").lstrip(":")
        variable = match.group("braced") or match.group("bare")
        if SECRET_NAME.search(variable) and default.startswith("-"):
            assert default == "-", f"{service}: {key} has a default {variable}"
    literal = _without_interpolation(value)
    if SECRET_NAME.search(key):
        assert literal in ("", "VAR"), f"{service}: {key} is written into the file"
    # Passwords inside URLs (postgres://user:password@host) must be interpolated too.
    for userinfo in re.findall(r"://([^@/]+)@", literal):
        _user, _, password = userinfo.partition(":")
        assert password in ("", "VAR"), f"{service}: {key} carries a password"


def test_every_variable_the_file_reads_is_documented():
    text = (ROOT / "docker-compose.yml").read_text()
    names = {match.group("braced") or match.group("bare") for match in INTERPOLATION.finditer(text.replace("$$", ""))}
    documented = (ROOT / "docs" / "configuration.md").read_text() + (ROOT / ".env.example").read_text()
    assert names, "the file reads no variables?"
    for name in sorted(names):
        assert name in documented, f"{name} is read by docker-compose.yml but documented nowhere"


def test_named_volumes_are_declared():
    declared = set(COMPOSE.get("volumes") or {})
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if not source.startswith((".", "/")):
                assert source in declared, f"{name}: volume {source} is not declared"


def _compose_binary() -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


def test_compose_itself_accepts_the_file_with_every_profile(tmp_path):
    binary = _compose_binary()
    if binary is None:
        pytest.skip("neither `docker compose` nor docker-compose is installed")
    (tmp_path / "docker-compose.yml").write_text((ROOT / "docker-compose.yml").read_text())
    (tmp_path / ".env").write_text("KVDASH_ENV=production\nPOSTGRES_PASSWORD=test-only\n")
    result = subprocess.run(
        [*binary, "--profile", "demo", "--profile", "agent", "config", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_configuration_md_names_every_variable_the_code_reads():
    reader = re.compile(r'(?:env_(?:str|bool|int|list)|environ\.get|env\.get|getenv)\(\s*"([A-Z0-9_]+)"')
    names = set()
    for folder in ("kvdash", "monitor", "planner"):
        for path in (ROOT / folder).rglob("*.py"):
            names.update(reader.findall(path.read_text()))
    documented = (ROOT / "docs" / "configuration.md").read_text()
    assert {"SECRET_KEY", "DATABASE_URL", "KVDASH_NODE_KEY"} <= names
    assert [name for name in sorted(names) if f"`{name}`" not in documented] == []


@pytest.mark.django_db
def test_the_demo_setup_registers_the_fleet_for_the_compose_agent_and_writes_its_key(tmp_path):
    from django.core.management import call_command

    from monitor.models import Endpoint, NodeKey
    from monitor.signing import node_key_parse
    from planner.services import catalog_load

    catalog_load()
    key_file = tmp_path / "local.key"
    call_command("setup_demo_monitor", "--host", "fleet", "--key-file", str(key_file))
    assert key_file.stat().st_mode & 0o777 == 0o600
    key = node_key_parse(key_file.read_text())
    assert NodeKey.objects.filter(node__name="local", key_id=key.key_id, revoked_at__isnull=True).exists()
    urls = sorted(Endpoint.objects.filter(node__name="local").values_list("url", flat=True))
    assert urls and all(url.startswith("http://fleet:81") for url in urls)
    # The compose services agree with the command: the fleet serves there, the agent reads that key file.
    setup = _words(SERVICES["demo-setup"]["command"])
    agent = _words(SERVICES["agent-local"]["command"])
    assert _option(setup, "--host") == "fleet" and _option(setup, "--key-file") == _option(agent, "--key-file")
