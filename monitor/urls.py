from __future__ import annotations

from django.urls import path

from monitor import views, views_alerts

app_name = "monitor"

urlpatterns = [
    path("", views.fleet_page, name="fleet"),
    path("fleet.json", views.fleet_data, name="fleet-data"),
    path("report/", views.report_page, name="report"),
    path("endpoints/<int:pk>/", views.endpoint_page, name="endpoint"),
    path("endpoints/<int:pk>/charts.json", views.endpoint_charts, name="endpoint-charts"),
    path("alerts/", views_alerts.alerts_page, name="alerts"),
    path("alerts/<int:pk>/acknowledge/", views_alerts.alert_acknowledge_view, name="alert-acknowledge"),
    path("alerts/<int:pk>/silence/", views_alerts.alert_silence_view, name="alert-silence"),
    path("silences/<int:pk>/expire/", views_alerts.silence_expire_view, name="silence-expire"),
]
