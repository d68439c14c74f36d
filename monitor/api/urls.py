from __future__ import annotations

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from monitor.api import alerts as alert_views
from monitor.api import sources as source_views
from monitor.api import views

router = SimpleRouter()
router.register("nodes", views.NodeViewSet, basename="api-node")
router.register("endpoints", views.EndpointViewSet, basename="api-endpoint")
router.register("alerts", alert_views.AlertViewSet, basename="api-alert")
router.register("prometheus-sources", source_views.PrometheusSourceViewSet, basename="api-prometheus-source")
router.register("prometheus-targets", source_views.PrometheusTargetViewSet, basename="api-prometheus-target")

urlpatterns = [path("api/v1/", include(router.urls))]
