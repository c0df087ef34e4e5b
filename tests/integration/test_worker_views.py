"""A sync's views of the workers outlive a change to the pool within the sync: a worker removed after the views were
taken is still seen as it was, rather than failing the sync."""

from __future__ import annotations

from multiqueue.api.types import JOBS
from multiqueue.apiserver.server import ApiServer
from multiqueue.dispatch.capacity import Ledger
from multiqueue.dispatch.workers import WorkerPool, WorkerSettings
from multiqueue.kube.informer import InformerFactory
from tests.integration.test_worker_drain import Listener
from tests.support.clients import client_for


async def test_views_taken_before_a_worker_is_removed_still_show_it(apiserver: ApiServer) -> None:
    client = await client_for(apiserver)
    try:
        pool = WorkerPool([JOBS], "multiqueue", Listener(), lost_timeout=60.0, slots=4)
        for name in ("worker-1", "worker-2"):
            pool.add(name, client, InformerFactory(client), WorkerSettings())
        views = pool.views(Ledger())
        pool.remove("worker-2")
        seen = views.get("worker-2")
        assert seen is not None and seen.name == "worker-2"
        assert [v.name for v in views] == ["worker-1", "worker-2"]
        assert [v.name for v in pool.views(Ledger())] == ["worker-1"], "the next sync's views do not show it"
    finally:
        await client.close()


async def test_a_view_made_after_the_pool_changed_is_not_kept_as_current(apiserver: ApiServer) -> None:
    """Views taken before a worker was re-added (new settings) and read after it show the worker as it was; the
    next sync's views show it as it is, not the older view kept."""
    client = await client_for(apiserver)
    try:
        pool = WorkerPool([JOBS], "multiqueue", Listener(), lost_timeout=60.0, slots=4)
        ledger = Ledger()
        pool.add("worker-1", client, InformerFactory(client), WorkerSettings(labels={"zone": "a"}))
        before = pool.views(ledger)
        pool.add("worker-1", client, InformerFactory(client), WorkerSettings(labels={"zone": "b"}))
        old = before.get("worker-1")
        assert old is not None and old.labels == {"zone": "a"}
        new = pool.views(ledger).get("worker-1")
        assert new is not None and new.labels == {"zone": "b"}
    finally:
        await pool.close()
        await client.close()
