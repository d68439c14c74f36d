"""Read a vLLM server's ``/metrics``: one HTTP GET of the plain-text format, parsed by prometheus_client's text
parser, folded into one ``EngineRecord`` per ``engine`` label.

Names follow vLLM's own definitions: V1 in ``vllm/v1/metrics/loggers.py``, V0 in ``vllm/engine/metrics.py``
(facts in ``shared/reference/vllm-metrics.md``). Samples are matched by their exact exposed name, so the
``<name>_created`` timestamps that single-process V1 exports next to every counter and histogram never pass
for a counter.
"""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import requests
from prometheus_client.parser import text_string_to_metric_families
from urllib3.exceptions import ReadTimeoutError  # a read timeout mid-body arrives wrapped in ConnectionError

from .records import EngineRecord, Histogram, ScrapeError, ScrapeResult

# Never OpenMetrics: recent prometheus_client rewrites "vllm:" to "vllm_" in it (client_python #1177).
ACCEPT = "text/plain; version=0.0.4"
# A metrics page is ~30 KB per engine; the cap only stops a hostile or broken server from filling memory.
MAX_BODY_BYTES = 10 * 1024 * 1024
CHUNK_BYTES = 64 * 1024

# Our key -> exposed sample names, preferred first. V1 renamed gpu_cache_usage_perc to kv_cache_usage_perc
# (0.9) and gpu_prefix_cache_* to prefix_cache_*; counters are declared without _total and exposed with it.
GAUGES: dict[str, tuple[str, ...]] = {
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "num_requests_running": ("vllm:num_requests_running",),
    "num_requests_waiting": ("vllm:num_requests_waiting",),
    "num_requests_swapped": ("vllm:num_requests_swapped",),  # V0 only
}
COUNTERS: dict[str, tuple[str, ...]] = {
    "num_preemptions_total": ("vllm:num_preemptions_total",),
    "prefix_cache_hits_total": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "prefix_cache_queries_total": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prompt_tokens_total": ("vllm:prompt_tokens_total",),
    "generation_tokens_total": ("vllm:generation_tokens_total",),
}
REQUEST_SUCCESS = "vllm:request_success_total"  # one series per finished_reason: summed
WAITING_BY_REASON = "vllm:num_requests_waiting_by_reason"  # newest releases: reason="capacity" | "deferred"
CACHE_CONFIG_INFO = "vllm:cache_config_info"  # value 1; CacheConfig.metrics_info() fields as labels
# Histogram key -> base names, preferred first (V0 called the inter-token latency time_per_output_token).
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "e2e": ("vllm:e2e_request_latency_seconds",),
}

_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
WANTED = frozenset(
    {
        *(name for names in GAUGES.values() for name in names),
        *(name for names in COUNTERS.values() for name in names),
        REQUEST_SUCCESS,
        WAITING_BY_REASON,
        CACHE_CONFIG_INFO,
        *(f"{base}{suffix}" for bases in HISTOGRAMS.values() for base in bases for suffix in _HISTOGRAM_SUFFIXES),
    }
)
# Labels that identify a copy of a series rather than a series: folded away by max (several API-server
# processes export the KV gauge once each with a pid label, most copies 0.0).
_COPY_LABELS = ("pid",)
_BLANK = frozenset(" \t\r")
_VLLM_PREFIXES = ("vllm:", "vllm_")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:")

LabelKey = frozenset[tuple[str, str]]
# (engine label or None, exposed name) -> label set without engine/model_name/pid -> every copy's value
SeriesTable = dict[tuple[str | None, str], dict[LabelKey, list[float]]]


def canonical_name(name: str) -> str:
    """``vllm_kv_cache_usage_perc`` (the OpenMetrics rewrite) -> ``vllm:kv_cache_usage_perc``."""
    if name.startswith("vllm_"):
        return "vllm:" + name[5:]
    return name


def _is_plain_sample_line(line: str, name: str) -> bool:
    """A cheap check that a line we skip is a well-formed sample; anything else goes to the parser so it can
    fail the scrape as Prometheus would."""
    if not name or name[0].isdigit() or not _NAME_CHARS.issuperset(name):
        return False
    rest = line[line.rfind("}") + 1 :] if "{" in line else line[len(name) :]
    fields = rest.split()
    if not fields:
        return False
    try:
        float(fields[0])
    except ValueError:
        return False
    return True


