"""Monitor data: GPU nodes and their agents' keys, the vLLM endpoints they scrape, GPUs, and samples.

Samples are sized for 10,000 GPUs at a 10 s interval (docs/monitor.md works out the figures): one wide row
per engine per scrape, typed columns, time-partitioned by day on PostgreSQL (migration 0002) so retention
drops whole partitions. A scrape that failed stores no row: a gap is never a zero.
"""

from __future__ import annotations

from django.db import models

from monitor.validators import validate_endpoint_url
from planner.models import Scenario


class Node(models.Model):
    """A GPU host running one agent (a Celery worker on queue ``agent.<name>``)."""

    name = models.SlugField(max_length=63, unique=True)
    hostname = models.CharField(max_length=255, blank=True)
    agent_version = models.CharField(max_length=64, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    nvml_available = models.BooleanField(null=True, blank=True)
    nvml_error = models.CharField(max_length=500, blank=True)
    driver_version = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def queue(self) -> str:
        return agent_queue(self.name)


def agent_queue(node_name: str) -> str:
    return f"agent.{node_name}"


class NodeKey(models.Model):
    """A signing key of one node's agent. Several may be active while a key is rotated; revoked ones
    verify nothing. The secret is a shared HMAC key, so it is kept (the agent holds the same bytes)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="keys")
    key_id = models.CharField(max_length=32, unique=True)
    secret = models.CharField(max_length=128)
    created = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        # Never the secret: keys appear in admin lists and logs.
        return f"{self.node.name}/{self.key_id}"


class Endpoint(models.Model):
    """One vLLM server (its base URL) on a node, and the scenario that planned it. The latest scrape's
    health is kept on the row so the overview reads one table."""

    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="endpoints")
    url = models.CharField(max_length=500, validators=[validate_endpoint_url])
    name = models.CharField(max_length=200, blank=True)
    scenario = models.ForeignKey(Scenario, null=True, blank=True, on_delete=models.SET_NULL, related_name="endpoints")
    enabled = models.BooleanField(default=True)
    gpu_indices = models.JSONField(
        default=list, blank=True, help_text="The node's GPU indices this server uses; empty means all of them."
    )
    created = models.DateTimeField(auto_now_add=True)

    # Scrape health of the latest attempt (Prometheus' up, scrape_duration_seconds, the error).
    up = models.BooleanField(null=True, blank=True)
    last_scrape_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_duration_ms = models.FloatField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    latest = models.JSONField(default=dict, blank=True, help_text="Latest values per engine, as scraped.")
    rejected_total = models.PositiveBigIntegerField(default=0)
    last_rejected = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [models.UniqueConstraint(fields=["node", "url"], name="endpoint_node_url_unique")]

    def __str__(self) -> str:
        return self.display_name

    @property
    def display_name(self) -> str:
        return self.name or self.url


class Gpu(models.Model):
    """A GPU as NVML reported it when the node's agent registered."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField()
    uuid = models.CharField(max_length=96)
    name = models.CharField(max_length=200)
    memory_total_bytes = models.BigIntegerField()
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="gpu_node_index_unique")]

    def __str__(self) -> str:
        return f"{self.node.name}:{self.index} {self.name}"


