"""Draining a worker (its Secret deleted) syncs its Jobs at once, so the mirrors of finished Jobs go now and the
worker can be let go, instead of waiting for some later change to one of them."""

from __future__ import annotations

from multiqueue.api.types import JOBS, Obj
from multiqueue.apiserver.server import ApiServer
from multiqueue.dispatch.capacity import Ledger
from multiqueue.dispatch.workers import WorkerPool, WorkerSettings
from multiqueue.kube.informer import InformerFactory
from tests.support.clients import client_for


class Listener:
    def __init__(self) -> None:
        self.changed: list[str] = []

    def mirror_changed(self, kind: str, mirror: Obj, deleted: bool) -> None:
        pass

    def worker_changed(self, name: str) -> None:
        self.changed.append(name)


async def test_draining_a_worker_syncs_its_jobs_once(apiserver: ApiServer) -> None:
    client = await client_for(apiserver)
    try:
        listener = Listener()
        pool = WorkerPool([JOBS], "multiqueue", listener, lost_timeout=60.0, slots=4)
        pool.add("worker-2", client, InformerFactory(client), WorkerSettings())
        assert listener.changed == ["worker-2"]  # added
        pool.drain("worker-2")
        assert listener.changed == ["worker-2", "worker-2"], "draining syncs the worker's Jobs"
        pool.drain("worker-2")
        pool.drain("not-a-worker")
        assert listener.changed == ["worker-2", "worker-2"], "once, and only for a worker that exists"
        assert [v.accepting for v in pool.views(Ledger())] == [False]
    finally:
        await client.close()
