"""``multiqueue local demo``: the whole system on one machine, once, with a summary a person can read.

Starts the default local clusters in a temporary state directory, submits an Indexed Job with multiqueue's
managedBy to the management cluster, follows it as the manager dispatches it to a worker and mirrors its status
back, and prints where it ran, its completions and how long it took. With ``control_plane="upstream"`` the same
clusters run on upstream etcd, kube-apiserver, kube-controller-manager and kube-scheduler (multiqueue/local/
upstream.py), and kube-controller-manager runs the dispatched Job on the worker.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from multiqueue.api import jobs
from multiqueue.api.meta import labels_of
from multiqueue.api.types import JOBS, Obj
from multiqueue.dispatch.mirror import CLUSTER_LABEL
from multiqueue.kube.client import KubeClient
from multiqueue.local.config import ControlPlane, LocalCluster, LocalConfig, LocalManager
from multiqueue.local.up import LocalClusters
from multiqueue.local.upstream import Binaries

DEMO_JOB: Obj = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "demo", "namespace": "default"},
    "spec": {
        "managedBy": "multiqueue.dev/dispatcher",
        "completionMode": "Indexed",
        "completions": 4,
        "parallelism": 2,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "command": ["sh", "-c", "echo index $JOB_COMPLETION_INDEX on $HOSTNAME"],
                    }
                ],
            }
        },
    },
}


async def _until(
    client: KubeClient,
    predicate: Callable[[Obj], bool],
    within: float,
    seen: Callable[[Obj], None] = lambda _: None,
) -> Obj:
    """The demo Job once ``predicate`` holds, watching it; ``seen`` is shown each version on the way."""
    async with asyncio.timeout(within):
        while True:
            current = await client.get(JOBS, "demo", "default")
            seen(current)
            if predicate(current):
                return current
            async for event in client.watch(
                JOBS,
                "default",
                field_selector="metadata.name=demo",
                resource_version=current["metadata"]["resourceVersion"],
                timeout_seconds=int(within),
            ):
                if event["type"] == "BOOKMARK":
                    continue
                seen(event["object"])
                if predicate(event["object"]):
                    return dict(event["object"])


def _progress(say: Callable[[str], None], worker: str) -> Callable[[Obj], None]:
    """Says the demo Job's counts each time they change, so a slow run shows it is moving."""
    said: list[tuple[int, int, int]] = []

    def seen(job: Obj) -> None:
        status = jobs.status_of(job)
        counts = (
            int(status.get("active") or 0),
            int(status.get("succeeded") or 0),
            int(status.get("failed") or 0),
        )
        if counts != (said[-1] if said else (0, 0, 0)):
            said.append(counts)
            active, succeeded, failed = counts
            say(f"  on {worker}: {active} running, {succeeded}/4 succeeded, {failed} failed")

    return seen


async def run_demo(
    state_dir: Path | None,
    say: Callable[[str], None],
    within: float = 120.0,
    *,
    control_plane: ControlPlane = "embedded",
    assets: Path | None = None,
    keep: bool = False,
) -> bool:
    """Run the demo; returns whether the Job completed. Upstream binaries that are missing raise
    :class:`~multiqueue.local.upstream.MissingBinaries` before anything is made. A temporary folder the demo made
    itself (no ``state_dir``) is removed at the end unless ``keep``; a folder the caller named stays."""
    if control_plane == "upstream":
        await asyncio.to_thread(Binaries.find, assets)
    folder = state_dir or Path(tempfile.mkdtemp(prefix="multiqueue-demo-"))
    config = LocalConfig(
        clusters=[LocalCluster(name=n) for n in ("management", "worker-1", "worker-2")],
        manager=LocalManager(),
        control_plane=control_plane,
    )
    clusters = LocalClusters(config, folder, assets=assets, say=say)
    started = time.monotonic()
    await clusters.start()
    try:
        kind = "upstream control planes" if control_plane == "upstream" else "embedded API servers"
        say(
            f"local clusters up in {time.monotonic() - started:.1f}s: management, worker-1, worker-2 ({kind}; "
            f"{folder})"
        )
        client = clusters.components["management"].client
        assert client is not None
        submitted = time.monotonic()
        await client.create(JOBS, DEMO_JOB, "default")
        say(
            "submitted Job default/demo (Indexed, 4 completions) with spec.managedBy: multiqueue.dev/dispatcher"
        )
        placed = await _until(client, lambda j: CLUSTER_LABEL in labels_of(j), within)
        worker = labels_of(placed)[CLUSTER_LABEL]
        say(f"dispatched to {worker} after {time.monotonic() - submitted:.2f}s")
        done = await _until(client, jobs.is_finished, within, _progress(say, worker))
        status = jobs.status_of(done)
        outcome = "Complete" if jobs.is_complete(done) else "Failed"
        say(
            f"summary: Job default/demo {outcome} on {worker}: {status.get('succeeded', 0)}/4 completions "
            f"(indexes {status.get('completedIndexes') or '-'}), {time.monotonic() - submitted:.2f}s from submit"
        )
        return outcome == "Complete"
    finally:
        await clusters.stop(stop_pods=True)
        if state_dir is None and not keep:
            await asyncio.to_thread(shutil.rmtree, folder, ignore_errors=True)
            say(f"removed {folder} (--keep keeps it)")
        elif state_dir is None:
            say(f"kept {folder}: its kubeconfig, logs and state")
