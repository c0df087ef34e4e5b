"""Exactly once, under crashes: 300 dispatched Jobs, each of which leaves one marker line per run of its pod, while
``multiqueue local up`` (clusters, kubelets and manager at once) or the manager alone is SIGKILLed at random
points and started again. Every Job must complete, every marker file must hold exactly one line, and once the
users' Jobs are deleted nothing of multiqueue's may be left: no finalizer holding a Job, no mirror on a worker.

Everything runs as real processes: ``local up`` in its own process group (killed with ``os.killpg``), the manager
as ``multiqueue manager``. Pods run as local processes in sessions of their own, so they outlive a crash of
``local up`` the way containers outlive a kubelet restart; the restarted kubelet must take them over, not run
them again.

The kill points are counts of changes seen on a watch of the users' Jobs (created + placed + finished), drawn
from a seeded generator: ``MULTIQUEUE_EXACTLY_ONCE_SEED=<seed>`` repeats a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from multiqueue.api.types import JOBS
from multiqueue.kube.client import KubeClient
from multiqueue.kube.config import KubeconfigError
from multiqueue.kube.errors import AlreadyExists, NotFound, ServerError, TransportError
from multiqueue.local.config import ControlPlane
from tests.support.jobwatch import (
    ORIGIN_LABEL,
    JobsView,
    Obj,
    condition_true,
    finished,
    marker_job,
    not_exactly_once,
    our_finalizers,
    placed_on,
)
from tests.support.localup import LocalUp, ManagerProcess, clusters_config, manager_config

pytestmark = pytest.mark.e2e

JOBS_COUNT = 300
POD_SECONDS = 1
LOCAL_UP_CRASHES = 5
MANAGER_CRASHES = 10
WORKERS = ["worker-1", "worker-2"]
NAMESPACE = "default"
# Kill points stay below this share of all the changes a run makes, so each one is reached while work remains.
KILL_RANGE = 0.85
SETTLE_TIMEOUT = 120.0
CREATE_BATCH = 25


def seeded(what: str) -> random.Random:
    seed = int(os.environ.get("MULTIQUEUE_EXACTLY_ONCE_SEED", random.randrange(1 << 30)))
    print(f"{what}: seed {seed} (MULTIQUEUE_EXACTLY_ONCE_SEED={seed} repeats this run)")
    return random.Random(seed)


def progress(view: JobsView) -> tuple[int, int, int]:
    """(created, placed on a worker, finished) among the users' Jobs."""
    return len(view.latest), view.count(lambda j: placed_on(j) is not None), view.count(finished)


def all_finished(view: JobsView) -> bool:
    return len(view.latest) == JOBS_COUNT and view.count(finished) == JOBS_COUNT


async def create_all(local: LocalUp, bodies: list[Obj]) -> None:
    """Create every Job, carrying on after each crash of the API server (a Job that exists counts as made)."""
    pending = list(bodies)
    while pending:
        await local.wait_ready()
        try:
            client = await local.connect("management")
        except (KubeconfigError, OSError):
            continue
        try:
            while pending:
                batch, rest = pending[:CREATE_BATCH], pending[CREATE_BATCH:]
                made = await asyncio.gather(*(_create(client, body) for body in batch))
                pending = [body for body, ok in zip(batch, made, strict=True) if not ok] + rest
                if not all(made):
                    break  # the server went away: wait for it to be back
        finally:
            await client.close()


async def _create(client: KubeClient, body: Obj) -> bool:
    try:
        await client.create(JOBS, body, NAMESPACE)
    except AlreadyExists:
        pass
    except (TransportError, ServerError):
        return False
    return True


async def reach(view: JobsView, target: int) -> None:
    """Wait until created + placed + finished reaches ``target`` (or every Job has finished)."""

    def reached() -> bool:
        return sum(progress(view)) >= target or all_finished(view)

    def missed() -> str:
        return f"(created, placed, finished) {progress(view)} to add up to {target}; {view.unfinished()}"

    await view.until(reached, within=SETTLE_TIMEOUT, what=missed)


async def crash_at_random_points(
    view: JobsView,
    rng: random.Random,
    crashes: int,
    crash: Callable[[], Awaitable[None]],
    restart: Callable[[], Awaitable[float]],
    what: str,
) -> list[str]:
    """Crash ``crashes`` times, each once the run's progress reaches a random count (and at least one change after
    the last restart, so no two crashes land at the same point); what the Jobs looked like at each."""
    points = sorted(rng.sample(range(5, int(3 * JOBS_COUNT * KILL_RANGE)), crashes))
    print(f"{what} crashed when created + placed + finished reaches {points}")
    seen = []
    for point in points:
        await reach(view, max(point, sum(progress(view)) + 1))
        if all_finished(view):
            seen.append("all finished before this crash")
            break
        created, placed, done = progress(view)
        await crash()
        restart_seconds = await restart()
        seen.append(f"created {created} placed {placed} finished {done} -> back in {restart_seconds:.1f} s")
    for line in seen:
        print(f"  {what} crash: {line}")
    return seen


