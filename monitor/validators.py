"""Field validators shared by the admin, the API and the commands."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

_HOST_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:[]")
URL_MESSAGE = "enter an http(s) URL with a host, e.g. http://10.0.0.7:8000 (at most 500 characters)"


def url_problem(url: str) -> str | None:
    """Why ``url`` is not a scrape target, or None. Short cluster names (``http://vllm-0:8000``) are fine, as
    they are for Prometheus targets."""
    if len(url) > 500 or any(ord(ch) < 33 or ord(ch) == 127 for ch in url):
        return URL_MESSAGE
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return URL_MESSAGE
    if parts.scheme not in ("http", "https") or not parts.hostname or not set(parts.netloc) <= _HOST_CHARS:
        return URL_MESSAGE
    if port is not None and not 0 < port < 65536:
        return URL_MESSAGE
    return None


def validate_endpoint_url(value: str) -> None:
    if problem := url_problem(value):
        raise ValidationError(problem)
