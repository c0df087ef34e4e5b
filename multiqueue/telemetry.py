"""What operators get from a running manager: /healthz, /readyz and /metrics, traces over OTLP, and JSON logs.

Metrics go through opentelemetry-sdk. Counters and gauges are observable instruments whose callbacks read the
in-process counts of the manager's read model and the embedded Job controller; histograms are recorded where the time is
measured, on this module's meter (:attr:`Metrics.meter`). /metrics is OpenTelemetry's Prometheus exporter
(``PrometheusMetricReader`` on a registry of our own), under the names of :data:`METRICS`: upstream's where
upstream has one (the embedded Job controller's ``job_controller_*``), ``multiqueue_`` for the dispatcher's own.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, Literal

from aiohttp import web
from opentelemetry import trace
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from multiqueue import __version__
from multiqueue.controllers.job import JobController
from multiqueue.dispatch.manager import Manager
from multiqueue.dispatch.readmodel import Snapshot


@dataclasses.dataclass(frozen=True)
class Family:
    """One metric family on /metrics: its Prometheus type, label names and help text.

    ``counts`` names the in-process counter a counter family is observed from: ``dispatcher.<field>`` (a field of
    ``Dispatcher.metrics``) or ``job_controller.<field>`` (of ``JobController.metrics``), keyed by the label
    values in ``labels`` order. Adding such a family is one entry in :data:`METRICS`.
    """

    kind: Literal["counter", "gauge", "histogram"]
    labels: tuple[str, ...]
    help: str
    counts: str | None = None


# Every family /metrics serves. docs/generate.py renders this table; tests check /metrics against the docs.
METRICS: Final[dict[str, Family]] = {
    "multiqueue_jobs_dispatched_total": Family(
        "counter", ("cluster",), "Jobs whose mirror was created on a worker.", "dispatcher.dispatched"
    ),
    "multiqueue_jobs_redispatched_total": Family(
        "counter",
        ("from_cluster",),
        "Jobs moved off a worker unreachable for longer than workerLostTimeout.",
        "dispatcher.redispatched",
    ),
    "multiqueue_status_sync_rejected_total": Family(
        "counter",
        ("reason",),
        "Mirror statuses not written back because they break the Job status rules.",
        "dispatcher.rejected",
    ),
    "multiqueue_dispatch_latency_seconds": Family(
        "histogram", (), "From the manager first seeing a Job to its mirror existing on a worker."
    ),
    "multiqueue_managed_jobs": Family(
        "gauge", ("state",), "Jobs with this manager's managedBy, active or finished."
    ),
    "multiqueue_waiting_jobs": Family("gauge", (), "Jobs that fit on no worker now and wait for capacity."),
    "multiqueue_cluster_active": Family(
        "gauge",
        ("cluster", "reason"),
        "1 while a worker is reachable and its cache in sync, else 0, with the reason; a refused worker Secret "
        "shows as 0 with the refusal's reason.",
    ),
    "rest_client_requests_total": Family(
        "counter",
        ("code", "host", "method"),
        "Requests the manager sent, by the status code of the answer (<error> when none came), the API server's "
        "host and the HTTP method; client-go's family.",
    ),
    "job_controller_job_syncs_total": Family(
        "counter",
        ("completion_mode", "result", "action"),
        "Syncs of the embedded Job controller.",
        "job_controller.syncs",
    ),
    "job_controller_job_sync_duration_seconds": Family(
        "histogram",
        ("completion_mode", "result", "action"),
        "How long one sync of the embedded Job controller took.",
    ),
    "job_controller_jobs_finished_total": Family(
        "counter",
        ("completion_mode", "result", "reason"),
        "Jobs the embedded Job controller finished.",
        "job_controller.finished",
    ),
    "job_controller_job_pods_finished_total": Family(
        "counter",
        ("completion_mode", "result"),
        "Pods of Jobs that finished, counted by the embedded Job controller.",
        "job_controller.pods_finished",
    ),
    "job_controller_jobs_by_external_controller_total": Family(
        "counter",
        ("controller_name",),
        "Jobs the embedded Job controller left to another controller (spec.managedBy).",
        "job_controller.by_external_controller",
    ),
}
# Upstream's buckets for the Job sync duration: 4 ms doubling fifteen times.
BUCKETS: Final = {
    "job_controller_job_sync_duration_seconds": [0.004 * 2**i for i in range(15)],
    "multiqueue_dispatch_latency_seconds": [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0],
}
# The text format 0.0.4: every name here is a classic Prometheus name, so any Prometheus version can scrape it.
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
OTLP_ENDPOINT_ENV: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"

Callback = Callable[[CallbackOptions], Iterable[Observation]]


_EMPTY: Final[dict[str, Callable[..., Metric]]] = {
    "counter": CounterMetricFamily,
    "gauge": GaugeMetricFamily,
    "histogram": HistogramMetricFamily,
}


class _Documented(Collector):
    """What the SDK collected, plus an empty family for each registered one with no samples yet, so /metrics
    always shows every family's TYPE (a scrape right after start looks like any other)."""

    def __init__(self, collected: CollectorRegistry, families: set[str]) -> None:
        self.collected = collected
        self.families = families

    def collect(self) -> Iterator[Metric]:
        shown: set[str] = set()
        for metric in self.collected.collect():
            # prometheus_client keeps a counter's name without its _total suffix.
            shown.add(f"{metric.name}_total" if metric.type == "counter" else metric.name)
            yield metric
        for name in sorted(self.families - shown):
            family = METRICS[name]
            yield _EMPTY[family.kind](name, family.help, labels=family.labels)


