"""Print an API token for a user (made on first use), for tools that call the REST API."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = "Print the API token of <username>, creating it if needed (--reset replaces an existing one)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--reset", action="store_true", help="Revoke the current token and issue a new one.")

    def handle(self, *args: Any, username: str, reset: bool = False, **options: Any) -> None:
        user_model = get_user_model()
        try:
            user = user_model.objects.get(**{user_model.USERNAME_FIELD: username})
        except user_model.DoesNotExist as exc:
            raise CommandError(f"No user {username!r}; create it first (manage.py createsuperuser).") from exc
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive; a token would not authenticate.")
        if reset:
            Token.objects.filter(user=user).delete()
        token, created = Token.objects.get_or_create(user=user)
        # The key alone on stdout, so scripts can capture it: TOKEN=$(manage.py create_api_token alice)
        self.stdout.write(token.key)
        if created:
            self.stderr.write(f"Created a token for {username}. Send it as: Authorization: Token <key>")
