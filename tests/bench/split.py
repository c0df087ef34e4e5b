"""An Indexed Job split across two workers against the same Job on one worker: how much sooner it is done.

Local clusters (management, worker-1 and worker-2; each worker's Node and quota 4 cpu) with the process kubelet, the
manager in the bench's process. One run each, one after the other on the same clusters: INDEXES indexes of a cpu
each, every pod sleeping SECONDS. Split: parallelism 8 and ``multiqueue.dev/split: "true"``, which no worker runs
whole, so each worker runs a part of 4. Whole: parallelism 4, as much as one worker runs, on one worker. Figures go
to tests/bench/results.json under ``split/<indexes> indexes``.

Run: ``python -m tests.bench.split [--indexes N] [--seconds S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from multiqueue.api.types import JOBS
from multiqueue.kube.client import KubeClient
from multiqueue.local.config import LocalConfig
from multiqueue.local.up import LocalClusters
from tests.bench.common import RESULTS, record

WORKERS = ("worker-1", "worker-2")


def sweep(name: str, indexes: int, parallelism: int, seconds: float, split: bool) -> dict[str, Any]:
    annotations = {"multiqueue.dev/split": "true"} if split else {}
    container = {
        "name": "main",
        "image": "busybox:1.35",
        "command": ["sh", "-c", f"sleep {seconds}"],
        "resources": {"requests": {"cpu": "1"}},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "managedBy": "multiqueue.dev/dispatcher",
            "completionMode": "Indexed",
            "completions": indexes,
            "parallelism": parallelism,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


async def finished(client: KubeClient, name: str, within: float) -> dict[str, Any]:
    """The Job once Complete, followed on a watch."""
    async with asyncio.timeout(within):
        while True:
            items, version = await client.list(JOBS, "default", field_selector=f"metadata.name={name}")
            if items and _complete(items[0]):
                return items[0]
            async for event in client.watch(
                JOBS, "default", resource_version=version, field_selector=f"metadata.name={name}"
            ):
                if _complete(event["object"]):
                    return dict(event["object"])


def _complete(job: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


async def timed(client: KubeClient, body: dict[str, Any], within: float) -> tuple[float, dict[str, Any]]:
    began = time.perf_counter()
    await client.create(JOBS, body, "default")
    done = await finished(client, body["metadata"]["name"], within)
    return time.perf_counter() - began, done


async def main(indexes: int, seconds: float, results: Path) -> None:
    workers = [{"name": w, "capacity": {"resources": {"cpu": "4"}}} for w in WORKERS]
    config = LocalConfig.model_validate(
        {
            "clusters": [
                {"name": "management"},
                *({"name": w, "capacityCpu": 4} for w in WORKERS),
            ],
            "manager": {"workers": workers, "mirrorTTLSecondsAfterFinished": 0},
        }
    )
    within = max(120.0, indexes * seconds * 2)
    with tempfile.TemporaryDirectory(prefix="multiqueue-bench-split-") as folder:
        clusters = LocalClusters(config, Path(folder), disposable=True)
        await clusters.start()
        try:
            management = clusters.components["management"].client
            assert management is not None
            split_seconds, split_job = await timed(
                management, sweep("split", indexes, 8, seconds, True), within
            )
            whole_seconds, whole_job = await timed(
                management, sweep("whole", indexes, 4, seconds, False), within
            )
        finally:
            await clusters.stop(stop_pods=True)
    parts = (split_job["metadata"].get("annotations") or {}).get("multiqueue.dev/parts")
    record(
        f"split/{indexes} indexes",
        {
            "indexes": indexes,
            "pod_seconds": seconds,
            "split_seconds": round(split_seconds, 2),
            "whole_seconds": round(whole_seconds, 2),
            "whole_over_split": round(whole_seconds / split_seconds, 2),
            "split_parts": parts,
            "whole_worker": (whole_job["metadata"].get("labels") or {}).get("multiqueue.dev/cluster"),
            "note": "local clusters, process kubelet, each worker 4 cpu (Node and quota); split: parallelism 8 "
            "as two parts of 4; whole: parallelism 4 on one worker; create to Complete on the management "
            "cluster, one run each",
        },
        results,
    )


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--indexes", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--results", type=Path, default=RESULTS)
    return parser.parse_args()


if __name__ == "__main__":
    options = arguments()
    asyncio.run(main(options.indexes, options.seconds, options.results))
