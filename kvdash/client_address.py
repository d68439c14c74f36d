"""The address a request came from, believing X-Forwarded-For only when our own proxy sent it."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Mapping
from typing import Any

from django.conf import settings

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.cache
def _networks(entries: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def _is_trusted(address: str, networks: tuple[IPNetwork, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def client_address(meta: Mapping[str, Any]) -> str:
    """REMOTE_ADDR, unless it is a trusted proxy (settings.TRUSTED_PROXIES, addresses or networks): then the
    right-most X-Forwarded-For entry that is not a trusted proxy, which is the address that proxy saw.

    Entries left of that are whatever the client wrote, so they are never believed.
    """
    remote = str(meta.get("REMOTE_ADDR") or "")
    networks = _networks(tuple(settings.TRUSTED_PROXIES))
    if not networks or not _is_trusted(remote, networks):
        return remote
    forwarded = [part.strip() for part in str(meta.get("HTTP_X_FORWARDED_FOR") or "").split(",") if part.strip()]
    for address in reversed(forwarded):
        if not _is_trusted(address, networks):
            return address if _is_address(address) else remote
    return forwarded[0] if forwarded else remote
