"""``multiqueue status`` (from the clusters) and the running manager's read model (behind /metrics and the
dashboard) say the same of every worker: its health and what the Jobs placed there use of each limit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from multiqueue.api.types import JOBS
from multiqueue.dispatch import inspect
from multiqueue.dispatch.config import Capacity
from multiqueue.dispatch.generic import GenericJob
from multiqueue.dispatch.mirror import PIN_LABEL
from multiqueue.dispatch.readmodel import ReadModel
from tests.e2e.conftest import Clusters, has_condition, job_body

pytestmark = pytest.mark.e2e
MANAGED_BY = "multiqueue.dev/dispatcher"


class WorkersMoved:
    """Set whenever the read model says a Job or a worker changed."""

    def __init__(self) -> None:
        self.moved = asyncio.Event()

    def job_changed(self, adapter: GenericJob, job: dict[str, Any]) -> None:
        self.moved.set()

    def job_deleted(self, job: dict[str, Any]) -> None:
        self.moved.set()

    def workers_changed(self) -> None:
        self.moved.set()


async def until_running(model: ReadModel, worker: str, running: int) -> None:
    listener = WorkersMoved()
    subscription = model.subscribe(listener)
    try:
        async with asyncio.timeout(30):
            while {w.name: w.running for w in model.workers()}.get(worker) != running:
                listener.moved.clear()
                await listener.moved.wait()
    finally:
        subscription.cancel()


async def test_status_and_the_read_model_agree_on_workers(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    clusters.in_process("reads the read model of the manager running in the test's process")
    await clusters.set_capacity({"worker-1": Capacity(max_jobs=2, resources={"cpu": "2"})})
    local = clusters.in_process("reads the read model of the manager running in the test's process")
    assert local.manager is not None and local.manager.read_model is not None
    model = local.manager.read_model
    gate = clusters.gate("agree")
    body = job_body("agree", f"while [ ! -f {gate} ]; do sleep 0.1; done", managedBy=MANAGED_BY)
    body["metadata"]["labels"] = {PIN_LABEL: "worker-1"}
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    await clusters.client().create(JOBS, body, "default")
    await clusters.wait_for(JOBS, "default", "agree", lambda j: (j.get("status") or {}).get("active") == 1)
    await until_running(model, "worker-1", 1)

    config, contexts = clusters.reader()
    rows, _ = await inspect.status(config, contexts)
    assert [inspect.worker_row(s) for s in model.workers()] == rows
    by_name = {row.name: row for row in rows}
    assert by_name["worker-1"].capacity == {"jobs": (1.0, 2.0), "cpu": (0.5, 2.0)}
    assert by_name["worker-1"].active == "True"

    await gate.open()
    await clusters.wait_for(JOBS, "default", "agree", has_condition("Complete"))
    await until_running(model, "worker-1", 0)
    rows, _ = await inspect.status(config, contexts)
    assert [inspect.worker_row(s) for s in model.workers()] == rows
