from __future__ import annotations

from django.urls import path

from monitor import views

app_name = "monitor"

urlpatterns = [
    path("", views.fleet_overview, name="fleet"),
]
