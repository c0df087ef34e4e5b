"""The dispatcher at scale: 1,000 Jobs submitted at once to the management cluster, workers simulating 0 s pods.

Figures: Jobs/s until all are Complete on the management cluster; dispatch latency (user Job seen -> mirror created)
and status sync latency (mirror Complete -> user Job Complete), p50/p99; API requests per Job on the management
cluster and on the workers, from the servers' request metrics.
Run: ``python -m tests.bench.dispatch``; figures go to tests/bench/results.json.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from multiqueue.api import jobs
from multiqueue.api.types import JOBS
from multiqueue.kube.client import KubeClient
from multiqueue.local.config import LocalCluster, LocalConfig, LocalManager
from multiqueue.local.up import LocalClusters
from tests.bench.common import record, summary_ms

JOBS_TOTAL = 1000


def _job(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"bench-{i}"},
        "spec": {
            "managedBy": "multiqueue.dev/dispatcher",
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
            },
        },
    }


async def _completions(client: KubeClient, names: set[str], seen: dict[str, float]) -> None:
    """Record when each named Job is first seen Complete on this cluster."""
    _, rv = await client.list(JOBS, "default")
    while len(seen) < len(names):
        async for event in client.watch(JOBS, "default", resource_version=rv, timeout_seconds=120):
            obj = event["object"]
            rv = obj["metadata"]["resourceVersion"]
            name = obj["metadata"]["name"]
            if name in names and name not in seen and event["type"] != "DELETED" and jobs.is_complete(obj):
                seen[name] = time.perf_counter()
            if len(seen) == len(names):
                return


async def main() -> None:
    clusters_config = LocalConfig(
        clusters=[
            LocalCluster(name=n, kubelet="simulate", capacity_pods=2000)
            for n in ("management", "worker-1", "worker-2")
        ],
        manager=LocalManager(),
    )
    clusters = LocalClusters(clusters_config, Path(tempfile.mkdtemp(prefix="mq-bench-")))
    await clusters.start()
    try:
        management = clusters.components["management"].client
        workers = {n: clusters.components[n].client for n in ("worker-1", "worker-2")}
        assert management is not None and all(workers.values()) and clusters.manager is not None
        before = {n: s.metrics.total() for n, s in clusters.servers.items()}
        names = {f"bench-{i}" for i in range(JOBS_TOTAL)}
        user_done: dict[str, float] = {}
        mirror_done: dict[str, float] = {}
        watchers = [asyncio.create_task(_completions(management, names, user_done))]
        per_worker: list[dict[str, float]] = [{}, {}]
        for client, seen in zip(workers.values(), per_worker, strict=True):
            watchers.append(asyncio.create_task(_watch_some(client, names, seen)))
        started = time.perf_counter()
        await asyncio.gather(*(management.create(JOBS, _job(i), "default") for i in range(JOBS_TOTAL)))
        async with asyncio.timeout(900):
            await watchers[0]
        elapsed = time.perf_counter() - started
        for task in watchers[1:]:
            task.cancel()
        for seen in per_worker:
            mirror_done.update(seen)
        sync_delays = [user_done[n] - mirror_done[n] for n in user_done if n in mirror_done]
        requests = {n: s.metrics.total() - before[n] for n, s in clusters.servers.items()}
        dispatcher = clusters.manager.dispatcher
        assert dispatcher is not None
        dispatch_delays = list(dispatcher.metrics.dispatch_latency)
        spread = dict(dispatcher.metrics.dispatched)
    finally:
        await clusters.stop(stop_pods=True)
    record(
        "dispatch",
        {
            "jobs": JOBS_TOTAL,
            "seconds_to_all_complete": round(elapsed, 2),
            "jobs_per_s": round(JOBS_TOTAL / elapsed, 1),
            "dispatch_latency": summary_ms(dispatch_delays),
            "status_sync_latency": summary_ms(sync_delays),
            "jobs_per_worker": spread,
            "api_requests_per_job_management": round(requests["management"] / JOBS_TOTAL, 2),
            "api_requests_per_job_workers": round(
                (requests["worker-1"] + requests["worker-2"]) / JOBS_TOTAL, 2
            ),
            "note": "server-side counts include the workers' Job controllers and kubelets and the bench's own creates",
        },
    )


async def _watch_some(client: KubeClient, names: set[str], seen: dict[str, float]) -> None:
    try:
        await _completions(client, names, seen)
    except asyncio.CancelledError:
        return


if __name__ == "__main__":
    asyncio.run(main())
