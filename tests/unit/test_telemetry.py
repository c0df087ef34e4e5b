"""What operators read: the Prometheus text of /metrics, JSON log lines, and whether traces leave the process."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from types import SimpleNamespace
from typing import Any

from aiohttp import web
from opentelemetry import trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.trace import TracerProvider

from multiqueue.controllers.job import JobControllerMetrics
from multiqueue.dispatch.metrics import DispatcherMetrics
from multiqueue.telemetry import BUCKETS, METRICS, JsonFormatter, Metrics, setup_tracing, tracer_provider


def test_counters_gauges_and_histograms_render_in_the_prometheus_text_format() -> None:
    metrics = Metrics()

    def dispatched(_options: CallbackOptions) -> list[Observation]:
        return [Observation(3, {"cluster": "worker-1"}), Observation(1, {"cluster": 'odd "name"'})]

    metrics._observe("multiqueue_jobs_dispatched_total", dispatched)
    metrics._observe("multiqueue_waiting_jobs", lambda _o: [Observation(2)])
    latency = metrics.meter.create_histogram("multiqueue_dispatch_latency_seconds", unit="s")
    for seconds in (0.07, 0.3, 400.0):
        latency.record(seconds)
    metrics.families.add("multiqueue_dispatch_latency_seconds")
    text = metrics.render()
    samples = _samples(text)
    assert "# TYPE multiqueue_jobs_dispatched_total counter" in text.splitlines()
    assert samples['multiqueue_jobs_dispatched_total{cluster="worker-1"}'] == 3
    assert samples['multiqueue_jobs_dispatched_total{cluster="odd \\"name\\""}'] == 1
    assert "# TYPE multiqueue_waiting_jobs gauge" in text.splitlines()
    assert samples["multiqueue_waiting_jobs"] == 2
    assert "# TYPE multiqueue_dispatch_latency_seconds histogram" in text.splitlines()
    # Buckets are cumulative, end with +Inf, and agree with _count.
    buckets = {
        key.split('le="')[1].rstrip('"}'): value
        for key, value in samples.items()
        if key.startswith("multiqueue_dispatch_latency_seconds_bucket")
    }
    assert [float(b) for b in buckets] == [*BUCKETS["multiqueue_dispatch_latency_seconds"], math.inf]
    assert list(buckets.values()) == [0, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3]
    assert samples["multiqueue_dispatch_latency_seconds_count"] == 3
    assert samples["multiqueue_dispatch_latency_seconds_sum"] == 400.37
    assert text.endswith("\n")


def test_the_embedded_controllers_counts_appear_under_upstreams_names_and_labels() -> None:
    metrics = Metrics()
    controller = SimpleNamespace(metrics=JobControllerMetrics())
    controller.metrics.syncs[("Indexed", "success", "pods_created")] += 2
    controller.metrics.by_external_controller["multiqueue.dev/dispatcher"] += 1
    metrics.observe_job_controller(controller)  # type: ignore[arg-type]
    samples = _samples(metrics.render())
    key = 'job_controller_job_syncs_total{action="pods_created",completion_mode="Indexed",result="success"}'
    assert samples[key] == 2
    key = 'job_controller_jobs_by_external_controller_total{controller_name="multiqueue.dev/dispatcher"}'
    assert samples[key] == 1


def test_a_counter_kept_by_the_dispatcher_needs_only_its_entry_in_the_table() -> None:
    metrics = Metrics()
    dispatcher = SimpleNamespace(metrics=DispatcherMetrics())
    dispatcher.metrics.redispatched["worker-1"] += 4
    manager = SimpleNamespace(dispatcher=dispatcher, refused_secrets={})
    counted = [name for name, family in METRICS.items() if (family.counts or "").startswith("dispatcher.")]
    metrics._observe_counts("dispatcher", lambda field: getattr(manager.dispatcher.metrics, field))
    assert metrics.families == set(counted)
    assert _samples(metrics.render())['multiqueue_jobs_redispatched_total{from_cluster="worker-1"}'] == 4


def test_a_family_without_samples_still_shows_its_type() -> None:
    metrics = Metrics()
    metrics._observe("multiqueue_jobs_redispatched_total", lambda _o: [])
    metrics.families.add("job_controller_job_sync_duration_seconds")
    assert metrics.render().splitlines() == [
        f"# HELP job_controller_job_sync_duration_seconds {METRICS['job_controller_job_sync_duration_seconds'].help}",
        "# TYPE job_controller_job_sync_duration_seconds histogram",
        f"# HELP multiqueue_jobs_redispatched_total {METRICS['multiqueue_jobs_redispatched_total'].help}",
        "# TYPE multiqueue_jobs_redispatched_total counter",
    ]


def _samples(text: str) -> dict[str, float]:
    """Sample lines of the text format: series (name and labels) -> value."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            found[series] = float(value)
    return found


def test_json_logs_are_one_object_per_line_with_extra_fields() -> None:
    record = logging.LogRecord(
        "multiqueue.dispatch", logging.WARNING, __file__, 1, "worker %s is lost", ("w1",), None
    )
    record.cluster = "w1"
    line = JsonFormatter().format(record)
    entry = json.loads(line)
    assert "\n" not in line
    assert (entry["level"], entry["logger"], entry["message"], entry["cluster"]) == (
        "warning",
        "multiqueue.dispatch",
        "worker w1 is lost",
        "w1",
    )
    assert entry["time"].endswith("Z")


def test_tracing_is_off_without_an_endpoint() -> None:
    assert tracer_provider({}) is None
    assert tracer_provider({"OTEL_EXPORTER_OTLP_ENDPOINT": ""}) is None
    # Nothing is installed: the process keeps OpenTelemetry's no-op default.
    assert setup_tracing({}) is None
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)


async def test_spans_go_to_the_otlp_endpoint() -> None:
    received: list[tuple[str, str]] = []
    arrived = asyncio.Event()

    async def collect(request: web.Request) -> web.Response:
        await request.read()
        received.append((request.path, request.content_type))
        arrived.set()
        return web.Response(status=200)

    application = web.Application()
    application.router.add_post("/v1/traces", collect)
    runner = web.AppRunner(application)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    provider: Any = tracer_provider({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{host}:{port}"})
    try:
        assert provider is not None
        with provider.get_tracer("test").start_as_current_span("dispatch.sync"):
            pass
        flushed = await asyncio.to_thread(provider.force_flush)
        assert flushed
        await asyncio.wait_for(arrived.wait(), 10)
        assert received == [("/v1/traces", "application/x-protobuf")]
    finally:
        await asyncio.to_thread(provider.shutdown)
        await runner.cleanup()
