"""Typed readers for settings taken from the environment; they fail loudly on bad values."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


SECRET_KEY_HOWTO = 'generate one with: python -c "import secrets; print(secrets.token_urlsafe(64))"'  # noqa: S105
# token_urlsafe(64) gives 86 characters of a 64-letter alphabet, about 55 distinct; a hand-typed phrase or a
# repeated pattern has far fewer.
MIN_SECRET_KEY_LENGTH = 50
MIN_SECRET_KEY_DISTINCT = 20


def check_secret_key(key: str, *, public_keys: set[str], public_files: list[Path]) -> None:
    """Refuse a production SECRET_KEY that is missing, short, repetitive, or written down in the repository."""
    if not key:
        raise ImproperlyConfigured(f"KVDASH_ENV=production needs SECRET_KEY; {SECRET_KEY_HOWTO}")
    if key in public_keys or key.startswith("django-insecure") or any(_file_holds(path, key) for path in public_files):
        raise ImproperlyConfigured(f"SECRET_KEY is an example from the repository, so it is public; {SECRET_KEY_HOWTO}")
    if len(key) < MIN_SECRET_KEY_LENGTH or len(set(key)) < MIN_SECRET_KEY_DISTINCT:
        raise ImproperlyConfigured(
            f"SECRET_KEY needs {MIN_SECRET_KEY_LENGTH}+ characters with {MIN_SECRET_KEY_DISTINCT}+ different ones "
            f"(got {len(key)} characters, {len(set(key))} different); {SECRET_KEY_HOWTO}"
        )


def _file_holds(path: Path, key: str) -> bool:
    try:
        return key in path.read_text(encoding="utf-8")
    except OSError:
        return False