class Metrics:
    """One manager process's metrics: an SDK meter provider, collected on demand by /metrics."""

    def __init__(self) -> None:
        collected = CollectorRegistry(auto_describe=False)
        self.reader = PrometheusMetricReader(
            disable_target_info=True, scope_info_enabled=False, registry=collected
        )
        views = [
            View(instrument_name=name, aggregation=ExplicitBucketHistogramAggregation(bounds))
            for name, bounds in BUCKETS.items()
        ]
        self.provider = MeterProvider(metric_readers=[self.reader], views=views)
        self.meter: Meter = self.provider.get_meter("multiqueue", __version__)
        # The families /metrics shows, with or without samples yet.
        self.families: set[str] = set()
        # Called before each scrape: each takes the one snapshot its callbacks read.
        self._before_scrape: list[Callable[[], None]] = []
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Documented(collected, self.families))

    def observe_manager(self, manager: Manager) -> None:
        """The dispatcher's families, from one snapshot of the manager's read model per scrape (none before the
        manager starts)."""
        taken: list[Snapshot] = []

        def take() -> None:
            taken[:] = [manager.read_model.snapshot()] if manager.read_model is not None else []

        def counted(field: str) -> Mapping[Any, int]:
            return getattr(taken[0], field) if taken else {}

        def managed(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(n, {"state": s}) for s, n in taken[0].managed.items()] if taken else []

        def waiting(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(taken[0].waiting if taken else 0)]

        def active(_options: CallbackOptions) -> Iterable[Observation]:
            if not taken:
                return []
            found = [
                Observation(int(w.active), {"cluster": w.name, "reason": w.reason}) for w in taken[0].workers
            ]
            # A worker Secret that was refused is a worker that is not active, and why.
            found += [
                Observation(0, {"cluster": n, "reason": r}) for n, r in sorted(taken[0].refused.items())
            ]
            return found

        def sent(_options: CallbackOptions) -> Iterable[Observation]:
            labels = ("code", "host", "method")
            requests = taken[0].requests if taken else {}
            return [Observation(n, dict(zip(labels, key, strict=True))) for key, n in requests.items()]

        self._before_scrape.append(take)
        self._observe_counts("dispatcher", counted)
        self._observe("rest_client_requests_total", sent)
        self._observe("multiqueue_managed_jobs", managed)
        self._observe("multiqueue_waiting_jobs", waiting)
        self._observe("multiqueue_cluster_active", active)
        self.families.add("multiqueue_dispatch_latency_seconds")  # recorded by the dispatcher

    def observe_job_controller(self, controller: JobController) -> None:
        """Upstream's job_controller families, read from the embedded controller's counts."""
        self._observe_counts("job_controller", lambda field: getattr(controller.metrics, field))
        self.families.add("job_controller_job_sync_duration_seconds")  # recorded by the controller

    def _observe_counts(self, source: str, counted: Callable[[str], Mapping[Any, int]]) -> None:
        """An observable counter for each family of METRICS counted in ``source``'s metrics."""
        for name, family in METRICS.items():
            owner, _, field = (family.counts or "").partition(".")
            if owner == source:
                self._observe(name, _counter_callback(counted, field, family.labels))

    def _observe(self, name: str, callback: Callback) -> None:
        family = METRICS[name]
        self.families.add(name)
        if family.kind == "counter":
            self.meter.create_observable_counter(name, callbacks=[callback], description=family.help)
        else:
            self.meter.create_observable_gauge(name, callbacks=[callback], description=family.help)

    def render(self) -> str:
        """Everything collected, in the Prometheus text format."""
        for take in self._before_scrape:
            take()
        return generate_latest(self.registry).decode()


def _counter_callback(
    counted: Callable[[str], Mapping[Any, int]], field: str, labels: tuple[str, ...]
) -> Callback:
    def observe(_options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(n, dict(zip(labels, key if isinstance(key, tuple) else (key,), strict=True)))
            for key, n in sorted(counted(field).items())
        ]

    return observe


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
    """Install :func:`tracer_provider` for the whole process, for any library that traces through the global one;
    the dispatcher is given a tracer of it (and none when tracing is off)."""
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
        return web.Response(body=metrics().encode(), headers={"Content-Type": CONTENT_TYPE})

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
            lambda: manager.read_model is not None and manager.read_model.synced,
            metrics.render,
        ),
        access_log=None,
    )
    await runner.setup()
    site = web.TCPSite(runner, host or "127.0.0.1", int(port or 8080))
    await site.start()
    bound = runner.addresses[0] if runner.addresses else (host, port)
    return runner, f"http://{bound[0]}:{bound[1]}"
