"""Two managers on the same clusters, each with its own name and managedBy: each dispatches only its own Jobs,
exactly once, and neither touches the other's Jobs, mirrors or finalizers. And a mirror a worker refuses shows
as a Warning Event on the user's Job within seconds, with the worker's Job (if one is in the way) left alone.

The clusters (management, worker-1, worker-2) run in the test's process with simulated pods; the managers are
in-process :class:`Manager` objects, as ``multiqueue local up`` runs its own.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import os
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from multiqueue.api.types import CONFIGMAPS, EVENTS, JOBS, NAMESPACES, PODS
from multiqueue.dispatch.manager import Manager
from multiqueue.dispatch.mirror import (
    CLUSTER_LABEL,
    CLUSTER_SELECTOR_ANNOTATION,
    FINALIZER_PREFIX,
    ORIGIN_LABEL,
    ORIGIN_UID_ANNOTATION,
    PIN_LABEL,
)
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import Forbidden
from multiqueue.local.config import ControlPlane
from multiqueue.local.kubelet import SIMULATE_DURATION
from multiqueue.local.up import LocalClusters
from tests.e2e.conftest import BUSYBOX
from tests.support.dispatching import (
    Recorder,
    clients_of,
    events_about,
    finalizers,
    job_finished,
    key_of,
    labels,
    manager_config,
    start_clusters,
    told,
    until_all,
)

pytestmark = pytest.mark.e2e
Obj = dict[str, Any]

NAMESPACE = "default"
WORKERS = ("worker-1", "worker-2")
# name -> managedBy; each manager's finalizer is FINALIZER_PREFIX + its name.
MANAGERS = {"alpha": "example.com/alpha", "beta": "example.com/beta"}
JOBS_EACH = 50
# Of each manager, this many more run until deleted: their deletion must take their mirrors along.
DELETED_WHILE_RUNNING = 3
# A refused mirror shows as an Event within this many seconds.
EVENT_WITHIN = 5.0


@dataclasses.dataclass
class TwoManagers:
    clusters: LocalClusters
    clients: dict[str, KubeClient]
    managers: dict[str, Manager]

    @property
    def management(self) -> KubeClient:
        return self.clients["management"]


@pytest.fixture
async def two_managers(control_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[TwoManagers]:
    clusters = await start_clusters(tmp_path / "state", ["management", *WORKERS], control_plane=control_plane)
    managers: dict[str, Manager] = {}
    try:
        for name, managed_by in MANAGERS.items():
            config = manager_config(
                clusters,
                name,
                managed_by,
                {"worker-1": {"labels": {"region": "eu"}}, "worker-2": {"labels": {"region": "us"}}},
                # These scenarios count each finished Job's release: its mirror goes at once.
                mirrorTTLSecondsAfterFinished=0,
            )
            managers[name] = Manager(config)
            await managers[name].start()
        yield TwoManagers(clusters, clients_of(clusters), managers)
    finally:
        for manager in managers.values():
            await manager.stop()
        await clusters.stop()


def simulated_job(name: str, managed_by: str, seconds: float, namespace: str = NAMESPACE) -> Obj:
    """A Job of one pod, run once (no retries), whose pod the simulating kubelet ends after ``seconds``."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "managedBy": managed_by,
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {SIMULATE_DURATION: f"{seconds:.2f}"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": BUSYBOX}]},
            },
        },
    }


def owner_of(name: str) -> str:
    """The manager a Job of this test belongs to, by its name's prefix."""
    return name.split("-", 1)[0]


def dispatcher_trouble(records: list[logging.LogRecord]) -> list[str]:
    """Log records of the dispatchers that carry a traceback, are errors, or say a sync failed."""
    found = []
    for record in records:
        message = record.getMessage()
        ours = record.name.startswith("multiqueue.dispatch") or (
            record.name == "multiqueue.loop.reconcile" and message.startswith("dispatcher")
        )
        traceback = record.exc_info is not None or bool(record.exc_text)
        failed = record.levelno >= logging.ERROR or ("syncing" in message and "failed" in message)
        if ours and (traceback or failed):
            found.append(f"{record.levelname} {record.name}: {message}")
    return found


