from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create (or reset) the demo admin user for `make run` and print its password."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username: str, **options) -> None:
        user_model = get_user_model()
        password = secrets.token_urlsafe(12)
        user, created = user_model.objects.get_or_create(username=username, defaults={"email": "admin@example.com"})
        user.is_staff = True
        user.is_superuser = True
        user.set_password(password)
        user.save()
        planner_group = Group.objects.filter(name="planner").first()
        if planner_group:
            user.groups.add(planner_group)
        verb = "Created" if created else "Reset"
        self.stdout.write(self.style.SUCCESS(f"{verb} demo admin -> user: {username}  password: {password}"))
