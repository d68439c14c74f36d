"""Who may do what in the planner. Planners create and edit; viewers read; owners or staff delete."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    from planner.models import Scenario

PLANNER_GROUP = "planner"
VIEWER_GROUP = "viewer"


def is_planner(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(user.is_authenticated and (user.is_superuser or user.has_perm("planner.add_scenario")))


def can_edit_scenario(user: AbstractBaseUser | AnonymousUser, scenario: Scenario) -> bool:
    return is_planner(user) and (
        scenario.owner_id == user.pk or user.is_staff or user.has_perm("planner.change_scenario")
    )


def can_delete_scenario(user: AbstractBaseUser | AnonymousUser, scenario: Scenario) -> bool:
    return bool(user.is_authenticated and (scenario.owner_id == user.pk or user.is_staff))
