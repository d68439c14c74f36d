"""The API docs pages, served entirely from our own static files (the dashboard must work air-gapped)."""

from __future__ import annotations

from typing import Any

from django.template import engines
from drf_spectacular.views import SpectacularRedocView
from rest_framework.renderers import TemplateHTMLRenderer

# drf-spectacular's Redoc page pulls web fonts from Google; keep its body, drop the font links (system fonts).
_REDOC_TEMPLATE = """{% extends "drf_spectacular/redoc.html" %}
{% block head %}
<title>{{ title|default:"Redoc" }}</title>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body { margin: 0; padding: 0; }</style>
{% endblock head %}"""


class _InlineTemplateRenderer(TemplateHTMLRenderer):
    def resolve_template(self, template_names: Any) -> Any:
        return engines["django"].from_string(_REDOC_TEMPLATE)


class LocalRedocView(SpectacularRedocView):
    renderer_classes = [_InlineTemplateRenderer]