# (canonical name, engine, model_name, other labels without pid) for one sample's name-and-labels text.
SeriesKey = tuple[str, str | None, str | None, LabelKey]
# The text parser spends ~30 µs a sample on label parsing, and a server repeats the same name-and-labels
# text every scrape with only the value changed: each distinct text is parsed once by prometheus_client
# and remembered. Bounded: cleared when full (a node's agent sees a few thousand distinct series).
_SERIES_KEYS: dict[str, SeriesKey | None] = {}
_SERIES_KEYS_MAX = 50_000


def _series_key(sample_name: str, sample_labels: dict[str, str]) -> SeriesKey:
    labels = dict(sample_labels)
    engine = labels.pop("engine", None)
    model = labels.pop("model_name", None)
    for label in _COPY_LABELS:
        labels.pop(label, None)
    return canonical_name(sample_name), engine, model, frozenset(labels.items())


def _parsed_key(text: str) -> SeriesKey | None:
    """The series key of ``name{labels}`` as prometheus_client's parser reads it; None if it does not."""
    try:
        cached = _SERIES_KEYS[text]
    except KeyError:
        try:
            samples = [s for family in text_string_to_metric_families(f"{text} 0\n") for s in family.samples]
        except (ValueError, IndexError, KeyError, TypeError):
            samples = []
        cached = _series_key(samples[0].name, samples[0].labels) if len(samples) == 1 else None
        if len(_SERIES_KEYS) >= _SERIES_KEYS_MAX:
            _SERIES_KEYS.clear()
        _SERIES_KEYS[text] = cached
    return cached


def _value(text: str) -> float | None:
    # The parser's own rule (prometheus_client.parser._parse_value): float() without digit separators.
    if "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _quick_sample(line: str, brace: int) -> tuple[SeriesKey, float] | None:
    """One sample line through the key cache, or None when anything about it is unusual (then the whole
    selection goes through the parser, which decides)."""
    if brace >= 0:
        end = line.rfind("}") + 1  # label values may hold "}", but nothing after the last one can
        if end == 0:
            return None
        key_text, rest = line[:end], line[end:]
    else:
        parts = line.split(None, 1)
        if len(parts) != 2:
            return None
        key_text, rest = parts
    fields = rest.split()
    if not 1 <= len(fields) <= 2 or (len(fields) == 2 and _value(fields[1]) is None):
        return None  # value, then an optional timestamp; anything else is the parser's call
    value = _value(fields[0])
    key = _parsed_key(key_text)
    if value is None or key is None:
        return None
    return key, value


def _scan(text: str) -> tuple[list[tuple[SeriesKey, float]] | None, list[str], int, int]:
    """(the wanted samples, or None when the parser must read the selected lines; the selected lines; samples
    in the body; vllm samples in the body).

    A vLLM page is mostly series we never read (queue-time and token-length histograms, ``_created``,
    process and HTTP metrics): they are dropped by name before parsing. Comment lines go too: records are
    built from samples, not families. A line that does not look like a sample is selected, so the parser
    fails the scrape on it as Prometheus would."""
    selected: list[str] = []
    quick: list[tuple[SeriesKey, float]] = []
    usable = True
    samples = 0
    vllm_samples = 0
    for line in text.split("\n"):
        if line[:1] in _BLANK or line[-1:] in _BLANK:
            line = line.strip()
        if not line or line[0] == "#":
            continue
        samples += 1
        brace = line.find("{")
        name = line[:brace] if brace >= 0 else line.split(None, 1)[0]
        if name.startswith(_VLLM_PREFIXES):
            vllm_samples += 1
            if canonical_name(name) in WANTED:
                selected.append(line)
                if usable:
                    sample = _quick_sample(line, brace)
                    if sample is None:
                        usable = False
                    else:
                        quick.append(sample)
                continue
        if not _is_plain_sample_line(line, name):
            selected.append(line)
            usable = False
    return (quick if usable else None), selected, samples, vllm_samples


def _parse_all(lines: list[str]) -> list[tuple[SeriesKey, float]]:
    try:
        # The parser is a generator: a malformed line raises only when reached, after earlier families were
        # already returned. Collect everything first so a bad body is all-or-nothing.
        families = list(text_string_to_metric_families("\n".join(lines) + "\n"))
    except (ValueError, IndexError, KeyError, TypeError) as error:
        raise ScrapeError(f"parse error: {error}"[:200], retryable=False) from error
    return [(_series_key(s.name, s.labels), float(s.value)) for family in families for s in family.samples]


def _table(parsed: list[tuple[SeriesKey, float]]) -> tuple[SeriesTable, dict[str | None, str]]:
    """Every sample by (engine, name) and label set, plus the model name seen per engine."""
    table: SeriesTable = {}
    models: dict[str | None, str] = {}
    for (name, engine, model, labels), value in parsed:
        if model is not None and engine not in models:
            models[engine] = model
        series = table.get((engine, name))
        if series is None:
            table[(engine, name)] = {labels: [value]}
        elif labels in series:
            series[labels].append(value)
        else:
            series[labels] = [value]
    return table, models


