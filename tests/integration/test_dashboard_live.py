"""The dashboard's live view against a real API server: Jobs reach every open page as they change, and a page
that stops reading is dropped (its browser reconnects and starts over) instead of holding the manager's memory.

The dispatcher here is a stand-in holding only what the live view reads of it (its informers, adapters, worker
pool, ledger, metrics and identity); the informers are real ones on a local API server.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from multiqueue.api.types import JOBS
from multiqueue.dashboard.live import BACKLOG, LiveView
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.capacity import Ledger
from multiqueue.dispatch.dispatcher import Dispatcher
from multiqueue.dispatch.metrics import DispatcherMetrics
from multiqueue.dispatch.mirror import Identity
from multiqueue.kube.informer import InformerFactory
from multiqueue.local.apiserver.server import ApiServer
from tests.support.clients import client_for

MANAGED_BY = "multiqueue.dev/dispatcher"


def job(name: str, managed_by: str = MANAGED_BY) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": managed_by,
            "suspend": True,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
            },
        },
    }


def stand_in(factory: InformerFactory) -> Dispatcher:
    pool = SimpleNamespace(on_health=[], workers={}, views=lambda _ledger: [])
    return cast(
        Dispatcher,
        SimpleNamespace(
            users={"Job": factory.informer(JOBS)},
            adapters={"Job": BatchJobAdapter()},
            pool=pool,
            ledger=Ledger(),
            metrics=DispatcherMetrics(),
            settings=SimpleNamespace(identity=Identity("multiqueue", MANAGED_BY)),
        ),
    )


async def test_pages_get_changes_and_a_page_that_stops_reading_is_dropped(apiserver: ApiServer) -> None:
    client = await client_for(apiserver)
    factory = InformerFactory(client)
    live = LiveView(stand_in(factory), client, flush_every=0.0)
    factory.start()
    await factory.wait_for_sync()
    live.start()
    try:
        async with live.page() as reader, live.page() as stalled:
            assert reader.get_nowait().startswith(b"event: snapshot\n")
            async with asyncio.timeout(10):
                first = await reader.get()  # the chart's first point, taken at start
            assert first is not None and first.startswith(b'event: changes\ndata: {"chart":')
            await client.create(JOBS, job("someone-elses", managed_by="example.com/other"), "default")
            names = [f"j-{i}" for i in range(BACKLOG + 5)]
            for name in names:
                await client.create(JOBS, job(name), "default")
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
