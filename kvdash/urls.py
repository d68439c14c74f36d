from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from kvdash import vendor_assets, views
from kvdash.login_throttle import throttle_logins
from monitor import views_metrics

# The admin's own log-in form gets the same limit (AdminSite.get_urls routes to self.login).
admin.site.login = throttle_logins(admin.site.login)  # type: ignore[method-assign]

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("favicon.ico", vendor_assets.favicon),
    path("vendor/plotly.<str:digest>.min.js", vendor_assets.plotly_js, name="vendor-plotly"),
    path("metrics", views_metrics.metrics, name="metrics"),
    path("accounts/login/", throttle_logins(auth_views.LoginView.as_view()), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("planner/", include("planner.urls")),
    path("monitor/", include("monitor.urls")),
    path("", include("planner.api.urls")),
    path("", include("monitor.api.urls")),
]

handler400 = views.bad_request
