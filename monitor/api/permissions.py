"""Who may read and change the monitor through the API (the pages use the same rule)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
    from rest_framework.request import Request
    from rest_framework.views import APIView


def can_read_monitor(user: AbstractBaseUser | AnonymousUser) -> bool:
    # Read per request, so a deployment (or a test) can flip it without a restart.
    return bool(getattr(settings, "KVDASH_PUBLIC_MONITOR", False)) or bool(user and user.is_authenticated)


_WRITE_PERMS = {"POST": "add", "PUT": "change", "PATCH": "change", "DELETE": "delete"}


class MonitorAccess(BasePermission):
    """Reads: anyone while KVDASH_PUBLIC_MONITOR is on, else signed-in users. Writes: the model permission
    (staff with monitor rights, or superusers)."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in SAFE_METHODS:
            return can_read_monitor(request.user)
        action = _WRITE_PERMS.get(request.method or "")
        model = getattr(getattr(view, "queryset", None), "model", None)
        if action is None or model is None or not request.user.is_authenticated:
            return False
        return request.user.has_perm(f"monitor.{action}_{model._meta.model_name}")


# The largest primary key a bigint column holds: ids above it are refused as input, never sent to the database.
MAX_ID = 2**63 - 1