_BOUNDS: dict[LabelKey, float | None] = {}


def _bound(labels: LabelKey) -> float | None:
    """A bucket's ``le`` as a number (None if missing or not a number), remembered like the series keys."""
    try:
        return _BOUNDS[labels]
    except KeyError:
        le = dict(labels).get("le")
        try:
            bound = float(le) if le is not None else None
        except ValueError:
            bound = None
        if bound is not None and math.isnan(bound):
            bound = None
        if len(_BOUNDS) >= _SERIES_KEYS_MAX:
            _BOUNDS.clear()
        _BOUNDS[labels] = bound
        return bound


class _EngineView:
    """One engine's series, falling back to server-wide series (no ``engine`` label) it lacks itself."""

    def __init__(self, engine: str | None, table: SeriesTable) -> None:
        self.engine = engine
        self.table = table

    def series(self, name: str) -> dict[LabelKey, list[float]] | None:
        own = self.table.get((self.engine, name))
        if own:
            return own
        return self.table.get((None, name)) if self.engine is not None else None

    def first(self, names: tuple[str, ...]) -> tuple[str, dict[LabelKey, list[float]]] | None:
        for name in names:
            found = self.series(name)
            if found:
                return name, found
        return None


def _fmt(value: float) -> str:
    return repr(float(value))


class _Builder:
    """Turns one engine's series into an ``EngineRecord``, recording why any value was dropped."""

    def __init__(self, label: str, view: _EngineView, rejected: list[str]) -> None:
        self.label = label
        self.view = view
        self.rejected = rejected

    def reject(self, text: str) -> None:
        self.rejected.append(f"{text} (engine {self.label})")

    def folded(self, key: str, copies: list[float]) -> float | None:
        """The max over copies (pid), the non-finite ones dropped with a reason."""
        finite = [value for value in copies if math.isfinite(value)]
        for value in copies:
            if not math.isfinite(value):
                self.reject(f"{key}={_fmt(value)} not finite")
        return max(finite) if finite else None

    def checked(self, key: str, value: float | None) -> float | None:
        if value is None:
            return None
        if value < 0:
            self.reject(f"{key}={_fmt(value)} negative")
            return None
        if key == "kv_cache_usage" and value > 1:
            self.reject(f"{key}={_fmt(value)} out of range 0..1")
            return None
        return value

    def plain(self, key: str, names: tuple[str, ...]) -> float | None:
        found = self.view.first(names)
        if found is None:
            return None
        _, series = found
        # Extra labels we do not know would make several series: the largest is the conservative reading.
        values = [v for v in (self.folded(key, copies) for copies in series.values()) if v is not None]
        return self.checked(key, max(values)) if values else None

    def summed(self, key: str, name: str) -> float | None:
        series = self.view.series(name)
        if not series:
            return None
        values = [self.folded(key, copies) for copies in series.values()]
        if any(value is None for value in values):
            return None  # one reason's count unusable: a partial sum would read as a drop
        return self.checked(key, sum(v for v in values if v is not None))

    def by_label(self, key: str, name: str, label: str, wanted: str) -> float | None:
        series = self.view.series(name)
        if not series:
            return None
        values = [self.folded(key, copies) for labels, copies in series.items() if (label, wanted) in labels]
        present = [value for value in values if value is not None]
        return self.checked(key, max(present)) if present else None

    def cache_config(self, values: dict[str, float]) -> tuple[str | None, bool | None]:
        series = self.view.series(CACHE_CONFIG_INFO)
        if not series:
            return None, None
        labels = dict(next(iter(series)))
        for key, integral in (("num_gpu_blocks", True), ("block_size", True), ("gpu_memory_utilization", False)):
            raw = labels.get(key)
            if raw is None or raw in ("", "None"):
                continue  # num_gpu_blocks is "None" until the engine has profiled memory
            try:
                number = float(raw)
            except ValueError:
                self.reject(f"{key}={raw!r} not a number")
                continue
            if not math.isfinite(number) or number < 0 or (integral and not number.is_integer()):
                self.reject(f"{key}={raw} out of range")
            elif key == "gpu_memory_utilization" and number > 1:
                self.reject(f"{key}={raw} out of range 0..1")
            else:
                values[key] = number
        dtype = labels.get("cache_dtype") or None
        prefix = {"true": True, "false": False}.get((labels.get("enable_prefix_caching") or "").lower())
        return dtype, prefix

    def histogram(self, key: str, bases: tuple[str, ...]) -> Histogram | None:
        found = self.view.first(tuple(f"{base}_bucket" for base in bases))
        if found is None:
            return None
        bucket_name, bucket_series = found
        base = bucket_name[: -len("_bucket")]
        buckets: dict[float, float] = {}
        for labels, copies in bucket_series.items():
            bound = _bound(labels)
            if bound is None:
                self.reject(f"{key} bucket le={dict(labels).get('le')!r} not a bound")
                return None
            count = copies[0] if len(copies) == 1 else max(copies)
            if not all(math.isfinite(value) for value in copies):
                self.reject(f"{key} bucket le={dict(labels).get('le')} not finite")
                return None
            if count > buckets.get(bound, -math.inf):
                buckets[bound] = count
        totals: list[float] = []
        for suffix in ("_sum", "_count"):
            series = self.view.series(base + suffix)
            copies = [value for values in (series or {}).values() for value in values]
            if not copies:
                self.reject(f"{key} histogram has no {suffix[1:]}")
                return None
            if not all(math.isfinite(value) for value in copies):
                self.reject(f"{key} {suffix[1:]}={_fmt(next(v for v in copies if not math.isfinite(v)))} not finite")
                return None
            totals.append(max(copies))
        pairs = tuple(sorted(buckets.items()))
        if any(count < 0 for _, count in pairs) or totals[0] < 0 or totals[1] < 0:
            self.reject(f"{key} histogram has a negative count or sum")
            return None
        return Histogram(buckets=pairs, sum=totals[0], count=totals[1])

    def build(self, model_name: str | None) -> EngineRecord:
        values: dict[str, float] = {}

        def put(key: str, value: float | None) -> None:
            if value is not None:
                values[key] = value

        for key, names in GAUGES.items():
            put(key, self.plain(key, names))
        capacity = self.by_label("num_requests_waiting_capacity", WAITING_BY_REASON, "reason", "capacity")
        put("num_requests_waiting_capacity", capacity)
        for key, names in COUNTERS.items():
            put(key, self.plain(key, names))
        put("request_success_total", self.summed("request_success_total", REQUEST_SUCCESS))
        cache_dtype, prefix_caching = self.cache_config(values)
        histograms = {key: h for key, bases in HISTOGRAMS.items() if (h := self.histogram(key, bases)) is not None}
        return EngineRecord(
            engine=self.label,
            model_name=model_name,
            values=values,
            cache_dtype=cache_dtype,
            enable_prefix_caching=prefix_caching,
            histograms=histograms,
        )


