"""The manager killed with SIGKILL at random points while it dispatches 200 Jobs, then started again: every Job
completes exactly once, with one mirror each, and nothing is left behind.

The manager runs as its own process (``multiqueue manager``), as in production; the clusters run in the test's
process with simulated pods so the run stays short.
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from multiqueue.api.types import JOBS
from multiqueue.dispatch.mirror import FINALIZER_PREFIX, ORIGIN_LABEL, ORIGIN_UID_ANNOTATION
from multiqueue.kube.client import KubeClient
from multiqueue.local.config import ControlPlane, LocalCluster, LocalConfig, LocalManager
from multiqueue.local.kubelet import SIMULATE_DURATION
from multiqueue.local.up import LocalClusters
from tests.e2e.conftest import BUSYBOX, condition

MIRROR_FINALIZER = FINALIZER_PREFIX + "multiqueue"  # the finalizer of the manager named multiqueue


pytestmark = pytest.mark.e2e
JOBS_COUNT = 200
KILLS = 4
Obj = dict[str, Any]


async def follow(
    client: KubeClient, selector: str | None, seen: list[tuple[str, Obj]], changed: asyncio.Event
) -> None:
    """Every watch event on Jobs of one cluster from now on, in order (resumed where it broke off)."""
    _, rv = await client.list(JOBS, None, label_selector=selector)
    while True:
        async for event in client.watch(
            JOBS, None, label_selector=selector, resource_version=rv, timeout_seconds=600
        ):
            obj = event["object"]
            rv = str(obj["metadata"].get("resourceVersion") or rv)
            if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                seen.append((event["type"], obj))
                changed.set()


def job(name: str, duration: float) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": "multiqueue.dev/dispatcher",
            "template": {
                "metadata": {"annotations": {SIMULATE_DURATION: f"{duration:.2f}"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": BUSYBOX}]},
            },
        },
    }


@pytest.fixture
async def simulated_clusters(control_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[LocalClusters]:
    config = LocalConfig(
        clusters=[LocalCluster(name=n, kubelet="simulate") for n in ("management", "worker-1", "worker-2")],
        manager=LocalManager(),
        control_plane=control_plane,
    )
    clusters = LocalClusters(config, tmp_path / "state")
    await clusters.start()
    try:
        assert clusters.manager is not None
        await clusters.manager.stop()  # the manager under test is a process of its own
        clusters.manager = None
        yield clusters
    finally:
        await clusters.stop(stop_pods=True)


async def test_manager_killed_at_random_points_loses_nothing_and_runs_nothing_twice(
    simulated_clusters: LocalClusters, tmp_path: Path
) -> None:
    clusters = simulated_clusters
    seed = int(os.environ.get("MULTIQUEUE_CRASH_SEED", random.randrange(1 << 30)))
    print(f"\nseed {seed} (set MULTIQUEUE_CRASH_SEED to repeat this run)")
    rng = random.Random(seed)
    # A finished Job's mirror goes at once, so that the release (mirror deleted, finalizer removed) is one of the
    # steps a kill can land in.
    config = clusters.manager_config().model_copy(
        update={"metrics_address": "127.0.0.1:0", "mirror_ttl_after_finished": 0.0}
    )
    config_path = tmp_path / "manager.yaml"
    config_path.write_text(yaml.safe_dump(config.model_dump(mode="json", by_alias=True)))
    clients = {name: c.client for name, c in clusters.components.items() if c.client is not None}
    management = clients["management"]

    user_events: list[tuple[str, Obj]] = []
    mirror_events: list[tuple[str, Obj]] = []
    progress = asyncio.Event()
    watchers = [asyncio.create_task(follow(management, None, user_events, progress))]
    watchers += [
        asyncio.create_task(follow(clients[w], f"{ORIGIN_LABEL}=multiqueue", mirror_events, asyncio.Event()))
        for w in ("worker-1", "worker-2")
    ]
    log = (tmp_path / "manager.log").open("ab")

    async def start_manager() -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "multiqueue",
            "manager",
            "--config",
            str(config_path),
            stdout=log,
            stderr=log,
        )

    try:
        names = [f"crash-{i:03d}" for i in range(JOBS_COUNT)]
        for start in range(0, JOBS_COUNT, 20):
            await asyncio.gather(
                *(
                    management.create(JOBS, job(n, rng.uniform(0.0, 1.0)), "default")
                    for n in names[start : start + 20]
                )
            )

        def settled() -> bool:
            latest: dict[str, Obj] = {}
            for _, obj in user_events:
                latest[obj["metadata"]["name"]] = obj
            return len(latest) == JOBS_COUNT and all(
                condition(j, "Complete") is not None
                and MIRROR_FINALIZER not in (j["metadata"].get("finalizers") or [])
                for j in latest.values()
            )

        # Each manager is killed after a random number of changes to the users' Jobs (placements, status
        # writes, finalizer releases), so each kill lands somewhere else in a Job's dispatch. A Job makes three
        # or more changes, so the kills all come before the end.
        gaps = [rng.randrange(5, 100) for _ in range(KILLS)]
        print(f"each manager killed after {gaps} changes of the users' Jobs")
        for gap in gaps:
            process = await start_manager()
            target = len(user_events) + gap
            async with asyncio.timeout(120):
                while len(user_events) < target and not settled():
                    progress.clear()
                    await progress.wait()
            process.kill()
            await process.wait()
        process = await start_manager()
        try:
            async with asyncio.timeout(240):
                while not settled():
                    progress.clear()
                    await progress.wait()
        finally:
            process.kill()
            await process.wait()

        users, _ = await management.list(JOBS, "default")
        assert len(users) == JOBS_COUNT
        for user in users:
            assert condition(user, "Complete") is not None and user["status"]["succeeded"] == 1, user[
                "metadata"
            ]["name"]
            assert not any(condition(user, t) for t in ("Failed", "FailureTarget"))
        # One mirror per Job, ever: count the distinct mirrors each user Job had on either worker.
        mirrors: dict[str, set[str]] = collections.defaultdict(set)
        for kind, mirror in mirror_events:
            if kind == "ADDED":
                mirrors[mirror["metadata"]["annotations"][ORIGIN_UID_ANNOTATION]].add(
                    mirror["metadata"]["uid"]
                )
        twice = {uid: len(m) for uid, m in mirrors.items() if len(m) != 1}
        assert twice == {}, "Jobs with more than one mirror"
        assert set(mirrors) == {u["metadata"]["uid"] for u in users}
        for worker in ("worker-1", "worker-2"):
            left, _ = await clients[worker].list(JOBS, None, label_selector=f"{ORIGIN_LABEL}=multiqueue")
            assert left == [], f"mirrors left on {worker}"
    finally:
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        log.close()
