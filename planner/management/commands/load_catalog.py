from __future__ import annotations

from django.core.management.base import BaseCommand

from planner.services import catalog_load


class Command(BaseCommand):
    help = "Load (or refresh) the catalog of models and GPUs from planner/sizing/catalog.json."

    def handle(self, *args, **options) -> None:
        models, gpus = catalog_load()
        self.stdout.write(self.style.SUCCESS(f"Catalog loaded: {models} models, {gpus} GPUs"))