def _engine_order(engine: str) -> tuple[int, int, str]:
    return (0, int(engine), "") if engine.isdigit() else (1, 0, engine)


def parse_vllm_metrics(text: str) -> tuple[tuple[EngineRecord, ...], tuple[str, ...], int]:
    """(one record per engine, reasons for rejected values, samples in the body) from a ``/metrics`` body.

    Raises ``ScrapeError(retryable=False)`` when the body is not the Prometheus text format or holds no vLLM
    series (an empty page, or the wrong port)."""
    quick, selected, sample_count, vllm_count = _scan(text)
    table, models = _table(quick if quick is not None else _parse_all(selected))
    if sample_count == 0:
        raise ScrapeError("empty body: no samples", retryable=False)
    if vllm_count == 0:
        raise ScrapeError(f"no vllm metrics in {sample_count} samples", retryable=False)
    labelled = sorted({engine for engine, _ in table if engine is not None}, key=_engine_order)
    engines: list[str | None] = [*labelled] or [None]
    rejected: list[str] = []
    records = []
    for engine in engines:
        label = "0" if engine is None else engine  # V0 has no engine label: one engine, index 0
        builder = _Builder(label, _EngineView(engine, table), rejected)
        records.append(builder.build(models.get(engine) or models.get(None)))
    return tuple(records), tuple(rejected), sample_count


def metrics_url(url: str) -> str:
    """The ``/metrics`` URL for a server's base URL; a URL already ending in ``/metrics`` is kept."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    if not path.endswith("/metrics"):
        path += "/metrics"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _causes(error: BaseException) -> Iterator[BaseException]:
    """The error and what it wraps: requests nests urllib3's errors in args, ``reason`` and ``__context__``."""
    seen: set[int] = set()
    stack = [error]
    while stack:
        current = stack.pop()
        if id(current) in seen or len(seen) > 20:
            continue
        seen.add(id(current))
        yield current
        nested = [current.__cause__, current.__context__, getattr(current, "reason", None), *current.args]
        stack.extend(item for item in nested if isinstance(item, BaseException))


