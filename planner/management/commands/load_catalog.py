from __future__ import annotations

from django.core.management.base import BaseCommand

from planner.services import catalog_load


class Command(BaseCommand):
    help = (
        "Add the catalog's missing models and GPUs from planner/sizing/catalog.json; rows that exist keep admin "
        "edits unless --reset."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--reset", action="store_true", help="Write the fixture's values over existing catalog rows."
        )

    def handle(self, *args, **options) -> None:
        models, gpus = catalog_load(reset=options["reset"])
        self.stdout.write(self.style.SUCCESS(f"Catalog loaded: {models} models, {gpus} GPUs"))