async def test_two_managers_each_dispatch_only_their_own_jobs_exactly_once(two_managers: TwoManagers) -> None:
    env = two_managers
    management = env.management
    seed = int(os.environ.get("MULTIQUEUE_TWO_MANAGERS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"\nseed {seed} (set MULTIQUEUE_TWO_MANAGERS_SEED to repeat this run)")

    users = Recorder(management, JOBS, NAMESPACE, name="user Jobs")
    # Every Job on the workers, not only those with an origin label: a mirror without one would show here too.
    worker_jobs = {w: Recorder(env.clients[w], JOBS, name=f"Jobs on {w}") for w in WORKERS}
    worker_pods = {w: Recorder(env.clients[w], PODS, name=f"pods on {w}") for w in WORKERS}
    recorders = [users, *worker_jobs.values(), *worker_pods.values()]
    for recorder in recorders:
        await recorder.start()
    try:
        started = time.monotonic()
        completing = [f"{m}-{i:03d}" for i in range(JOBS_EACH) for m in MANAGERS]
        long_running = [f"{m}-long-{i}" for i in range(DELETED_WHILE_RUNNING) for m in MANAGERS]
        bodies = [simulated_job(n, MANAGERS[owner_of(n)], rng.uniform(0.0, 0.5)) for n in completing]
        bodies += [simulated_job(n, MANAGERS[owner_of(n)], 600.0) for n in long_running]
        # Nobody's: a managedBy neither manager handles (and no Job controller either).
        bodies.append(simulated_job("gamma-000", "example.com/gamma", 0.0))
        rng.shuffle(bodies)
        for start in range(0, len(bodies), 20):
            await asyncio.gather(*(management.create(JOBS, b, NAMESPACE) for b in bodies[start : start + 20]))
        created = time.monotonic()

        def latest(name: str) -> Obj | None:
            return users.latest.get(f"{NAMESPACE}/{name}")

        def mirror_of(name: str) -> tuple[str, Obj] | None:
            for worker, recorder in worker_jobs.items():
                found = recorder.latest.get(f"{NAMESPACE}/{name}")
                if found is not None:
                    return worker, found
            return None

        def settled() -> bool:
            done = all(
                (job := latest(n)) is not None and job_finished(job) and not finalizers(job)
                for n in completing
            )
            running = all(
                (m := mirror_of(n)) is not None and int((m[1].get("status") or {}).get("active") or 0) == 1
                for n in long_running
            )
            return done and running

        def unsettled() -> str:
            waiting = [
                n
                for n in completing
                if (job := latest(n)) is None or not job_finished(job) or finalizers(job)
            ]
            shown = {n: (latest(n) or {}).get("status") for n in waiting[:5]}
            return f"{len(waiting)} Jobs not finished and released, e.g. {shown}"

        await until_all(recorders, settled, 120, unsettled)
        finished_at = time.monotonic()

        # Deleted while running: each goes, and its mirror with it.
        for name in long_running:
            await management.delete(JOBS, name, NAMESPACE, propagation="Background")
        await until_all(
            recorders,
            lambda: all(latest(n) is None and mirror_of(n) is None for n in long_running),
            60,
            "the Jobs deleted while running, and their mirrors, are gone",
        )

        # --- every Job ran exactly once, through its own manager ---------------------------------------------
        uids = {key_of(o): o["metadata"]["uid"] for t, o in users.events if t == "ADDED"}
        mirrors: dict[str, list[tuple[str, Obj]]] = collections.defaultdict(list)
        unlabelled = []
        for worker, recorder in worker_jobs.items():
            for mirror in recorder.added():
                if ORIGIN_LABEL not in labels(mirror):
                    unlabelled.append(f"{worker}:{key_of(mirror)}")
                mirrors[key_of(mirror)].append((worker, mirror))
        assert unlabelled == [], "Jobs on the workers that carry no origin label"
        ever = {k: [w for w, _ in m] for k, m in mirrors.items()}
        not_once = {
            n: ever.get(f"{NAMESPACE}/{n}", [])
            for n in [*completing, *long_running]
            if len(ever.get(f"{NAMESPACE}/{n}", [])) != 1
        }
        assert not_once == {}, (
            f"Jobs that did not get exactly one mirror ever (workers of each mirror): {not_once}"
        )
        assert f"{NAMESPACE}/gamma-000" not in mirrors, "a Job of neither manager was mirrored"
        wrong_origin = {}
        for name in [*completing, *long_running]:
            ((worker, mirror),) = mirrors[f"{NAMESPACE}/{name}"]
            origin = labels(mirror)[ORIGIN_LABEL]
            origin_uid = (mirror["metadata"].get("annotations") or {}).get(ORIGIN_UID_ANNOTATION)
            if origin != owner_of(name) or origin_uid != uids[f"{NAMESPACE}/{name}"]:
                wrong_origin[name] = (worker, origin, origin_uid)
        assert wrong_origin == {}, (
            "mirrors whose origin label or origin UID is not their own manager's / Job's"
        )

        pods: dict[str, int] = collections.Counter()
        for recorder in worker_pods.values():
            for pod in recorder.added():
                pods[labels(pod).get("batch.kubernetes.io/job-name", "?")] += 1
        not_one_pod = {n: pods.get(n, 0) for n in [*completing, *long_running] if pods.get(n, 0) != 1}
        assert not_one_pod == {}, "Jobs whose pod did not run exactly once (pods made for each)"
        for name in completing:
            job = latest(name)
            assert job is not None
            status = job.get("status") or {}
            assert (status.get("succeeded"), status.get("failed", 0)) == (1, 0), f"{name}: {status}"

        # --- each user Job carried only its own manager's finalizer, and the Job of neither none ---------------
        foreign_finalizers = set()
        placed_by_owner = set()
        for _, job in users.events:
            name = job["metadata"]["name"]
            own = FINALIZER_PREFIX + owner_of(name)
            for finalizer in finalizers(job):
                if finalizer.startswith(FINALIZER_PREFIX) and finalizer != own:
                    foreign_finalizers.add((name, finalizer))
                if finalizer == own:
                    placed_by_owner.add(name)
        assert foreign_finalizers == set(), "user Jobs that carried another manager's finalizer"
        never_placed = sorted({*completing, *long_running} - placed_by_owner)
        assert never_placed == [], "user Jobs never given their own manager's finalizer"
        gamma = latest("gamma-000")
        assert gamma is not None
        assert (finalizers(gamma), labels(gamma).get(CLUSTER_LABEL), gamma.get("status") or {}) == (
            [],
            None,
            {},
        ), "the Job of neither manager was touched"
        assert all(t == "ADDED" for t, o in users.events if o["metadata"]["name"] == "gamma-000")

        # --- deleting the user Jobs leaves nothing behind -------------------------------------------------------
        for name in completing:
            await management.delete(JOBS, name, NAMESPACE, propagation="Background")
        await until_all(
            recorders,
            lambda: (
                set(users.latest) == {f"{NAMESPACE}/gamma-000"}
                and not any(
                    labels(j).get(ORIGIN_LABEL) for r in worker_jobs.values() for j in r.latest.values()
                )
            ),
            60,
            "the user Jobs and every mirror are gone",
        )
        for worker in WORKERS:
            left, _ = await env.clients[worker].list(JOBS, None, label_selector=ORIGIN_LABEL)
            assert left == [], f"mirrors left on {worker}"
        left_users, _ = await management.list(JOBS, NAMESPACE)
        assert [j["metadata"]["name"] for j in left_users] == ["gamma-000"]
        print(
            f"{len(bodies)} Jobs created in {created - started:.1f} s; the {len(completing)} completing ones "
            f"finished and released {finished_at - created:.1f} s later; all cleaned up "
            f"{time.monotonic() - finished_at:.1f} s after that"
        )
    finally:
        for recorder in recorders:
            await recorder.stop()


async def test_a_job_in_the_way_on_the_worker_is_a_mirror_conflict_and_is_left_alone(
    two_managers: TwoManagers, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="multiqueue")
    env = two_managers
    management, worker = env.management, env.clients["worker-1"]
    # On worker-1, a Job of that name that multiqueue did not make; no controller there runs it (its managedBy
    # is someone else's), so nothing but a dispatcher could change it.
    foreign_body = simulated_job("clash", "example.com/someone-else", 0.0)
    foreign = await worker.create(JOBS, foreign_body, NAMESPACE)
    events = Recorder(management, EVENTS, NAMESPACE, name="Events")
    users = Recorder(management, JOBS, NAMESPACE, name="user Jobs")
    on_worker = {w: Recorder(env.clients[w], JOBS, NAMESPACE, name=f"Jobs on {w}") for w in WORKERS}
    recorders = [events, users, *on_worker.values()]
    for recorder in recorders:
        await recorder.start()
    try:
        body = simulated_job("clash", MANAGERS["alpha"], 0.0)
        body["metadata"]["labels"] = {PIN_LABEL: "worker-1"}
        submitted = time.monotonic()
        user = await management.create(JOBS, body, NAMESPACE)
        await events.until(
            lambda: events_about(events, "clash", ["MirrorConflict"]) != [],
            EVENT_WITHIN,
            lambda: f"a MirrorConflict Event; Events so far: {_reasons(events, 'clash')}",
        )
        seconds = time.monotonic() - submitted
        print(f"\nMirrorConflict Event {seconds:.2f} s after the Job was created")
        (conflict,) = events_about(events, "clash", ["MirrorConflict"])
        assert conflict["type"] == "Warning"
        assert conflict["involvedObject"]["uid"] == user["metadata"]["uid"]
        assert "worker-1" in conflict["message"] and "did not create" in conflict["message"], conflict[
            "message"
        ]

        # What the manager decides next: the Job stays pinned to worker-1, so it waits, saying so again (the same
        # Warning, counted twice); it is not run elsewhere.
        await events.until(
            lambda: (
                told(events, "clash", "MirrorConflict") >= 2 or events_about(events, "clash", ["Dispatched"])
            ),
            EVENT_WITHIN,
            lambda: f"the conflict told again (or a Dispatched Event); so far: {_reasons(events, 'clash')}",
        )
        next_step = next(iter(events_about(events, "clash", ["Dispatched"])), conflict)
        moved = [key_of(j) for j in on_worker["worker-2"].added()]
        assert (next_step["reason"], moved) == ("MirrorConflict", []), (
            f"the Job pinned to worker-1 was dispatched elsewhere after the conflict: {next_step['reason']}: "
            f"{next_step['message']}; Jobs made on worker-2: {moved}; the user's Job now: labels "
            f"{labels(users.latest[f'{NAMESPACE}/clash'])}, finalizers {finalizers(users.latest[f'{NAMESPACE}/clash'])}"
        )

        # The Job in the way was never touched, by either manager.
        now = await worker.get(JOBS, "clash", NAMESPACE)
        for field in ("uid", "resourceVersion", "labels", "annotations", "finalizers"):
            assert now["metadata"].get(field) == foreign["metadata"].get(field), field
        assert now["spec"] == foreign["spec"]
        changes = [t for t, j in on_worker["worker-1"].events if j["metadata"]["name"] == "clash"]
        assert changes == ["LISTED"], f"the foreign Job changed: {changes}"
        assert not any(f != FINALIZER_PREFIX + "alpha" for _, j in users.events for f in finalizers(j)), (
            "another manager's finalizer on alpha's Job"
        )
        assert dispatcher_trouble(caplog.records) == []
    finally:
        for recorder in recorders:
            await recorder.stop()


async def test_a_mirror_the_worker_refuses_is_a_mirror_rejected_event_and_the_job_waits(
    two_managers: TwoManagers, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="multiqueue")
    env = two_managers
    management, worker = env.management, env.clients["worker-1"]
    doomed = "doomed"
    await management.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": doomed}}
    )
    # On worker-1 the namespace is being deleted, held back by an object with a finalizer: the worker refuses
    # anything new there with 403 Forbidden, as kube-apiserver does.
    await worker.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": doomed}})
    held = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]},
    }
    await worker.create(CONFIGMAPS, held, doomed)
    await worker.delete(NAMESPACES, doomed)
    terminating = await worker.get(NAMESPACES, doomed)
    assert terminating["metadata"].get("deletionTimestamp"), terminating
    with pytest.raises(Forbidden):  # the refusal the manager meets is the worker's own
        await worker.create(JOBS, simulated_job("probe", "example.com/nobody", 0.0, doomed), doomed)

    events = Recorder(management, EVENTS, doomed, name="Events")
    users = Recorder(management, JOBS, doomed, name="user Jobs")
    on_worker = {w: Recorder(env.clients[w], JOBS, doomed, name=f"Jobs on {w}") for w in WORKERS}
    recorders = [events, users, *on_worker.values()]
    for recorder in recorders:
        await recorder.start()
    try:
        body = simulated_job("refused", MANAGERS["alpha"], 0.0, doomed)
        body["metadata"]["annotations"] = {CLUSTER_SELECTOR_ANNOTATION: "region=eu"}  # worker-1 only
        submitted = time.monotonic()
        user = await management.create(JOBS, body, doomed)
        await events.until(
            lambda: events_about(events, "refused", ["MirrorRejected"]) != [],
            EVENT_WITHIN,
            lambda: f"a MirrorRejected Event; Events so far: {_reasons(events, 'refused')}",
        )
        seconds = time.monotonic() - submitted
        print(f"\nMirrorRejected Event {seconds:.2f} s after the Job was created")
        (rejected,) = events_about(events, "refused", ["MirrorRejected"])
        assert rejected["type"] == "Warning"
        assert rejected["involvedObject"]["uid"] == user["metadata"]["uid"]
        message = rejected["message"]
        assert "worker-1" in message and "Forbidden" in message and "being terminated" in message, message

        # The placement is let go (no cluster label, no finalizer) and the Job waits, saying why.
        own = FINALIZER_PREFIX + "alpha"
        key = f"{doomed}/refused"
        await users.until(
            lambda: CLUSTER_LABEL not in labels(users.latest[key]) and not finalizers(users.latest[key]),
            EVENT_WITHIN,
            lambda: f"the placement let go; the Job now: {users.latest[key]['metadata']}",
        )
        assert any(own in finalizers(j) for _, j in users.events), "the Job was never placed"
        await events.until(
            lambda: (
                told(events, "refused", "MirrorRejected") >= 2
                or events_about(events, "refused", ["Dispatched"])
            ),
            EVENT_WITHIN,
            lambda: f"the refusal told again while it waits; so far: {_reasons(events, 'refused')}",
        )
        assert events_about(events, "refused", ["Dispatched"]) == [], "dispatched again within its back-off"
        assert [key_of(j) for r in on_worker.values() for j in r.added()] == [], "a mirror was made"
        assert not job_finished(users.latest[key]) and not (users.latest[key].get("status") or {}).get(
            "active"
        )
        assert not any(f != own for _, j in users.events for f in finalizers(j))
        trouble = dispatcher_trouble(caplog.records)
        assert trouble == [], "the dispatcher logged failures or tracebacks for a refused mirror"
    finally:
        for recorder in recorders:
            await recorder.stop()
        with contextlib.suppress(Exception):
            await worker.patch(CONFIGMAPS, "held", {"metadata": {"finalizers": None}}, doomed)


def _reasons(events: Recorder, name: str) -> list[str]:
    return [f"{e['type']} {e['reason']}: {e['message']}" for e in events_about(events, name)]
