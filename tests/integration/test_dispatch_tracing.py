"""Traces of the dispatcher: with tracing on, each sync of a Job is a ``dispatch.sync`` span naming the Job and its
kind, so an operator can follow one Job's decisions in a trace backend; with tracing off, a sync opens none."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from multiqueue.api.types import JOBS
from multiqueue.apiserver.server import ApiServer
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.dispatcher import COMPONENT, Dispatcher, DispatchSettings
from multiqueue.dispatch.mirror import Identity
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import InformerFactory
from tests.support.clients import client_for
from tests.support.dispatching import suspended_job

MANAGED_BY = "multiqueue.dev/dispatcher"


async def test_each_sync_is_a_span_naming_the_job_when_tracing_is_on(apiserver: ApiServer) -> None:
    client = await client_for(apiserver)
    factory = InformerFactory(client)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = DispatchSettings(Identity("multiqueue", MANAGED_BY), "LeastLoaded")
    recorder = EventRecorder(client, COMPONENT)
    traced = Dispatcher(
        [BatchJobAdapter()], client, factory, recorder, settings, tracer=provider.get_tracer("test")
    )
    untraced = Dispatcher([BatchJobAdapter()], client, factory, recorder, settings)
    await client.create(JOBS, suspended_job("traced", MANAGED_BY), "default")
    factory.start()
    try:
        await factory.wait_for_sync()
        assert await traced.sync(("Job", "default/traced")) is None  # suspended: it waits, nothing to requeue
        await untraced.sync(("Job", "default/traced"))
        spans = exporter.get_finished_spans()
        assert [(s.name, dict(s.attributes or {})) for s in spans] == [
            ("dispatch.sync", {"job": "default/traced", "kind": "Job"})
        ], "one span for the traced dispatcher's sync, none for the other's"
    finally:
        await traced.close()
        await untraced.close()
        await factory.stop()
        await client.close()
