"""The Celery app, configured once from Django settings (CELERY_ namespace)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvdash.settings")

app = Celery("kvdash")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