async def check_outcome(local: LocalUp, view: JobsView, mirrors: dict[str, JobsView], names: list[str], markers: Path, mirrors_gone_within: float) -> None:  # fmt: skip
    """All Complete with one success, one marker line each; after deleting them, nothing of multiqueue's left."""
    jobs = dict(view.latest)
    assert sorted(jobs) == sorted(names), f"{len(jobs)} user Jobs, {len(set(names) - set(jobs))} missing"
    not_complete = {
        name: [c.get("type") for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
        for name, job in jobs.items()
        if not condition_true(job, "Complete") or (job.get("status") or {}).get("succeeded") != 1
    }  # fmt: skip
    twice = not_exactly_once(markers, names)
    assert not not_complete and not twice, (
        f"{len(not_complete)} Jobs not Complete with succeeded=1: {dict(sorted(not_complete.items())[:20])}\n"
        f"{twice or 'every Job ran exactly once'}"
    )

    client = await local.connect("management")
    try:
        for name in names:
            with contextlib.suppress(NotFound):
                await client.delete(JOBS, name, NAMESPACE, propagation="Background")
    finally:
        await client.close()
    try:
        await view.until(lambda: not view.latest, within=60, what="the users' Jobs to be gone")
    except AssertionError:
        held = {
            n: our_finalizers(j) or (j["metadata"].get("finalizers") or []) for n, j in view.latest.items()
        }
        raise AssertionError(
            f"{len(held)} user Jobs still exist 60 s after deletion; their finalizers: {dict(list(held.items())[:20])}"
        ) from None
    for worker, found in mirrors.items():
        try:
            await found.until(found.empty, within=mirrors_gone_within)
        except AssertionError:
            raise AssertionError(
                f"{len(found.latest)} mirror Jobs left on {worker} {mirrors_gone_within:.0f} s after the users' "
                f"Jobs were deleted: {sorted(found.latest)[:20]}"
            ) from None
    # A stale pod or mirror could still run after its Job completed: look again once everything is gone.
    late = not_exactly_once(markers, names)
    assert not late, f"after the Jobs completed and were deleted: {late}"
    duplicated = {n: len(u) for f in mirrors.values() for n, u in f.uids_seen.items() if len(u) > 1}
    print(f"mirror Jobs seen with more than one UID on one worker (re-created): {len(duplicated)}")


@pytest.fixture
async def markers(tmp_path: Path) -> Path:
    folder = tmp_path / "markers"
    folder.mkdir()
    return folder


@contextlib.asynccontextmanager
async def watching(local: LocalUp) -> AsyncIterator[tuple[JobsView, dict[str, JobsView]]]:
    """Views of the users' Jobs and of each worker's mirrors, kept across crashes of ``local up``."""
    view = JobsView(lambda: local.connect("management"), NAMESPACE, server_up=local.wait_ready)
    mirrors = {
        worker: JobsView(
            functools.partial(local.connect, worker),
            None,
            label_selector=ORIGIN_LABEL,
            server_up=local.wait_ready,
        )
        for worker in WORKERS
    }
    for each in (view, *mirrors.values()):
        each.start()
    try:
        yield view, mirrors
    finally:
        for each in (view, *mirrors.values()):
            await each.stop()


async def run_jobs_through_crashes(
    local: LocalUp,
    markers: Path,
    crashes: int,
    crash: Callable[[], Awaitable[None]],
    restart: Callable[[], Awaitable[float]],
    what: str,
    mirrors_gone_within: float,
) -> None:
    """Submit the Jobs, crash ``crashes`` times at random points while they run, then check the outcome."""
    began = time.monotonic()
    rng = seeded(f"{what} crashes")
    names = [f"once-{i:03d}" for i in range(JOBS_COUNT)]
    async with watching(local) as (view, mirrors):
        creating = asyncio.create_task(
            create_all(local, [marker_job(n, markers, seconds=POD_SECONDS) for n in names])
        )
        try:
            await crash_at_random_points(view, rng, crashes, crash, restart, what)
            await creating
            await view.until(
                lambda: all_finished(view),
                within=SETTLE_TIMEOUT,
                what=lambda: f"all {JOBS_COUNT} Jobs to finish: {view.unfinished()}",
            )
        finally:
            creating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await creating
        print(
            f"all {JOBS_COUNT} Jobs finished {time.monotonic() - began:.1f} s after the first was submitted"
        )
        await check_outcome(local, view, mirrors, names, markers, mirrors_gone_within)


async def test_local_up_killed_at_random_points_runs_every_job_exactly_once(
    control_plane: ControlPlane, tmp_path: Path, markers: Path
) -> None:
    began = time.monotonic()
    local = LocalUp(
        tmp_path,
        clusters_config("management", *WORKERS, manager_workers=WORKERS, control_plane=control_plane),
    )
    try:
        print(f"\nlocal up ready in {await local.start():.1f} s")
        # local up's manager sweeps orphan mirrors every 60 s (the default gcInterval).
        await run_jobs_through_crashes(
            local, markers, LOCAL_UP_CRASHES, local.crash, local.start, "local up", mirrors_gone_within=75
        )
    finally:
        left = await local.close()
        print(f"pod processes killed at teardown: {len(left)}; test took {time.monotonic() - began:.1f} s")


async def test_manager_killed_at_random_points_runs_every_job_exactly_once(
    control_plane: ControlPlane, tmp_path: Path, markers: Path
) -> None:
    began = time.monotonic()
    local = LocalUp(tmp_path, clusters_config("management", *WORKERS, control_plane=control_plane))
    manager: ManagerProcess | None = None
    try:
        await local.start()
        kubeconfig = local.kubeconfig
        workers = {w: (kubeconfig, w) for w in WORKERS}
        manager = ManagerProcess(
            tmp_path, manager_config(kubeconfig, workers, metricsAddress="127.0.0.1:0", gcInterval=5)
        )
        print(f"\nmanager ready in {await manager.start():.1f} s")
        await run_jobs_through_crashes(
            local, markers, MANAGER_CRASHES, manager.crash, manager.start, "manager", mirrors_gone_within=20
        )
    finally:
        if manager is not None:
            await manager.close()
        left = await local.close()
        print(f"pod processes killed at teardown: {len(left)}; test took {time.monotonic() - began:.1f} s")
