from __future__ import annotations

from django.urls import path

from planner import views

app_name = "planner"

urlpatterns = [
    path("", views.scenario_list, name="scenario-list"),
    path("scenarios/new/", views.scenario_create, name="scenario-create"),
    path("scenarios/preview/", views.scenario_preview, name="scenario-preview"),
    path("scenarios/compare/", views.scenario_compare, name="scenario-compare"),
    path("scenarios/import/", views.scenario_import, name="scenario-import"),
    path("scenarios/<int:pk>/", views.scenario_detail, name="scenario-detail"),
    path("scenarios/<int:pk>/edit/", views.scenario_edit, name="scenario-edit"),
    path("scenarios/<int:pk>/clone/", views.scenario_clone, name="scenario-clone"),
    path("scenarios/<int:pk>/delete/", views.scenario_delete, name="scenario-delete"),
    path("scenarios/<int:pk>/export/", views.scenario_export, name="scenario-export"),
    path("models/", views.model_list, name="model-list"),
    path("models/new/", views.model_create, name="model-create"),
    path("models/<str:slug>/", views.model_detail, name="model-detail"),
]
