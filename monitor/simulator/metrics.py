"""The simulator's ``/metrics``: vLLM's metric families built with prometheus_client from engine snapshots.

V1 names and help texts follow ``vllm/v1/metrics/loggers.py`` (labels ``model_name`` and ``engine``, the
data-parallel index; counters and histograms carry ``_created`` like any single-process
prometheus_client). The legacy mode speaks the V0 dialect of ``vllm/engine/metrics.py`` and the early V1
releases: ``gpu_cache_usage_perc``, ``num_requests_swapped``, ``gpu_prefix_cache_*``,
``time_per_output_token_seconds``, no ``engine`` label and no ``_created`` samples (V0 and multi-process
mode never exported them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from .stats import FINISH_REASONS, EngineStats, HistogramSnapshot


@dataclass(frozen=True)
class EngineSnapshot:
    """One engine's numbers at one instant, copied under the server's lock so a scrape never sees a
    half-finished step."""

    engine_index: int
    created: float
    num_running: int
    num_waiting: int
    kv_cache_usage: float
    prompt_tokens: int
    generation_tokens: int
    preemptions: int
    prefix_cache_queries: int
    prefix_cache_hits: int
    request_success: dict[str, int]
    histograms: dict[str, HistogramSnapshot]


def engine_snapshot(
    *, engine_index: int, stats: EngineStats, num_running: int, num_waiting: int, usage: float
) -> EngineSnapshot:
    return EngineSnapshot(
        engine_index=engine_index,
        created=stats.created,
        num_running=num_running,
        num_waiting=num_waiting,
        kv_cache_usage=usage,
        prompt_tokens=stats.prompt_tokens,
        generation_tokens=stats.generation_tokens,
        preemptions=stats.preemptions,
        prefix_cache_queries=stats.prefix_cache_queries,
        prefix_cache_hits=stats.prefix_cache_hits,
        request_success=dict(stats.request_success),
        histograms={
            "time_to_first_token": stats.time_to_first_token.snapshot(),
            "inter_token_latency": stats.inter_token_latency.snapshot(),
            "e2e_request_latency": stats.e2e_request_latency.snapshot(),
            "request_queue_time": stats.request_queue_time.snapshot(),
            "request_prompt_tokens": stats.request_prompt_tokens.snapshot(),
            "request_generation_tokens": stats.request_generation_tokens.snapshot(),
        },
    )


# (exposed histogram name, snapshot key, help) per dialect.
_V1_HISTOGRAMS = (
    ("vllm:time_to_first_token_seconds", "time_to_first_token", "Histogram of time to first token in seconds."),
    ("vllm:inter_token_latency_seconds", "inter_token_latency", "Histogram of inter-token latency in seconds."),
    ("vllm:e2e_request_latency_seconds", "e2e_request_latency", "Histogram of e2e request latency in seconds."),
    (
        "vllm:request_queue_time_seconds",
        "request_queue_time",
        "Histogram of time spent in WAITING phase for request.",
    ),
    ("vllm:request_prompt_tokens", "request_prompt_tokens", "Number of prefill tokens processed."),
    ("vllm:request_generation_tokens", "request_generation_tokens", "Number of generation tokens processed."),
)
_V0_HISTOGRAMS = tuple(
    ("vllm:time_per_output_token_seconds", key, "Histogram of time per output token in seconds.")
    if key == "inter_token_latency"
    else (name, key, help_text)
    for name, key, help_text in _V1_HISTOGRAMS
)

# Every name either dialect exports (family names as the text parser reports them: counters without _total).
V1_FAMILY_NAMES = frozenset(
    {
        "vllm:cache_config_info",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions",
        "vllm:prefix_cache_queries",
        "vllm:prefix_cache_hits",
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:request_success",
        *(name for name, _, _ in _V1_HISTOGRAMS),
    }
)
V0_FAMILY_NAMES = frozenset(
    {
        "vllm:cache_config_info",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:num_requests_swapped",
        "vllm:gpu_cache_usage_perc",
        "vllm:num_preemptions",
        "vllm:gpu_prefix_cache_queries",
        "vllm:gpu_prefix_cache_hits",
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:request_success",
        *(name for name, _, _ in _V0_HISTOGRAMS),
    }
)


def _bucket_pairs(snapshot: HistogramSnapshot) -> list[tuple[str, float]]:
    # Bounds spelled as prometheus_client's own Histogram spells them ("1.0", "0.005", "+Inf").
    pairs = [
        (floatToGoString(bound), float(count))
        for bound, count in zip(snapshot.bounds, snapshot.cumulative, strict=False)
    ]
    pairs.append(("+Inf", float(snapshot.cumulative[-1])))
    return pairs


class VllmCollector(Collector):
    """Reads engine snapshots at scrape time (a custom collector, so ``_created`` can be the engine's own
    start and vanish in legacy mode, which prometheus_client's global switch could not do per server)."""

    def __init__(
        self,
        snapshots: Callable[[], Sequence[EngineSnapshot]],
        *,
        model_name: str,
        cache_config: dict[str, str],
        legacy: bool = False,
    ) -> None:
        self.snapshots = snapshots
        self.model_name = model_name
        self.cache_config = dict(cache_config)
        self.legacy = legacy

    def collect(self) -> Iterable[Metric]:
        snapshots = list(self.snapshots())
        legacy = self.legacy
        base_names = ["model_name"] if legacy else ["model_name", "engine"]

        def labels(snapshot: EngineSnapshot) -> list[str]:
            return [self.model_name] if legacy else [self.model_name, str(snapshot.engine_index)]

        def created(snapshot: EngineSnapshot) -> float | None:
            return None if legacy else snapshot.created

        def gauge(name: str, help_text: str, value: Callable[[EngineSnapshot], float]) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, help_text, labels=base_names)
            for snapshot in snapshots:
                family.add_metric(labels(snapshot), value(snapshot))
            return family

        def counter(name: str, help_text: str, value: Callable[[EngineSnapshot], float]) -> CounterMetricFamily:
            family = CounterMetricFamily(name, help_text, labels=base_names)
            for snapshot in snapshots:
                family.add_metric(labels(snapshot), value(snapshot), created=created(snapshot))
            return family

        # Every CacheConfig field is a label; V1 adds the engine index.
        info_names = sorted(self.cache_config) + ([] if legacy else ["engine"])
        info = GaugeMetricFamily(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=info_names
        )
        for snapshot in snapshots:
            values = [self.cache_config[name] for name in sorted(self.cache_config)]
            info.add_metric(values + ([] if legacy else [str(snapshot.engine_index)]), 1.0)
        yield info

        yield gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.", lambda s: s.num_running
        )
        yield gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", lambda s: s.num_waiting)
        if legacy:
            yield gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.", lambda s: 0)
            usage_help = "GPU KV-cache usage. 1 means 100 percent usage."
            yield gauge("vllm:gpu_cache_usage_perc", usage_help, lambda s: s.kv_cache_usage)
        else:
            yield gauge(
                "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", lambda s: s.kv_cache_usage
            )

        yield counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine.", lambda s: s.preemptions
        )
        prefix = "vllm:gpu_prefix_cache" if legacy else "vllm:prefix_cache"
        yield counter(
            f"{prefix}_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            lambda s: s.prefix_cache_queries,
        )
        yield counter(
            f"{prefix}_hits", "Prefix cache hits, in terms of number of cached tokens.", lambda s: s.prefix_cache_hits
        )
        yield counter("vllm:prompt_tokens", "Number of prefill tokens processed.", lambda s: s.prompt_tokens)
        yield counter("vllm:generation_tokens", "Number of generation tokens processed.", lambda s: s.generation_tokens)

        success = CounterMetricFamily(
            "vllm:request_success", "Count of successfully processed requests.", labels=[*base_names, "finished_reason"]
        )
        for snapshot in snapshots:
            for reason in FINISH_REASONS:
                success.add_metric(
                    [*labels(snapshot), reason], snapshot.request_success.get(reason, 0), created=created(snapshot)
                )
        yield success

        for name, key, help_text in _V0_HISTOGRAMS if legacy else _V1_HISTOGRAMS:
            family = HistogramMetricFamily(name, help_text, labels=base_names)
            for snapshot in snapshots:
                histogram = snapshot.histograms[key]
                family.add_metric(labels(snapshot), _bucket_pairs(histogram), histogram.sum)
                stamp = created(snapshot)
                if stamp is not None:
                    # HistogramMetricFamily has no created argument; prometheus_client's own Histogram adds
                    # the sample the same way.
                    family.add_sample(f"{name}_created", dict(zip(base_names, labels(snapshot), strict=True)), stamp)
            yield family


def metrics_registry(collector: VllmCollector) -> CollectorRegistry:
    """A registry of its own per server: several simulated servers share one process."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
