from __future__ import annotations

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from monitor.api import views

router = SimpleRouter()
router.register("nodes", views.NodeViewSet, basename="api-node")
router.register("endpoints", views.EndpointViewSet, basename="api-endpoint")

urlpatterns = [path("api/v1/", include(router.urls))]
