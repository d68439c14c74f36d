"""Agent payload signing: HMAC-SHA256 over the exact JSON text the agent sends, with its node key.

A node key is ``<key_id>.<secret>``: the id says which key signed (so keys can rotate), the secret never
leaves the node and the central database. Neither is ever logged: ``NodeKeyMaterial``'s repr hides it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

KEY_ID_BYTES = 8
SECRET_BYTES = 32


class InvalidNodeKey(ValueError):
    """The key text is not ``<key_id>.<secret>``."""


@dataclass(frozen=True)
class NodeKeyMaterial:
    key_id: str
    secret: str = field(repr=False)

    def __str__(self) -> str:
        return f"{self.key_id}.{self.secret}"


def node_key_generate() -> NodeKeyMaterial:
    return NodeKeyMaterial(key_id=secrets.token_hex(KEY_ID_BYTES), secret=secrets.token_urlsafe(SECRET_BYTES))


def node_key_parse(text: str) -> NodeKeyMaterial:
    key_id, sep, secret = text.strip().partition(".")
    if not sep or not key_id or not secret or not key_id.isalnum() or len(key_id) > 32 or len(secret) > 128:
        raise InvalidNodeKey("a node key reads <key_id>.<secret>, as create_node_key prints it")
    return NodeKeyMaterial(key_id=key_id, secret=secret)


def payload_sign(*, body: str, secret: str) -> str:
    return hmac.new(secret.encode(), body.encode(), hashlib.sha256).hexdigest()


def payload_signature_valid(*, body: str, secret: str, signature: str) -> bool:
    return hmac.compare_digest(payload_sign(body=body, secret=secret), signature)
