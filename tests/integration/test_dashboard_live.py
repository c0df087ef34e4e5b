"""The dashboard's live view against a real API server: Jobs reach every open page as they change, a page that
stops reading is dropped (its browser reconnects and starts over) instead of holding the manager's memory, and
reasons come back after the watch of Events is cut.

The live view reads the manager's read model, here on a real dispatcher (no workers, never run) whose informers
follow a local API server.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from multiqueue.api.types import EVENTS, JOBS
from multiqueue.apiserver.server import ApiServer
from multiqueue.dashboard.live import BACKLOG, LiveView, Timings
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.dispatcher import COMPONENT as DISPATCHER_COMPONENT
from multiqueue.dispatch.dispatcher import Dispatcher, DispatchSettings
from multiqueue.dispatch.mirror import Identity
from multiqueue.dispatch.readmodel import ReadModel
from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.kube.config import load_credentials
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import InformerFactory
from tests.support.clients import client_for
from tests.support.dispatching import suspended_job
from tests.support.processes import Spawned
from tests.support.servers import kubeconfig_dict

MANAGED_BY = "multiqueue.dev/dispatcher"


def job_body(name: str, managed_by: str = MANAGED_BY) -> dict[str, Any]:
    return suspended_job(name, managed_by)


def read_model(client: KubeClient, factory: InformerFactory) -> ReadModel:
    settings = DispatchSettings(Identity("multiqueue", MANAGED_BY), "LeastLoaded")
    recorder = EventRecorder(client, DISPATCHER_COMPONENT)
    return ReadModel(Dispatcher([BatchJobAdapter()], client, factory, recorder, settings))


async def test_pages_get_changes_and_a_page_that_stops_reading_is_dropped(apiserver: ApiServer) -> None:
    client = await client_for(apiserver)
    factory = InformerFactory(client)
    live = LiveView(read_model(client, factory), client, timings=Timings(flush=0.0))
    factory.start()
    await factory.wait_for_sync()
    live.start()
    try:
        async with live.page() as reader, live.page() as stalled:
            snapshot = reader.get_nowait()
            assert snapshot is not None and snapshot.startswith(b"event: snapshot\n")
            async with asyncio.timeout(10):
                first = await reader.get()  # the chart's first point, taken at start
            assert first is not None and first.startswith(b'event: changes\ndata: {"chart":')
            await client.create(JOBS, job_body("someone-elses", managed_by="example.com/other"), "default")
            names = [f"j-{i}" for i in range(BACKLOG + 5)]
            for name in names:
                await client.create(JOBS, job_body(name), "default")
                # Each Job is a batch of its own, put on every page at once: the stalled page's backlog grows
                # until it is dropped.
                async with asyncio.timeout(10):
                    message = await reader.get()
                assert message is not None and f'"name":"{name}"'.encode() in message
                assert b"someone-elses" not in message, "only Jobs with this manager's managedBy"
            backlog = [stalled.get_nowait() for _ in range(stalled.qsize())]
            assert backlog[-1] is None, "the stalled page was told to go"
            assert len(backlog) == BACKLOG
        async with live.page() as again:
            snapshot = again.get_nowait()
            assert snapshot is not None
            assert all(f'"name":"{n}"'.encode() in snapshot for n in names), (
                "a new page starts from everything"
            )
            assert b"someone-elses" not in snapshot
    finally:
        await live.stop()
        await factory.stop()
        await client.close()


class Warned(logging.Handler):
    """Sets ``seen`` when a record containing ``text`` is logged."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.WARNING)
        self.text = text
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


def dispatcher_event(job: dict[str, Any], reason: str, second: int) -> dict[str, Any]:
    meta = job["metadata"]
    stamp = f"2026-01-01T00:00:{second:02d}Z"
    return {
        "metadata": {"name": f"{meta['name']}.{second}", "namespace": meta["namespace"]},
        "involvedObject": {
            "kind": "Job",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
        },
        "type": "Normal",
        "reason": reason,
        "message": f"{reason} message",
        "source": {"component": DISPATCHER_COMPONENT},
        "reportingComponent": DISPATCHER_COMPONENT,
        "reportingInstance": "test",
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


async def until_message(page: asyncio.Queue[bytes | None], text: str) -> None:
    async with asyncio.timeout(20):
        while (message := await page.get()) is None or text.encode() not in message:
            assert message is not None, "the page was dropped"


async def test_reasons_come_back_after_the_events_watch_is_cut(apiserver: ApiServer, tmp_path: Path) -> None:
    """The live view reaches the server through a proxy that is killed (the watch breaks, the next LIST is
    refused) and started again on the same port: the next Event's reason reaches the page."""
    served = urlsplit(apiserver.url)
    host, port = str(served.hostname), str(served.port)
    proxy = Spawned.python(
        "tcpproxy", ["-m", "tests.support.tcpproxy", "0", host, port], tmp_path / "proxy.log"
    )
    await proxy.start()
    proxy_port = (await proxy.wait_for_line(r"^(\d+)$", within=30)).group(1)
    through = kubeconfig_dict(apiserver)
    through["clusters"][0]["cluster"]["server"] = urlunsplit(served._replace(netloc=f"{host}:{proxy_port}"))
    # One attempt per request: the failure reaches the live view instead of the client's retries hiding it.
    watcher = KubeClient(
        await load_credentials(config_dict=through),
        "via-proxy",
        ClientOptions(max_attempts=1, request_timeout=5),
    )
    client = await client_for(apiserver)
    factory = InformerFactory(client)
    live = LiveView(read_model(watcher, factory), watcher, timings=Timings(flush=0.0, events_retry=0.05))
    warned = Warned("lost the dispatcher's Events")
    logging.getLogger("multiqueue.dashboard.live").addHandler(warned)
    factory.start()
    await factory.wait_for_sync()
    live.start()
    try:
        job = await client.create(JOBS, job_body("waits"), "default")
        async with live.page() as page:
            await client.create(EVENTS, dispatcher_event(job, "FirstReason", 1), "default")
            await until_message(page, '"reason":"FirstReason"')
            await proxy.kill_group()
            async with asyncio.timeout(20):
                await warned.seen.wait()
            again = Spawned.python(
                "tcpproxy", ["-m", "tests.support.tcpproxy", proxy_port, host, port], tmp_path / "proxy-2.log"
            )
            await again.start()
            try:
                await again.wait_for_line(r"^(\d+)$", within=30)
                await client.create(EVENTS, dispatcher_event(job, "SecondReason", 2), "default")
                await until_message(page, '"reason":"SecondReason"')
            finally:
                await again.kill_group()
    finally:
        logging.getLogger("multiqueue.dashboard.live").removeHandler(warned)
        await proxy.kill_group()
        await live.stop()
        await factory.stop()
        await client.close()
        await watcher.close()