class IngestDrop(models.Model):
    """Counts of what ingest refused, by node and reason (bad signature, another node's endpoint, ...)."""

    node_name = models.CharField(max_length=63)
    reason = models.CharField(max_length=64)
    count = models.PositiveBigIntegerField(default=0)
    last_at = models.DateTimeField()
    last_detail = models.CharField(max_length=500, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node_name", "reason"], name="ingestdrop_node_reason_unique")]

    def __str__(self) -> str:
        return f"{self.node_name}: {self.reason} x{self.count}"


# The wide sample row's value columns, in the order COPY writes them. Counters are cumulative, as exposed.
ENGINE_SAMPLE_VALUES: tuple[str, ...] = (
    "kv_cache_usage",
    "num_requests_running",
    "num_requests_waiting",
    "num_preemptions_total",
    "prefix_cache_hits_total",
    "prefix_cache_queries_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "request_success_total",
    "num_gpu_blocks",
    "block_size",
    "ttft_sum",
    "ttft_count",
    "itl_sum",
    "itl_count",
    "e2e_sum",
    "e2e_count",
)


class EngineSample(models.Model):
    """One engine's values at one scrape. Primary key (endpoint, engine, time): a batch delivered twice
    writes nothing twice. Partitioned by day on PostgreSQL; the key's order serves the chart query
    (one endpoint, a time range)."""

    pk = models.CompositePrimaryKey("endpoint_id", "engine", "time")
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    engine = models.SmallIntegerField()
    time = models.DateTimeField()
    kv_cache_usage = models.FloatField(null=True)
    num_requests_running = models.IntegerField(null=True)
    num_requests_waiting = models.IntegerField(null=True)
    num_preemptions_total = models.BigIntegerField(null=True)
    prefix_cache_hits_total = models.BigIntegerField(null=True)
    prefix_cache_queries_total = models.BigIntegerField(null=True)
    prompt_tokens_total = models.BigIntegerField(null=True)
    generation_tokens_total = models.BigIntegerField(null=True)
    request_success_total = models.BigIntegerField(null=True)
    num_gpu_blocks = models.IntegerField(null=True)
    block_size = models.IntegerField(null=True)
    ttft_sum = models.FloatField(null=True)
    ttft_count = models.BigIntegerField(null=True)
    itl_sum = models.FloatField(null=True)
    itl_count = models.BigIntegerField(null=True)
    e2e_sum = models.FloatField(null=True)
    e2e_count = models.BigIntegerField(null=True)

    def __str__(self) -> str:
        return f"endpoint {self.endpoint_id} engine {self.engine} @ {self.time:%Y-%m-%d %H:%M:%S}"


class HistogramSample(models.Model):
    """Cumulative latency buckets of one engine, sent by the agent at most once a minute (docs/monitor.md:
    buckets on every 10 s row would triple the raw table). Quantiles over a window come from two rows'
    difference."""

    pk = models.CompositePrimaryKey("endpoint_id", "engine", "name", "time")
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    engine = models.SmallIntegerField()
    name = models.CharField(max_length=8)  # ttft, itl, e2e
    time = models.DateTimeField()
    bounds = models.JSONField()
    counts = models.JSONField()

    def __str__(self) -> str:
        return f"{self.name} endpoint {self.endpoint_id} engine {self.engine} @ {self.time:%Y-%m-%d %H:%M}"


class GpuSample(models.Model):
    """One GPU's memory and utilisation at one scrape (NVML). Partitioned by day on PostgreSQL."""

    pk = models.CompositePrimaryKey("gpu_id", "time")
    gpu = models.ForeignKey(Gpu, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+")
    time = models.DateTimeField()
    memory_used_bytes = models.BigIntegerField()
    memory_reserved_bytes = models.BigIntegerField(null=True)
    utilization_gpu_pct = models.FloatField(null=True)
    utilization_memory_pct = models.FloatField(null=True)

    def __str__(self) -> str:
        return f"gpu {self.gpu_id} @ {self.time:%Y-%m-%d %H:%M:%S}"


class EngineRollup(models.Model):
    """Per-engine aggregates over a minute (resolution 60) or an hour (3600), for long chart ranges.
    Gauges keep mean and max; counters keep the increase within the bucket, resets handled as Prometheus'
    increase() does."""

    pk = models.CompositePrimaryKey("resolution", "endpoint_id", "engine", "time")
    resolution = models.IntegerField()
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    engine = models.SmallIntegerField()
    time = models.DateTimeField()
    samples = models.IntegerField()
    kv_cache_usage_avg = models.FloatField(null=True)
    kv_cache_usage_max = models.FloatField(null=True)
    num_requests_running_avg = models.FloatField(null=True)
    num_requests_running_max = models.IntegerField(null=True)
    num_requests_waiting_avg = models.FloatField(null=True)
    num_requests_waiting_max = models.IntegerField(null=True)
    num_gpu_blocks = models.IntegerField(null=True)
    block_size = models.IntegerField(null=True)
    preemptions_inc = models.FloatField(null=True)
    prefix_cache_hits_inc = models.FloatField(null=True)
    prefix_cache_queries_inc = models.FloatField(null=True)
    prompt_tokens_inc = models.FloatField(null=True)
    generation_tokens_inc = models.FloatField(null=True)
    ttft_sum_inc = models.FloatField(null=True)
    ttft_count_inc = models.FloatField(null=True)
    itl_sum_inc = models.FloatField(null=True)
    itl_count_inc = models.FloatField(null=True)
    covered_seconds = models.FloatField(null=True)

    def __str__(self) -> str:
        return f"{self.resolution}s endpoint {self.endpoint_id} engine {self.engine} @ {self.time:%Y-%m-%d %H:%M}"


class GpuRollup(models.Model):
    """Per-GPU memory aggregates over a minute or an hour."""

    pk = models.CompositePrimaryKey("resolution", "gpu_id", "time")
    resolution = models.IntegerField()
    gpu = models.ForeignKey(Gpu, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+")
    time = models.DateTimeField()
    samples = models.IntegerField()
    memory_used_bytes_avg = models.FloatField()
    memory_used_bytes_max = models.BigIntegerField()
    utilization_gpu_pct_avg = models.FloatField(null=True)

    def __str__(self) -> str:
        return f"{self.resolution}s gpu {self.gpu_id} @ {self.time:%Y-%m-%d %H:%M}"
