"""Central ingest: signed batches stored once, refusals counted by reason, health kept fresh."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.db import connection
from monitor_factories import T0, endpoint_entry, endpoint_on, engine_values, node_with_key, payload, sealed

from monitor.ingest import ingest_signed
from monitor.models import Endpoint, EngineSample, GpuSample, HistogramSample, IngestDrop, Node
from monitor.services import node_keys_revoke

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_nodes(frozen_now):
    node_a, key_a = node_with_key("gpu-a")
    node_b, key_b = node_with_key("gpu-b")
    return {
        "a": (node_a, key_a, endpoint_on("gpu-a", 9001)),
        "b": (node_b, key_b, endpoint_on("gpu-b", 9002)),
    }


def drops(node: str) -> dict[str, int]:
    return dict(IngestDrop.objects.filter(node_name=node).values_list("reason", "count"))


def test_a_signed_batch_is_stored_as_one_wide_row_per_engine(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    engines = [engine_values("0"), engine_values("1", kv_cache_usage=0.75, num_requests_waiting=4)]
    outcome = ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0, engines=engines)]), key))

    assert outcome.refused is None and outcome.dropped == {}
    rows = list(
        EngineSample.objects.order_by("engine").values("engine", "time", "kv_cache_usage", "num_requests_waiting")
    )
    at = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    assert rows == [
        {"engine": 0, "time": at, "kv_cache_usage": 0.25, "num_requests_waiting": 0},
        {"engine": 1, "time": at, "kv_cache_usage": 0.75, "num_requests_waiting": 4},
    ]
    sample = EngineSample.objects.get(engine=0)
    assert (sample.num_gpu_blocks, sample.block_size, sample.ttft_sum, sample.itl_count) == (1000, 16, 1.5, 100)
    endpoint.refresh_from_db()
    assert endpoint.up is True and endpoint.last_error == "" and endpoint.last_scrape_at == at
    assert endpoint.latest["1"]["kv_cache_usage"] == 0.75
    assert Node.objects.get(name="gpu-a").agent_version == "kvdash-agent/test"


def test_the_same_batch_delivered_twice_writes_nothing_twice(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    batch = sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0), endpoint_entry(endpoint.pk, T0 + 10)]), key)
    ingest_signed(**batch)
    ingest_signed(**batch)
    assert EngineSample.objects.count() == 2


def test_a_failed_scrape_records_down_and_stores_no_row(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0)]), key))
    for offset in (10, 20, 30):
        ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0 + offset, up=False)]), key))

    endpoint.refresh_from_db()
    assert endpoint.up is False
    assert endpoint.last_error == "connection refused"
    assert endpoint.consecutive_failures == 3
    assert endpoint.last_success_at == dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    # The gap is the absence of rows: only the one good scrape is stored.
    assert EngineSample.objects.count() == 1
    assert endpoint.latest["0"]["kv_cache_usage"] == 0.25


def test_a_late_batch_does_not_undo_fresher_health(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0 + 20)]), key))
    ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0 + 10, up=False)]), key))
    endpoint.refresh_from_db()
    assert endpoint.up is True and endpoint.consecutive_failures == 0


def test_a_key_cannot_write_another_nodes_endpoint(two_nodes):
    _node_a, key_a, endpoint_a = two_nodes["a"]
    _node_b, _key_b, endpoint_b = two_nodes["b"]
    entries = [endpoint_entry(endpoint_a.pk, T0), endpoint_entry(endpoint_b.pk, T0)]
    outcome = ingest_signed(**sealed(payload("gpu-a", entries), key_a))

    assert outcome.dropped == {"foreign_endpoint": 1}
    assert list(EngineSample.objects.values_list("endpoint_id", flat=True)) == [endpoint_a.pk]
    assert drops("gpu-a") == {"foreign_endpoint": 1}
    assert Endpoint.objects.get(pk=endpoint_b.pk).up is None


def test_a_payload_naming_another_node_is_refused_whole(two_nodes):
    _node_a, key_a, _endpoint_a = two_nodes["a"]
    _node_b, _key_b, endpoint_b = two_nodes["b"]
    outcome = ingest_signed(**sealed(payload("gpu-b", [endpoint_entry(endpoint_b.pk, T0)]), key_a))
    assert outcome.refused == "wrong_node"
    assert EngineSample.objects.count() == 0
    assert drops("gpu-a") == {"wrong_node": 1}


def test_a_forged_signature_is_refused_and_counted(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    batch = sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0)]), key)
    batch["body"] = batch["body"].replace("0.25", "0.99")
    assert ingest_signed(**batch).refused == "bad_signature"
    batch = sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0)]), key)
    batch["signature"] = "0" * 64
    assert ingest_signed(**batch).refused == "bad_signature"
    assert EngineSample.objects.count() == 0
    assert drops("gpu-a") == {"bad_signature": 2}


def test_revoked_and_unknown_keys_verify_nothing(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    batch = sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0)]), key)
    node_keys_revoke(name="gpu-a")
    assert ingest_signed(**batch).refused == "unknown_key"
    assert ingest_signed(**{**batch, "key_id": "feedfacefeedface"}).refused == "unknown_key"
    assert EngineSample.objects.count() == 0
    assert drops("?") == {"unknown_key": 2}


@pytest.mark.parametrize(
    ("field", "value"),
    [("kv_cache_usage", 1.7), ("kv_cache_usage", -0.1), ("num_requests_running", -3), ("prompt_tokens_total", "7")],
)
def test_out_of_range_values_are_dropped_with_a_reason_and_the_row_kept(two_nodes, field, value):
    _node, key, endpoint = two_nodes["a"]
    engines = [engine_values(**{field: value})]
    outcome = ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0, engines=engines)]), key))
    assert outcome.dropped == {"bad_value": 1}
    sample = EngineSample.objects.get()
    assert getattr(sample, field) is None
    assert sample.num_gpu_blocks == 1000


def test_nan_in_a_body_is_refused_as_malformed(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    text = json.dumps(payload("gpu-a", [endpoint_entry(endpoint.pk, T0)])).replace("0.25", "NaN")
    from monitor.signing import payload_sign

    outcome = ingest_signed(body=text, key_id=key.key_id, signature=payload_sign(body=text, secret=key.secret))
    assert outcome.refused == "malformed"
    assert EngineSample.objects.count() == 0


def test_a_sample_stamped_days_away_from_the_clock_is_dropped(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    outcome = ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0 + 5 * 86400)]), key))
    assert outcome.dropped == {"bad_time": 1}
    assert EngineSample.objects.count() == 0


def test_nvml_readings_register_gpus_and_store_memory(two_nodes):
    _node, key, _endpoint = two_nodes["a"]
    nvml = {
        "available": True,
        "error": None,
        "driver_version": "580.65.06",
        "taken_at": T0,
        "gpus": [
            {
                "index": 0,
                "uuid": "GPU-11111111-2222-3333-4444-555555555555",
                "name": "NVIDIA H200",
                "memory_total_bytes": 150_754_820_096,
                "memory_used_bytes": 135_000_000_000,
                "memory_free_bytes": 15_000_000_000,
                "memory_reserved_bytes": 754_820_096,
                "utilization_gpu_pct": 87,
                "processes": [{"pid": 4242, "used_memory_bytes": 134_000_000_000}],
            }
        ],
    }
    ingest_signed(**sealed(payload("gpu-a", [], nvml=nvml), key))
    node = Node.objects.get(name="gpu-a")
    assert (node.nvml_available, node.driver_version) == (True, "580.65.06")
    gpu = node.gpus.get()
    assert (gpu.index, gpu.name, gpu.memory_total_bytes) == (0, "NVIDIA H200", 150_754_820_096)
    sample = GpuSample.objects.get()
    assert (sample.memory_used_bytes, sample.memory_reserved_bytes, sample.utilization_gpu_pct) == (
        135_000_000_000,
        754_820_096,
        87.0,
    )


def test_nvml_unavailable_is_recorded_on_the_node_and_the_vllm_part_goes_on(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    nvml = {"available": False, "error": "NVML unavailable: NVML Shared Library Not Found", "gpus": []}
    ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0)], nvml=nvml), key))
    node = Node.objects.get(name="gpu-a")
    assert node.nvml_available is False
    assert node.nvml_error == "NVML unavailable: NVML Shared Library Not Found"
    assert EngineSample.objects.count() == 1


def test_histograms_are_stored_once_a_minute_with_their_bounds(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    histograms = {"ttft": {"bounds": [0.1, 0.5, None], "counts": [1, 3, 4]}}
    engines = [engine_values(histograms=histograms)]
    ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0, engines=engines)]), key))
    row = HistogramSample.objects.get()
    assert (row.name, row.bounds, row.counts) == ("ttft", [0.1, 0.5, None], [1, 3, 4])


def test_a_histogram_with_mismatched_lengths_is_dropped(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    engines = [engine_values(histograms={"ttft": {"bounds": [0.1, None], "counts": [1, 2, 3]}})]
    outcome = ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0, engines=engines)]), key))
    assert outcome.dropped == {"bad_histogram": 1}
    assert HistogramSample.objects.count() == 0 and EngineSample.objects.count() == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="partitions exist on PostgreSQL only")
def test_samples_land_in_the_day_partition_created_on_demand(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0 - 60)]), key))
    ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0 + 60)]), key))
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text, count(*) FROM monitor_enginesample GROUP BY 1 ORDER BY 1")
        assert cursor.fetchall() == [("monitor_enginesample_p20261130", 1), ("monitor_enginesample_p20261201", 1)]


def test_several_scrapes_of_one_endpoint_in_a_batch_apply_in_time_order(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    entries = [
        endpoint_entry(endpoint.pk, T0 + 20, up=False),
        endpoint_entry(endpoint.pk, T0),
        endpoint_entry(endpoint.pk, T0 + 10, up=False),
    ]
    ingest_signed(**sealed(payload("gpu-a", entries), key))
    endpoint.refresh_from_db()
    # Up at T0, then down twice: two failures in a row since the last success.
    assert (endpoint.up, endpoint.consecutive_failures) == (False, 2)
    assert endpoint.last_success_at == dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    assert endpoint.last_scrape_at == dt.datetime(2026, 12, 1, 0, 0, 20, tzinfo=dt.UTC)


def test_a_swapped_gpu_is_registered_again_under_its_index(two_nodes):
    _node, key, _endpoint = two_nodes["a"]

    def nvml(uuid: str, at: float) -> dict:
        gpu = {"index": 0, "uuid": uuid, "name": "NVIDIA H200", "memory_total_bytes": 150_754_820_096}
        return {"available": True, "taken_at": at, "gpus": [{**gpu, "memory_used_bytes": 1_000}]}

    ingest_signed(**sealed(payload("gpu-a", [], nvml=nvml("GPU-old", T0)), key))
    ingest_signed(**sealed(payload("gpu-a", [], nvml=nvml("GPU-new", T0 + 10)), key))
    node = Node.objects.get(name="gpu-a")
    assert list(node.gpus.values_list("index", "uuid")) == [(0, "GPU-new")]
    assert GpuSample.objects.count() == 2


def test_integer_and_float_readings_mix_within_a_batch_and_store_as_their_columns(two_nodes):
    # One batch's column goes to PostgreSQL as one typed array: an int where the column is float (and a float
    # where it is an integer) must be stored as the column's type, not refused.
    _node, key, endpoint = two_nodes["a"]
    engines = [engine_values("0", kv_cache_usage=1), engine_values("1", kv_cache_usage=0.5)]
    nvml = {
        "available": True,
        "taken_at": T0,
        "gpus": [
            {"index": 0, "uuid": "GPU-0", "name": "NVIDIA H200", "memory_total_bytes": 150_754_820_096,
             "memory_used_bytes": 1_000, "memory_reserved_bytes": 754_820_096.0, "utilization_gpu_pct": 87},
            {"index": 1, "uuid": "GPU-1", "name": "NVIDIA H200", "memory_total_bytes": 150_754_820_096,
             "memory_used_bytes": 2_000, "utilization_gpu_pct": 12.5},
        ],
    }  # fmt: skip
    outcome = ingest_signed(
        **sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0, engines=engines)], nvml=nvml), key)
    )

    assert outcome.dropped == {}
    assert list(EngineSample.objects.order_by("engine").values_list("kv_cache_usage", flat=True)) == [1.0, 0.5]
    gpus = list(
        GpuSample.objects.order_by("memory_used_bytes").values_list("memory_reserved_bytes", "utilization_gpu_pct")
    )
    assert gpus == [(754_820_096, 87.0), (None, 12.5)]


def test_texts_with_quotes_backslashes_and_non_ascii_round_trip(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    name = 'org/mödel "quoted" \\ back{slash},'
    engines = [engine_values(model_name=name)]
    entry = endpoint_entry(endpoint.pk, T0, engines=engines, rejected=['bad "value" for {x}'])
    ingest_signed(**sealed(payload("gpu-a", [entry]), key))
    endpoint.refresh_from_db()
    assert endpoint.latest["0"]["model_name"] == name
    assert (endpoint.rejected_total, endpoint.last_rejected) == (1, 'bad "value" for {x}')


def test_a_batch_without_an_nvml_report_keeps_the_nodes_nvml_state(two_nodes):
    _node, key, endpoint = two_nodes["a"]
    nvml = {"available": True, "driver_version": "580.65.06", "taken_at": T0, "gpus": []}
    ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0)], nvml=nvml), key))
    ingest_signed(**sealed(payload("gpu-a", [endpoint_entry(endpoint.pk, T0 + 10)]), key))
    node = Node.objects.get(name="gpu-a")
    assert (node.nvml_available, node.nvml_error, node.driver_version) == (True, "", "580.65.06")
    assert node.last_heartbeat_at is not None and EngineSample.objects.count() == 2


def test_a_batch_of_many_endpoints_and_histograms_is_stored_whole(two_nodes):
    _node, key, _endpoint = two_nodes["a"]
    endpoints = [endpoint_on("gpu-a", 9100 + i) for i in range(8)]
    histograms = {
        "ttft": {"bounds": [0.1, None], "counts": [1, 2]},
        "itl": {"bounds": [0.01, 0.1, None], "counts": [5, 6, 7]},
    }
    entries = [
        endpoint_entry(e.pk, T0, engines=[engine_values(histograms=histograms), engine_values("1")]) for e in endpoints
    ]
    outcome = ingest_signed(**sealed(payload("gpu-a", entries), key))

    assert (outcome.engine_rows, outcome.histogram_rows, outcome.endpoints) == (16, 16, 8)
    assert EngineSample.objects.count() == 16 and HistogramSample.objects.count() == 16
    assert sorted(HistogramSample.objects.filter(name="itl").values_list("counts", flat=True))[0] == [5, 6, 7]
    assert Endpoint.objects.filter(pk__in=[e.pk for e in endpoints], up=True).count() == 8
