"""The embedded Job controller at scale, with the simulate kubelet and 0 s pods.

Scenarios: one Indexed Job of 1,000 completions at parallelism 100, and 100 Jobs of 10 pods each. Figures: time
until every Job is Complete, pods created per second, and API requests per pod read from the server's metrics
(all clients: controller, kubelet and events).
Run: ``python -m tests.bench.job_controller``; figures go to tests/bench/results.json.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from multiqueue.api.types import JOBS
from multiqueue.local.config import LocalCluster, LocalConfig
from multiqueue.local.up import LocalClusters
from tests.bench.common import record


def _job(name: str, completions: int, parallelism: int, indexed: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "completions": completions,
        "parallelism": parallelism,
        "template": {
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
        },
    }
    if indexed:
        spec["completionMode"] = "Indexed"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


async def _scenario(jobs: list[dict[str, Any]], pods_total: int) -> dict[str, Any]:
    config = LocalConfig(clusters=[LocalCluster(name="bench", kubelet="simulate", capacity_pods=1000)])
    clusters = LocalClusters(config, Path(tempfile.mkdtemp(prefix="mq-bench-")))
    await clusters.start()
    try:
        server = clusters.servers["bench"]
        client = clusters.components["bench"].client
        assert client is not None
        before = server.metrics.total()
        started = time.perf_counter()
        await asyncio.gather(*(client.create(JOBS, j, "default") for j in jobs))
        remaining = {j["metadata"]["name"] for j in jobs}
        _listing, rv = await client.list(JOBS, "default")
        async with asyncio.timeout(900):
            while remaining:
                async for event in client.watch(JOBS, "default", resource_version=rv, timeout_seconds=60):
                    obj = event["object"]
                    rv = obj["metadata"]["resourceVersion"]
                    done = any(
                        c.get("type") == "Complete" and c.get("status") == "True"
                        for c in (obj.get("status") or {}).get("conditions", [])
                    )
                    if done:
                        remaining.discard(obj["metadata"]["name"])
                    if not remaining:
                        break
        elapsed = time.perf_counter() - started
        requests = server.metrics.total() - before
        components = clusters.components["bench"]
        assert components.kubelet_client is not None
        controller_requests = sum(client.requests.values())  # the controller's client also wrote the Jobs
        kubelet_requests = sum(components.kubelet_client.requests.values())
    finally:
        await clusters.stop(stop_pods=True)
    return {
        "seconds_to_complete": round(elapsed, 2),
        "pods_per_s": round(pods_total / elapsed, 1),
        "api_requests_per_pod": round(requests / pods_total, 2),
        "controller_requests_per_pod": round((controller_requests - len(jobs)) / pods_total, 2),
        "kubelet_requests_per_pod": round(kubelet_requests / pods_total, 2),
    }


async def main() -> None:
    indexed = await _scenario([_job("big", 1000, 100, indexed=True)], 1000)
    many = await _scenario([_job(f"small-{i}", 10, 10, indexed=False) for i in range(100)], 1000)
    record("job_controller", {"indexed_1000_parallelism_100": indexed, "jobs_100_of_10_pods": many})


if __name__ == "__main__":
    asyncio.run(main())
