"""``{% plotly_js %}``: the hashed, cached URL of the vendored plotly.js (kvdash.vendor_assets)."""

from __future__ import annotations

from django import template

from kvdash.vendor_assets import plotly_js_url

register = template.Library()


@register.simple_tag
def plotly_js() -> str:
    return plotly_js_url()
