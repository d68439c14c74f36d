"""Vendored scripts too big to serve like the rest of static/: plotly.js is 4.8 MB.

Served under a name holding a hash of its content, so the browser may keep it for a year (a new plotly
release is a new name), and gzip-compressed once per process (about a third of the size). This holds in
every topology, with or without ``collectstatic``: ``make run`` and the tests serve static files from the
finders, where WhiteNoise sends ``max-age=0`` and no compressed copy.
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import plotly
from django.http import Http404, HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import reverse
from django.utils.cache import patch_vary_headers

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
ONE_YEAR_SECONDS = 365 * 24 * 3600


@dataclass(frozen=True)
class Asset:
    digest: str
    body: bytes
    gzipped: bytes


@lru_cache(maxsize=1)
def _plotly_asset() -> Asset:
    body = PLOTLY_JS.read_bytes()
    # mtime=0: the same compressed bytes in every process, whichever worker answers.
    return Asset(hashlib.sha256(body).hexdigest()[:16], body, gzip.compress(body, compresslevel=6, mtime=0))


def plotly_js_url() -> str:
    """The URL of plotly.min.js with its content hash in the name."""
    return reverse("vendor-plotly", kwargs={"digest": _plotly_asset().digest})


def plotly_js(request: HttpRequest, digest: str) -> HttpResponse:
    asset = _plotly_asset()
    if digest != asset.digest:
        raise Http404("no such plotly.js build")  # a page from before an upgrade: it reloads with the new name
    accepts_gzip = "gzip" in request.headers.get("Accept-Encoding", "")
    response = HttpResponse(asset.gzipped if accepts_gzip else asset.body, content_type="text/javascript")
    if accepts_gzip:
        response["Content-Encoding"] = "gzip"
    response["Cache-Control"] = f"public, max-age={ONE_YEAR_SECONDS}, immutable"
    patch_vary_headers(response, ["Accept-Encoding"])
    return response


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico whatever the page says: send them to the static icon."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))
