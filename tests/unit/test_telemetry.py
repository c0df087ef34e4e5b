"""What operators read: the Prometheus text of /metrics, JSON log lines, and whether traces leave the process."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from aiohttp import web
from opentelemetry.metrics import CallbackOptions, Observation

from multiqueue.telemetry import METRICS, JsonFormatter, Metrics, tracer_provider


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
    lines = text.splitlines()
    assert "# TYPE multiqueue_jobs_dispatched_total counter" in lines
    assert 'multiqueue_jobs_dispatched_total{cluster="worker-1"} 3' in lines
    assert 'multiqueue_jobs_dispatched_total{cluster="odd \\"name\\""} 1' in lines
    assert "# TYPE multiqueue_waiting_jobs gauge" in lines
    assert "multiqueue_waiting_jobs 2" in lines
    assert "# TYPE multiqueue_dispatch_latency_seconds histogram" in lines
    # Buckets are cumulative, end with +Inf, and agree with _count.
    assert 'multiqueue_dispatch_latency_seconds_bucket{le="0.05"} 0' in lines
    assert 'multiqueue_dispatch_latency_seconds_bucket{le="0.1"} 1' in lines
    assert 'multiqueue_dispatch_latency_seconds_bucket{le="0.5"} 2' in lines
    assert 'multiqueue_dispatch_latency_seconds_bucket{le="300"} 2' in lines
    assert 'multiqueue_dispatch_latency_seconds_bucket{le="+Inf"} 3' in lines
    assert "multiqueue_dispatch_latency_seconds_count 3" in lines
    assert text.endswith("\n")


def test_a_family_without_samples_still_shows_its_type() -> None:
    metrics = Metrics()
    metrics._observe("multiqueue_jobs_redispatched_total", lambda _o: [])
    assert metrics.render().splitlines() == [
        f"# HELP multiqueue_jobs_redispatched_total {METRICS['multiqueue_jobs_redispatched_total'][2]}",
        "# TYPE multiqueue_jobs_redispatched_total counter",
    ]


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