def _connection_error(error: requests.RequestException, timeout: float) -> ScrapeError:
    causes = list(_causes(error))
    # Refused first: urllib3's NewConnectionError subclasses its ConnectTimeoutError.
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return ScrapeError("connection refused", retryable=True)
    if isinstance(error, requests.Timeout) or any(isinstance(c, TimeoutError | ReadTimeoutError) for c in causes):
        return ScrapeError(f"timeout after {timeout} s", retryable=True)
    if any(isinstance(c, socket.gaierror) for c in causes):
        return ScrapeError("cannot resolve host", retryable=True)
    if any(isinstance(c, ConnectionResetError) for c in causes):
        return ScrapeError("connection reset", retryable=True)
    return ScrapeError(f"connection error: {type(error).__name__}", retryable=True)


class VllmScraper:
    """Scrapes vLLM servers' ``/metrics`` with one HTTP session (keep-alive across scrapes)."""

    def __init__(
        self, *, timeout: float = 5.0, session: requests.Session | None = None, max_body_bytes: int = MAX_BODY_BYTES
    ) -> None:
        timeout = float(timeout)
        if not (math.isfinite(timeout) and timeout > 0):
            raise ValueError("timeout must be a positive number of seconds")
        self.timeout = timeout
        self.session = session if session is not None else requests.Session()
        self.max_body_bytes = max_body_bytes

    def scrape(self, url: str) -> ScrapeResult:
        """Never raises for the target's failures: they come back as ``up=False`` with a short ``error``."""
        scraped_at = time.time()
        started = time.perf_counter()
        try:
            text = self.fetch(url)
            engines, rejected, series_count = parse_vllm_metrics(text)
        except ScrapeError as error:
            return ScrapeResult(
                url=url,
                up=False,
                error=str(error),
                duration_ms=(time.perf_counter() - started) * 1000,
                scraped_at=scraped_at,
                engines=(),
                rejected=(),
                series_count=0,
            )
        return ScrapeResult(
            url=url,
            up=True,
            error=None,
            duration_ms=(time.perf_counter() - started) * 1000,
            scraped_at=scraped_at,
            engines=engines,
            rejected=rejected,
            series_count=series_count,
        )

    def fetch(self, url: str) -> str:
        """The ``/metrics`` body as text; raises ``ScrapeError``."""
        try:
            target = metrics_url(url)
        except ValueError:  # urlsplit on a malformed address ("http://[::1")
            raise ScrapeError(f"invalid URL: {url!r}", retryable=False) from None
        if urlsplit(target).scheme not in ("http", "https"):
            raise ScrapeError(f"invalid URL: {url!r} is not http(s)", retryable=False)
        deadline = time.monotonic() + self.timeout
        headers = {
            "Accept": ACCEPT,
            # The agent scrapes servers on its own node: compression would cost CPU on both ends for nothing,
            # and an uncompressed body is what the size cap measures.
            "Accept-Encoding": "identity",
        }
        try:
            response = self.session.get(target, headers=headers, timeout=self.timeout, stream=True)
        except (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema, requests.exceptions.InvalidSchema):
            raise ScrapeError(f"invalid URL: {url!r}", retryable=False) from None
        except requests.TooManyRedirects:
            raise ScrapeError("too many redirects", retryable=False) from None
        except requests.RequestException as error:
            raise _connection_error(error, self.timeout) from None
        with response:
            if response.status_code != 200:
                # 5xx and 429 are the server's passing trouble; other codes mean the wrong URL.
                retryable = response.status_code >= 500 or response.status_code == 429
                raise ScrapeError(f"HTTP {response.status_code}", retryable=retryable)
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > self.max_body_bytes:
                raise ScrapeError(f"body larger than {self.max_body_bytes} bytes", retryable=False)
            chunks: list[bytes] = []
            size = 0
            try:
                for chunk in response.iter_content(CHUNK_BYTES):
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        raise ScrapeError(f"body larger than {self.max_body_bytes} bytes", retryable=False)
                    # requests' timeout is per socket read: a server dripping bytes would never trip it.
                    if time.monotonic() > deadline:
                        raise ScrapeError(f"timeout after {self.timeout} s", retryable=True)
                    chunks.append(chunk)
            except requests.RequestException as error:
                raise _connection_error(error, self.timeout) from None
        try:
            return b"".join(chunks).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ScrapeError(f"parse error: body is not UTF-8 ({error.reason})", retryable=False) from None
