"""What operators get from a running manager: /healthz, /readyz and /metrics, traces over OTLP, and JSON logs.

Metrics go through opentelemetry-sdk: counters and gauges are observed from the in-process counts of the
dispatcher and the embedded controllers, histograms are recorded where the time is measured (they get this
module's :class:`Metrics` meter). /metrics renders what the SDK collected in the Prometheus text format, under the
names in :data:`METRICS`: upstream's where upstream has one (the embedded Job controller's ``job_controller_*``),
``multiqueue_`` for the dispatcher's own.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from aiohttp import web
from opentelemetry import trace
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    Gauge,
    Histogram,
    InMemoryMetricReader,
    Sum,
)
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from multiqueue import __version__
from multiqueue.controllers.job import JobController
from multiqueue.dispatch.manager import Manager

# name -> (Prometheus type, labels, help). The operations docs render this table; a test checks /metrics against it.
METRICS: Final[dict[str, tuple[str, tuple[str, ...], str]]] = {
    "multiqueue_jobs_dispatched_total": (
        "counter",
        ("cluster",),
        "Jobs whose mirror was created on a worker.",
    ),
    "multiqueue_jobs_redispatched_total": (
        "counter",
        ("from_cluster",),
        "Jobs moved off a worker unreachable for longer than workerLostTimeout.",
    ),
    "multiqueue_status_sync_rejected_total": (
        "counter",
        ("reason",),
        "Mirror statuses not written back because they break the Job status rules.",
    ),
    "multiqueue_dispatch_latency_seconds": (
        "histogram",
        (),
        "From the manager first seeing a Job to its mirror existing on a worker.",
    ),
    "multiqueue_managed_jobs": (
        "gauge",
        ("state",),
        "Jobs with this manager's managedBy, active or finished.",
    ),
    "multiqueue_waiting_jobs": ("gauge", (), "Jobs that fit on no worker now and wait for capacity."),
    "multiqueue_cluster_active": (
        "gauge",
        ("cluster", "reason"),
        "1 while a worker is reachable and its cache in sync, else 0, with the reason.",
    ),
    "job_controller_job_syncs_total": (
        "counter",
        ("completion_mode", "result", "action"),
        "Syncs of the embedded Job controller.",
    ),
    "job_controller_job_sync_duration_seconds": (
        "histogram",
        ("completion_mode", "result", "action"),
        "How long one sync of the embedded Job controller took.",
    ),
    "job_controller_jobs_finished_total": (
        "counter",
        ("completion_mode", "result", "reason"),
        "Jobs the embedded Job controller finished.",
    ),
    "job_controller_job_pods_finished_total": (
        "counter",
        ("completion_mode", "result"),
        "Pods of Jobs that finished, counted by the embedded Job controller.",
    ),
    "job_controller_jobs_by_external_controller_total": (
        "counter",
        ("controller_name",),
        "Jobs the embedded Job controller left to another controller (spec.managedBy).",
    ),
}
# Upstream's buckets for the Job sync duration: 4 ms doubling fifteen times.
BUCKETS: Final = {
    "job_controller_job_sync_duration_seconds": [0.004 * 2**i for i in range(15)],
    "multiqueue_dispatch_latency_seconds": [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0],
}
OTLP_ENDPOINT_ENV: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"


class Metrics:
    """One manager process's metrics: an SDK meter provider read on demand by /metrics."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        views = [
            View(instrument_name=name, aggregation=ExplicitBucketHistogramAggregation(bounds))
            for name, bounds in BUCKETS.items()
        ]
        self.provider = MeterProvider(metric_readers=[self.reader], views=views)
        self.meter: Meter = self.provider.get_meter("multiqueue", __version__)
        # The families /metrics shows, with or without samples yet.
        self.families: set[str] = set()

    def observe_manager(self, manager: Manager) -> None:
        def dispatcher_counts(field: str, label: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
            def observe(_options: CallbackOptions) -> Iterable[Observation]:
                dispatcher = manager.dispatcher
                if dispatcher is None:
                    return []
                counts: Mapping[str, int] = getattr(dispatcher.metrics, field)
                return [Observation(n, {label: key}) for key, n in sorted(counts.items())]

            return observe

        def managed(_options: CallbackOptions) -> Iterable[Observation]:
            dispatcher = manager.dispatcher
            if dispatcher is None:
                return []
            states = {"active": 0, "finished": 0}
            for job in dispatcher.users.objects():
                if dispatcher.adapter.managed_by(job) == dispatcher.managed_by:
                    states["finished" if dispatcher.adapter.is_finished(job) else "active"] += 1
            return [Observation(n, {"state": s}) for s, n in states.items()]

        def waiting(_options: CallbackOptions) -> Iterable[Observation]:
            dispatcher = manager.dispatcher
            return [Observation(len(dispatcher.waiting_order()) if dispatcher is not None else 0)]

        def active(_options: CallbackOptions) -> Iterable[Observation]:
            dispatcher = manager.dispatcher
            views = dispatcher.worker_views() if dispatcher is not None else []
            found = [Observation(int(v.active), {"cluster": v.name, "reason": v.reason}) for v in views]
            found += [
                Observation(0, {"cluster": name, "reason": refusal.reason})
                for name, refusal in sorted(manager.refused_secrets.items())
            ]
            return found

        self._observe("multiqueue_jobs_dispatched_total", dispatcher_counts("dispatched", "cluster"))
        self._observe("multiqueue_jobs_redispatched_total", dispatcher_counts("redispatched", "from_cluster"))
        self._observe("multiqueue_status_sync_rejected_total", dispatcher_counts("rejected", "reason"))
        self._observe("multiqueue_managed_jobs", managed)
        self._observe("multiqueue_waiting_jobs", waiting)
        self._observe("multiqueue_cluster_active", active)
        self.families.add("multiqueue_dispatch_latency_seconds")  # recorded by the dispatcher

    def observe_job_controller(self, controller: JobController) -> None:
        def counts(field: str, labels: tuple[str, ...]) -> Callable[[CallbackOptions], Iterable[Observation]]:
            def observe(_options: CallbackOptions) -> Iterable[Observation]:
                found: Mapping[Any, int] = getattr(controller.metrics, field)
                return [
                    Observation(n, dict(zip(labels, key if isinstance(key, tuple) else (key,), strict=True)))
                    for key, n in sorted(found.items())
                ]

            return observe

        for name, field in (
            ("job_controller_job_syncs_total", "syncs"),
            ("job_controller_jobs_finished_total", "finished"),
            ("job_controller_job_pods_finished_total", "pods_finished"),
            ("job_controller_jobs_by_external_controller_total", "by_external_controller"),
        ):
            self._observe(name, counts(field, METRICS[name][1]))
        self.families.add("job_controller_job_sync_duration_seconds")  # recorded by the controller

    def _observe(self, name: str, callback: Callable[[CallbackOptions], Iterable[Observation]]) -> None:
        kind, _labels, description = METRICS[name]
        self.families.add(name)
        if kind == "counter":
            self.meter.create_observable_counter(name, callbacks=[callback], description=description)
        else:
            self.meter.create_observable_gauge(name, callbacks=[callback], description=description)

    def render(self) -> str:
        """Everything collected, in the Prometheus text format (0.0.4)."""
        data = self.reader.get_metrics_data()
        families: dict[str, list[str]] = {}
        for resource_metrics in data.resource_metrics if data is not None else []:
            for scope in resource_metrics.scope_metrics:
                for metric in scope.metrics:
                    families.setdefault(metric.name, []).extend(_samples(metric.name, metric.data))
        lines: list[str] = []
        for name in sorted(self.families | set(families)):
            kind, _labels, description = METRICS.get(name, ("untyped", (), name))
            lines += [f"# HELP {name} {description}", f"# TYPE {name} {kind}", *families.get(name, [])]
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(attributes: Mapping[str, Any] | None, extra: Mapping[str, str] | None = None) -> str:
    merged = {**{k: str(v) for k, v in (attributes or {}).items()}, **(extra or {})}
    if not merged:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(merged.items())) + "}"


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if isinstance(value, float) and not value.is_integer() else str(int(value))


