from __future__ import annotations

from celery import shared_task


@shared_task(name="kvdash.ping")
def ping() -> str:
    """Round trip through the broker and a worker; used by the health tests."""
    return "pong"
