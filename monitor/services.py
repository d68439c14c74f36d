"""Writes of the monitor: nodes, their keys, endpoints. Samples are written by monitor.ingest."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from monitor.models import Endpoint, Node, NodeKey
from monitor.signing import NodeKeyMaterial, node_key_generate
from monitor.validators import url_problem
from planner.models import Scenario

MAX_ACTIVE_KEYS = 2


class MonitorInputError(ValueError):
    """Bad input for a monitor write, with a message per field (like the engine's SizingInputError)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{field}: {message}" for field, message in errors.items()))
        self.errors = errors


def node_name_clean(name: str) -> str:
    cleaned = slugify(name or "")[:63]
    if not cleaned or cleaned != name:
        raise MonitorInputError({"node": "a node name is 1-63 lowercase letters, digits, - or _ (a Celery queue name)"})
    return cleaned


def node_ensure(*, name: str) -> Node:
    name = node_name_clean(name)
    node, _ = Node.objects.get_or_create(name=name)
    return node


@transaction.atomic
def node_key_create(*, name: str, revoke_others: bool = False) -> NodeKeyMaterial:
    """A new signing key for the node (created if missing). Keys rotate: the previous key stays valid
    until revoked, so agents can be given the new one first; at most two are active at once."""
    node = node_ensure(name=name)
    material = node_key_generate()
    now = timezone.now()
    active = NodeKey.objects.select_for_update().filter(node=node, revoked_at__isnull=True).order_by("-created")
    if revoke_others:
        active.update(revoked_at=now)
    else:
        stale = list(active.values_list("pk", flat=True)[MAX_ACTIVE_KEYS - 1 :])
        NodeKey.objects.filter(pk__in=stale).update(revoked_at=now)
    NodeKey.objects.create(node=node, key_id=material.key_id, secret=material.secret)
    return material


def node_keys_revoke(*, name: str) -> int:
    """Revoke every key of the node. Ingest workers stop accepting them within their key cache's 30 s."""
    from monitor.ingest import ingest_caches_clear

    count = NodeKey.objects.filter(node__name=name, revoked_at__isnull=True).update(revoked_at=timezone.now())
    ingest_caches_clear()
    return count


def endpoint_url_clean(url: str) -> str:
    url = (url or "").strip()
    if problem := url_problem(url):
        raise MonitorInputError({"url": problem})
    return url.rstrip("/")


@transaction.atomic
def endpoint_register(
    *, url: str, node: str, name: str = "", scenario_id: int | None = None, gpu_indices: list[int] | None = None
) -> tuple[Endpoint, bool]:
    """Register (or update) the vLLM server at ``url`` on ``node``; returns it and whether it was new."""
    url = endpoint_url_clean(url)
    node_row = node_ensure(name=node)
    scenario = None
    if scenario_id is not None:
        scenario = Scenario.objects.filter(pk=scenario_id).first()
        if scenario is None:
            raise MonitorInputError({"scenario": f"no scenario with id {scenario_id}"})
    if "\x00" in (name or "") or len(name or "") > 200:
        raise MonitorInputError({"name": "at most 200 characters, no NUL"})
    defaults = {"name": name or "", "scenario": scenario, "enabled": True}
    if gpu_indices is not None:
        defaults["gpu_indices"] = gpu_indices
    try:
        with transaction.atomic():
            return Endpoint.objects.update_or_create(node=node_row, url=url, defaults=defaults)
    except IntegrityError:
        # Two registrations of the same URL at once: the other one won, update it.
        return Endpoint.objects.update_or_create(node=node_row, url=url, defaults=defaults)


@transaction.atomic
def endpoint_update(*, endpoint: Endpoint, changes: dict) -> Endpoint:
    """Change what the API allows on an endpoint: name, scenario, enabled, GPU indices."""
    fields = []
    if "name" in changes:
        if "\x00" in changes["name"]:
            raise MonitorInputError({"name": "no NUL characters"})
        endpoint.name = changes["name"]
        fields.append("name")
    if "scenario" in changes:
        scenario_id = changes["scenario"]
        scenario = None if scenario_id is None else Scenario.objects.filter(pk=scenario_id).first()
        if scenario_id is not None and scenario is None:
            raise MonitorInputError({"scenario": f"no scenario with id {scenario_id}"})
        endpoint.scenario = scenario
        fields.append("scenario")
    for field in ("enabled", "gpu_indices"):
        if field in changes:
            setattr(endpoint, field, changes[field])
            fields.append(field)
    if fields:
        endpoint.save(update_fields=fields)
    return endpoint