def _samples(name: str, data: Any) -> list[str]:
    lines: list[str] = []
    if isinstance(data, Histogram):
        for histogram in data.data_points:
            running = 0
            bounds = [*histogram.explicit_bounds, math.inf]
            for bound, count in zip(bounds, histogram.bucket_counts, strict=True):
                running += count
                lines.append(
                    f"{name}_bucket{_labels(histogram.attributes, {'le': _number(bound)})} {running}"
                )
            lines.append(f"{name}_sum{_labels(histogram.attributes)} {_number(histogram.sum)}")
            lines.append(f"{name}_count{_labels(histogram.attributes)} {histogram.count}")
    elif isinstance(data, Sum | Gauge):
        for point in data.data_points:
            lines.append(f"{name}{_labels(point.attributes)} {_number(point.value)}")
    return lines


def tracer_provider(environ: Mapping[str, str] = os.environ) -> TracerProvider | None:
    """Spans exported over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set; None (tracing off) otherwise."""
    base = environ.get(OTLP_ENDPOINT_ENV)
    if not base:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": "multiqueue-manager"}))
    # The base endpoint of the OTLP spec: traces go to <base>/v1/traces.
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{base.rstrip('/')}/v1/traces"))
    )
    return provider


def setup_tracing(environ: Mapping[str, str] = os.environ) -> TracerProvider | None:
    """Install :func:`tracer_provider` for the whole process (the dispatcher's spans use the global one)."""
    provider = tracer_provider(environ)
    if provider is not None:
        trace.set_tracer_provider(provider)
    return provider


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and whatever ``extra`` the call passed."""

    _standard: Final = frozenset(vars(logging.makeLogRecord({})))

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in self._standard and k != "message"})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup_logging(log_format: str, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler()
    if log_format == "json":
        formatter: logging.Formatter = JsonFormatter()
        formatter.converter = time.gmtime
    else:
        formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def app(ready: Callable[[], bool], metrics: Callable[[], str]) -> web.Application:
    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_request: web.Request) -> web.Response:
        return web.Response(text="ok" if ready() else "not ready", status=200 if ready() else 503)

    async def metrics_handler(_request: web.Request) -> web.Response:
        return web.Response(text=metrics(), content_type="text/plain", charset="utf-8")

    application = web.Application()
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/livez", healthz)
    application.router.add_get("/readyz", readyz)
    application.router.add_get("/metrics", metrics_handler)
    return application


async def serve(manager: Manager, metrics: Metrics, address: str) -> tuple[web.AppRunner, str]:
    """Serve the operator endpoints of ``manager`` on ``address`` (port 0: any free one); the runner and URL."""
    host, _, port = address.rpartition(":")
    runner = web.AppRunner(
        app(
            lambda: manager.dispatcher is not None and manager.dispatcher.users.has_synced,
            metrics.render,
        ),
        access_log=None,
    )
    await runner.setup()
    site = web.TCPSite(runner, host or "127.0.0.1", int(port or 8080))
    await site.start()
    bound = runner.addresses[0] if runner.addresses else (host, port)
    return runner, f"http://{bound[0]}:{bound[1]}"
