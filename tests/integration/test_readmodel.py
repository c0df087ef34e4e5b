"""The manager's read model on a real dispatcher whose informers follow a local API server: subscribers hear of
the Jobs with this manager's managedBy only, a cancelled subscription hears nothing more, and a snapshot counts
Jobs by kind and state and every request the manager's clients sent."""

from __future__ import annotations

import asyncio
from typing import Any

from multiqueue.api.types import JOBS, Obj
from multiqueue.apiserver.server import ApiServer
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.dispatcher import COMPONENT, Dispatcher, DispatchSettings
from multiqueue.dispatch.generic import GenericJob
from multiqueue.dispatch.mirror import Identity
from multiqueue.dispatch.readmodel import ReadModel
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import InformerFactory
from tests.support.clients import client_for
from tests.support.dispatching import suspended_job

MANAGED_BY = "multiqueue.dev/dispatcher"


def job_body(name: str, managed_by: str = MANAGED_BY) -> dict[str, Any]:
    return suspended_job(name, managed_by)


class Heard:
    """A subscriber that keeps what it was told, and wakes a waiter when a Job it waits for is heard of."""

    def __init__(self) -> None:
        self.changed: list[str] = []
        self.deleted: list[str] = []
        self.news = asyncio.Event()

    def job_changed(self, adapter: GenericJob, job: Obj) -> None:
        self.changed.append(job["metadata"]["name"])
        self.news.set()

    def job_deleted(self, job: Obj) -> None:
        self.deleted.append(job["metadata"]["name"])
        self.news.set()

    def workers_changed(self) -> None:
        self.news.set()

    async def until(self, seen: list[str], name: str) -> None:
        async with asyncio.timeout(10):
            while name not in seen:
                self.news.clear()
                await self.news.wait()


async def test_subscribers_hear_of_our_jobs_until_they_cancel_and_snapshots_count_them(
    apiserver: ApiServer,
) -> None:
    client = await client_for(apiserver)
    factory = InformerFactory(client)
    settings = DispatchSettings(Identity("multiqueue", MANAGED_BY), "LeastLoaded")
    dispatcher = Dispatcher([BatchJobAdapter()], client, factory, EventRecorder(client, COMPONENT), settings)
    model = ReadModel(dispatcher, refused=lambda: {"bad-secret": "BadKubeConfig"}, clients=lambda: [client])
    await client.create(JOBS, job_body("before"), "default")
    await client.create(JOBS, job_body("someone-elses", managed_by="example.com/other"), "default")
    factory.start()
    try:
        await factory.wait_for_sync()  # the first listing holds both
        assert model.synced and model.job("Job", "default/before") is not None
        heard, gone = Heard(), Heard()
        model.subscribe(heard)
        cancelled = model.subscribe(gone)
        assert heard.changed == ["before"], "a subscriber first hears of every Job there is, ours only"
        cancelled.cancel()
        await client.create(JOBS, job_body("after"), "default")
        await heard.until(heard.changed, "after")
        await client.delete(JOBS, "before", "default")
        await heard.until(heard.deleted, "before")
        assert gone.changed == ["before"] and gone.deleted == [], (
            "a cancelled subscription hears nothing more"
        )
        assert model.job("Job", "default/someone-elses") is None

        snapshot = model.snapshot()
        assert snapshot.jobs == {"Job": {"active": 1, "finished": 0}}
        assert snapshot.managed == {"active": 1, "finished": 0}
        assert snapshot.synced and snapshot.workers == () and snapshot.waiting == 0
        assert snapshot.refused == {"bad-secret": "BadKubeConfig"}
        created = sum(n for (code, _host, method), n in snapshot.requests.items() if method == "POST")
        assert created == 3 and all(code == "201" for code, _, m in snapshot.requests if m == "POST")
    finally:
        await factory.stop()
        await client.close()


async def test_snapshot_counts_follow_jobs_as_they_finish_and_go(apiserver: ApiServer) -> None:
    client = await client_for(apiserver)
    factory = InformerFactory(client)
    settings = DispatchSettings(Identity("multiqueue", MANAGED_BY), "LeastLoaded")
    dispatcher = Dispatcher([BatchJobAdapter()], client, factory, EventRecorder(client, COMPONENT), settings)
    model = ReadModel(dispatcher)
    for name in ("a", "b"):
        await client.create(JOBS, job_body(name), "default")
    factory.start()
    try:
        await factory.wait_for_sync()
        heard = Heard()
        model.subscribe(heard)
        assert model.snapshot().jobs == {"Job": {"active": 2, "finished": 0}}
        job = await client.patch(JOBS, "a", {"spec": {"suspend": False}}, "default")
        now = "2026-01-01T00:00:00Z"
        done = [
            {"type": kind, "status": "True", "lastTransitionTime": now, "lastProbeTime": now}
            for kind in ("SuccessCriteriaMet", "Complete")
        ]
        job["status"] = {"startTime": now, "completionTime": now, "succeeded": 1, "conditions": done}
        await client.update_status(JOBS, job)
        await counted(model, heard, {"Job": {"active": 1, "finished": 1}})
        await client.delete(JOBS, "a", "default")
        await counted(model, heard, {"Job": {"active": 1, "finished": 0}})
    finally:
        await factory.stop()
        await client.close()


async def counted(model: ReadModel, heard: Heard, expected: dict[str, dict[str, int]]) -> None:
    """Until the snapshot counts ``expected``, woken by each change the subscriber hears of."""
    async with asyncio.timeout(10):
        while True:
            heard.news.clear()
            if model.snapshot().jobs == expected:
                return
            await heard.news.wait()
