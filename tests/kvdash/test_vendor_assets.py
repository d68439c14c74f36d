"""plotly.js is served under a content-hashed name, gzip-compressed and cached for a year; pages have a favicon."""

from __future__ import annotations

import gzip
import hashlib
import re

import pytest

from kvdash.vendor_assets import PLOTLY_JS, plotly_js_url


def test_plotly_is_named_by_its_content_hash():
    digest = hashlib.sha256(PLOTLY_JS.read_bytes()).hexdigest()[:16]
    assert plotly_js_url() == f"/vendor/plotly.{digest}.min.js"


def test_plotly_is_compressed_and_cached_for_a_year(client):
    response = client.get(plotly_js_url(), HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert response["Cache-Control"] == "public, max-age=31536000, immutable"
    assert "Accept-Encoding" in response["Vary"]
    body = response.content
    original = PLOTLY_JS.read_bytes()
    assert gzip.decompress(body) == original
    assert len(body) < len(original) / 2  # 4.8 MB of minified JavaScript compresses to about a third


def test_plotly_without_gzip_is_sent_plain(client):
    response = client.get(plotly_js_url())
    assert "Content-Encoding" not in response
    assert response.content[:100] == PLOTLY_JS.read_bytes()[:100]


def test_an_old_plotly_name_is_404(client):
    assert client.get("/vendor/plotly.0123456789abcdef.min.js").status_code == 404


@pytest.mark.django_db
def test_every_page_names_a_favicon_that_exists(client):
    body = client.get("/accounts/login/").content.decode()
    match = re.search(r'<link rel="icon" href="([^"]+)"', body)
    assert match
    assert client.get(match.group(1)).status_code == 200
    assert client.get("/favicon.ico").status_code == 301
