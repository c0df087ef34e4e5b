"""What the kube/ layer costs: requests per second one client sustains against one local API server, the
client's own CPU per request (the server runs in a process of its own), and the memory an informer holds per
1,000 Jobs.

Run: ``python -m tests.bench.kube_client``; figures go to tests/bench/results.json.
"""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from typing import Any

from multiqueue.api.types import JOBS
from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.kube.config import load_credentials
from multiqueue.kube.informer import Informer
from tests.bench.common import ServerProcess, record

REQUESTS = 4000
CONCURRENCY = 32
JOB_COUNT = 2000


def _job(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"job-{i}", "labels": {"bench": "yes"}},
        "spec": {
            "suspend": True,
            "completions": 3,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "echo hi"]}],
                }
            },
        },
    }


async def _client(server: ServerProcess) -> KubeClient:
    credentials = await load_credentials(
        config_dict={
            "clusters": [{"name": "b", "cluster": {"server": server.url}}],
            "users": [{"name": "b", "user": {"token": server.token}}],
            "contexts": [{"name": "b", "context": {"cluster": "b", "user": "b"}}],
            "current-context": "b",
        }
    )
    return KubeClient(credentials, "bench", ClientOptions(qps=0))


async def _rate(client: KubeClient, total: int, call: Any) -> tuple[float, float]:
    """Requests per second, and the client's CPU microseconds per request."""
    counter = iter(range(total))

    async def worker() -> None:
        for i in counter:
            await call(i)

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return total / (time.perf_counter() - started), (time.process_time() - cpu) / total * 1e6


async def main() -> None:
    server = ServerProcess()
    client = await _client(server)
    try:
        creates = await _rate(client, JOB_COUNT, lambda i: client.create(JOBS, _job(i), "default"))
        gets = await _rate(client, REQUESTS, lambda i: client.get(JOBS, f"job-{i % JOB_COUNT}", "default"))
        patches = await _rate(
            client,
            REQUESTS // 2,
            lambda i: client.patch(
                JOBS, f"job-{i % JOB_COUNT}", {"metadata": {"labels": {"n": str(i)}}}, "default"
            ),
        )
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        informer = Informer(client, JOBS, "default")
        informer.start()
        await informer.wait_for_sync()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
        await informer.stop()
    finally:
        await client.close()
        server.stop()
    record(
        "kube_client",
        {
            "concurrency": CONCURRENCY,
            "creates_per_s": round(creates[0], 1),
            "gets_per_s": round(gets[0], 1),
            "merge_patches_per_s": round(patches[0], 1),
            "client_cpu_us_per_create": round(creates[1]),
            "client_cpu_us_per_get": round(gets[1]),
            "client_cpu_us_per_merge_patch": round(patches[1]),
            "informer_jobs": JOB_COUNT,
            "informer_kib_per_1000_jobs": round(held / 1024 / (JOB_COUNT / 1000), 1),
        },
    )


if __name__ == "__main__":
    asyncio.run(main())
