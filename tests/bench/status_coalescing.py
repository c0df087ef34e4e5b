"""Status coalescing: one mirror whose status changes 100 times within a second, and how many status writes the
manager makes on the user's Job for them.

A worker with no Job controller and no kubelet runs the mirror, so the only status changes are the bench's own:
100 writes to the mirror's status, spread over one second. Figures: the manager's status writes (PUT
``jobs/status`` on the management cluster, conflicts included) and the writes that changed the user's Job, and
whether the user's Job ends with the mirror's last status.
Run: ``python -m tests.bench.status_coalescing``; figures go to tests/bench/results.json.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from multiqueue.api.types import JOBS
from multiqueue.kube.client import KubeClient
from multiqueue.local.config import LocalCluster, LocalConfig, LocalManager
from multiqueue.local.up import LocalClusters
from tests.bench.common import record

CHANGES = 100
SPREAD_SECONDS = 1.0


def _job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "bursty"},
        "spec": {
            "managedBy": "multiqueue.dev/dispatcher",
            "parallelism": CHANGES,
            "completions": CHANGES,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
            },
        },
    }


async def _status_changes(client: KubeClient, rv: str, changes: list[float], stop: asyncio.Event) -> None:
    """When each change of the user's Job's status arrived."""
    last: Any = None
    async for event in client.watch(JOBS, "default", resource_version=rv, timeout_seconds=120):
        obj = event["object"]
        if obj["metadata"]["name"] == "bursty" and obj.get("status") != last:
            last = obj.get("status")
            changes.append(time.perf_counter())
        if stop.is_set():
            return


async def main() -> None:
    config = LocalConfig(
        clusters=[
            LocalCluster(name="management", kubelet="none"),
            LocalCluster(name="worker-1", kubelet="none", controllers=[]),
        ],
        manager=LocalManager(management="management", workers=["worker-1"]),
    )
    with tempfile.TemporaryDirectory() as state:
        clusters = LocalClusters(config, Path(state))
        await clusters.start()
        try:
            figures = await _measure(clusters)
        finally:
            await clusters.stop(stop_pods=True)
    record("status_coalescing", figures)


async def _measure(clusters: LocalClusters) -> dict[str, Any]:
    management = await KubeClient.connect(clusters.kubeconfig_path, "management")
    worker = await KubeClient.connect(clusters.kubeconfig_path, "worker-1")
    manager = clusters.manager
    assert manager is not None and manager.management is not None
    try:
        _, rv = await management.list(JOBS, "default")
        await management.create(JOBS, _job(), "default")
        mirror = None
        while mirror is None:
            found, _ = await worker.list(JOBS, "default")
            mirror = next((m for m in found if m["metadata"]["name"] == "bursty"), None)
        # The user's status after dispatch settles; count from here.
        await asyncio.sleep(1.0)
        changes: list[float] = []
        stop = asyncio.Event()
        _, rv = await management.list(JOBS, "default")
        watcher = asyncio.create_task(_status_changes(management, rv, changes, stop))
        writes_before = manager.management.requests["put"]
        started = time.perf_counter()
        status: dict[str, Any] = {}
        for i in range(1, CHANGES + 1):
            mirror = await worker.get(JOBS, "bursty", "default")
            status = {**(mirror.get("status") or {}), "active": CHANGES - i, "succeeded": i - 1, "ready": 0}
            status.setdefault("startTime", mirror["metadata"]["creationTimestamp"])
            await worker.update_status(JOBS, {**mirror, "status": status})
            await asyncio.sleep(max(0.0, started + i * SPREAD_SECONDS / CHANGES - time.perf_counter()))
        burst_seconds = time.perf_counter() - started
        # Let the last change come through, then count.
        deadline = time.perf_counter() + 10
        while time.perf_counter() < deadline:
            user = await management.get(JOBS, "bursty", "default")
            if (user.get("status") or {}).get("succeeded") == CHANGES - 1:
                break
            await asyncio.sleep(0.05)
        caught_up = time.perf_counter() - started
        await asyncio.sleep(1.0)
        stop.set()
        writes = manager.management.requests["put"] - writes_before
        watcher.cancel()
        user = await management.get(JOBS, "bursty", "default")
        return {
            "mirror_status_changes": CHANGES,
            "burst_seconds": round(burst_seconds, 2),
            "manager_status_writes": writes,
            "user_status_changes_seen": len(changes),
            "user_has_last_status": (user.get("status") or {}).get("succeeded") == CHANGES - 1,
            "last_change_reached_user_after_s": round(caught_up - burst_seconds, 2),
        }
    finally:
        await management.close()
        await worker.close()


if __name__ == "__main__":
    asyncio.run(main())
