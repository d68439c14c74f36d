"""Who may call which API endpoint. The rules themselves live in planner.permissions; these adapt them to DRF."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission

from planner.permissions import can_delete_scenario, can_edit_scenario, is_planner

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView

    from planner.models import Scenario


def public_sizing_enabled() -> bool:
    # Read on every request, not at import, so a deployment (or a test) can flip it without a restart.
    return bool(getattr(settings, "KVDASH_PUBLIC_SIZING", False))


class PublicSizing(BasePermission):
    """Stateless sizing and catalog reads: anyone while KVDASH_PUBLIC_SIZING is on, else signed-in users."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return public_sizing_enabled() or bool(request.user and request.user.is_authenticated)


class CatalogAccess(PublicSizing):
    """Catalog reads follow PublicSizing; adding a model to the catalog needs the planner role."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in SAFE_METHODS:
            return super().has_permission(request, view)
        return is_planner(request.user)


class ModelImportAccess(PublicSizing):
    """Previewing an imported config is a sizing read; saving it (``"save": true``) needs the planner role."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if _wants_save(request):
            # Signed-out callers get 401 (with the Token challenge), signed-in non-planners 403.
            return is_planner(request.user)
        return super().has_permission(request, view)


def _wants_save(request: Request) -> bool:
    data = request.data
    return isinstance(data, dict) and data.get("save") in (True, "true", "True", "1", 1)


class ScenarioAccess(BasePermission):
    """Reads need a signed-in user; creating needs the planner role; edits and deletes follow the object rules."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        if request.method == "POST":
            return is_planner(request.user)
        return True

    def has_object_permission(self, request: Request, view: APIView, obj: Scenario) -> bool:
        if request.method in SAFE_METHODS:
            return True
        if request.method == "DELETE":
            return can_delete_scenario(request.user, obj)
        return can_edit_scenario(request.user, obj)
