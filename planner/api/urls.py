from __future__ import annotations

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import SimpleRouter

from planner.api import views
from planner.api.docs_views import LocalRedocView

router = SimpleRouter()
router.register("scenarios", views.ScenarioViewSet, basename="api-scenario")
router.register("models", views.ModelProfileViewSet, basename="api-model")
router.register("gpus", views.GpuProfileViewSet, basename="api-gpu")

urlpatterns = [
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's start-up code as a script file: the CSP allows no inline script.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/redoc/", LocalRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("api/v1/size/", views.SizeView.as_view(), name="api-size"),
    path("api/v1/size/search/", views.SizeSearchView.as_view(), name="api-size-search"),
    path("api/v1/", include(router.urls)),
]
