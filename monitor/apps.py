from __future__ import annotations

from django.apps import AppConfig


class MonitorConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "monitor"
    verbose_name = "Monitor"

    def ready(self) -> None:
        # Celery's autodiscovery imports monitor/tasks.py only: the other task modules register here.
        from monitor import alert_tasks, prometheus_tasks  # noqa: F401
