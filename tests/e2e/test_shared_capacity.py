"""One worker's capacity shared by two kinds: Jobs and the example JobGroups, dispatched by one manager, never
take more than the worker's maxJobs and cpu quota together, leave no slot idle while one of them waits, and a
freed slot goes to the waiting Job of highest priority first.

The clusters (management and worker-1, the only worker) run in the test's process with simulated pods. The
example kind has no controller of its own: :class:`JobGroupRunner` plays it on the worker, running each group's
Jobs through the worker's Job controller and kubelet.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final

import pytest

from multiqueue.api.types import EVENTS, JOBS, PRIORITY_CLASSES
from multiqueue.dispatch.manager import Manager
from multiqueue.dispatch.mirror import ORIGIN_LABEL
from multiqueue.kube.client import KubeClient
from multiqueue.local.config import ControlPlane
from multiqueue.local.kubelet import SIMULATE_DURATION
from multiqueue.local.up import LocalClusters
from tests.e2e.conftest import BUSYBOX
from tests.support.dispatching import (
    JOBGROUPS,
    JobGroupRunner,
    Recorder,
    clients_of,
    events_about,
    finished,
    install_jobgroup_crd,
    manager_config,
    merged,
    start_clusters,
    until_all,
)

pytestmark = pytest.mark.e2e
Obj = dict[str, Any]

NAMESPACE: Final = "default"
WORKER: Final = "worker-1"
NAME: Final = "shared"
MANAGED_BY: Final = "example.com/shared"
MAX_JOBS: Final = 3
CPU_QUOTA: Final = 2.0
ORIGIN: Final = f"{ORIGIN_LABEL}={NAME}"
SAMPLE_EVERY: Final = 0.1
# A Job waiting while its worker has room for it counts only when it stays so for longer than this (the time a
# finished mirror's status takes to reach the user's Job and free its slot, and a new Job to be seen).
GRACE: Final = 1.0
Kind = str  # "Job" or "JobGroup"
Key = tuple[Kind, str]  # (kind, name)


@dataclasses.dataclass
class SharedWorker:
    clusters: LocalClusters
    clients: dict[str, KubeClient]
    manager: Manager

    @property
    def management(self) -> KubeClient:
        return self.clients["management"]

    @property
    def worker(self) -> KubeClient:
        return self.clients[WORKER]


@pytest.fixture
async def shared_worker(control_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[SharedWorker]:
    """management and worker-1 with the JobGroup CRD; one manager dispatching Jobs and JobGroups to worker-1
    only, which takes MAX_JOBS of them and CPU_QUOTA cpu at once."""
    clusters = await start_clusters(tmp_path / "state", ["management", WORKER], control_plane=control_plane)
    manager: Manager | None = None
    try:
        clients = clients_of(clusters)
        await install_jobgroup_crd(clients)
        config = manager_config(
            clusters,
            NAME,
            MANAGED_BY,
            {WORKER: {"capacity": {"maxJobs": MAX_JOBS, "resources": {"cpu": f"{CPU_QUOTA:g}"}}}},
            kinds=["Job", "JobGroup"],
        )
        manager = Manager(config)
        await manager.start()
        yield SharedWorker(clusters, clients, manager)
    finally:
        if manager is not None:
            await manager.stop()
        await clusters.stop()


def pod_template(cpu: str, seconds: float, priority_class: str | None = None) -> Obj:
    spec: Obj = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": BUSYBOX, "resources": {"requests": {"cpu": cpu}}}],
    }
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {"metadata": {"annotations": {SIMULATE_DURATION: f"{seconds:.2f}"}}, "spec": spec}


def job(name: str, cpu: str, seconds: float, priority_class: str | None = None) -> Obj:
    """One pod asking ``cpu``, run once."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": MANAGED_BY,
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": 0,
            "template": pod_template(cpu, seconds, priority_class),
        },
    }


def jobgroup(name: str, replicas: int, cpu: str, seconds: float) -> Obj:
    """``replicas`` Jobs of one pod each, every pod asking ``cpu``."""
    return {
        "apiVersion": f"{JOBGROUPS.group}/{JOBGROUPS.version}",
        "kind": "JobGroup",
        "metadata": {"name": name},
        "spec": {
            "managedBy": MANAGED_BY,
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "parallelism": 1,
                            "completions": 1,
                            "backoffLimit": 0,
                            "template": pod_template(cpu, seconds),
                        }
                    },
                }
            ],
        },
    }


def cpu_of(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def resource_of(kind: Kind) -> Any:
    return JOBGROUPS if kind == "JobGroup" else JOBS


async def submit(client: KubeClient, body: Obj) -> Obj:
    return await client.create(resource_of(body["kind"]), body, NAMESPACE)


@dataclasses.dataclass
class Sample:
    at: float  # seconds since the run started
    running: list[str]  # unfinished mirrors on the worker (at least these)
    cpu: float
    waiting_while_free: list[str]  # waiting Jobs the worker had room for, in this sample


class Sampler:
    """Every SAMPLE_EVERY seconds, lists the unfinished mirrors on the worker (both kinds) and the user's Jobs
    waiting for one; records how many run and the cpu they ask, and which waiting Jobs the worker had room for.

    The two kinds are two LIST requests: the first kind is listed before and after the second, and a mirror
    counts as running only when both lists show it unfinished. So a sample never counts more than ran at the
    moment of the second kind's LIST (a mirror listed unfinished twice was unfinished in between).

    A waiting Job had room when the worker had a free slot and enough free cpu for each of the Jobs waiting
    longest at the highest priority (the ledger serves those first; a Job behind one that does not fit
    rightly waits)."""

    def __init__(
        self,
        management: KubeClient,
        worker: KubeClient,
        asked: dict[Key, float],
        held: Callable[[], list[str]] = list,
    ) -> None:
        self.management = management
        self.worker = worker
        self.asked = asked
        self.held = held  # what the manager holds the worker's capacity for, named in a violation's message
        self.samples: list[Sample] = []
        self.violations: list[str] = []
        self._since: dict[Key, float] = {}  # waiting while the worker had room, from then on
        self._reported: set[Key] = set()
        self._task: asyncio.Task[None] | None = None
        self._started = 0.0

    def start(self) -> None:
        self._started = time.monotonic()
        self._task = asyncio.create_task(self._run(), name="capacity sampler")

    async def stop(self) -> None:
        """Stop sampling (again: nothing); a sampler that broke fails the test here."""
        task, self._task = self._task, None
        if task is None:
            return
        if task.done():
            task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    def report(self) -> str:
        """What the samples show so far, for a failure message."""
        shown = "; ".join(self.violations[:5])
        return f"{len(self.samples)} samples, {len(self.violations)} Jobs waiting while the worker had room: {shown}"

    async def _run(self) -> None:
        while True:
            began = time.monotonic()
            await self.sample()
            # Sampling cadence, not waiting for a state: the next sample is due SAMPLE_EVERY after this one began.
            await asyncio.sleep(max(0.0, SAMPLE_EVERY - (time.monotonic() - began)))

    async def sample(self) -> None:
        jobs_before, _ = await self.worker.list(JOBS, NAMESPACE, label_selector=ORIGIN)
        groups, _ = await self.worker.list(JOBGROUPS, NAMESPACE, label_selector=ORIGIN)
        jobs_after, _ = await self.worker.list(JOBS, NAMESPACE, label_selector=ORIGIN)
        user_jobs, _ = await self.management.list(JOBS, NAMESPACE)
        user_groups, _ = await self.management.list(JOBGROUPS, NAMESPACE)
        now = time.monotonic() - self._started

        def unfinished(kind: Kind, objs: list[Obj]) -> set[Key]:
            return {(kind, o["metadata"]["name"]) for o in objs if not finished(kind, o)}

        running = (unfinished("Job", jobs_before) & unfinished("Job", jobs_after)) | unfinished(
            "JobGroup", groups
        )
        cpu = sum(self.asked.get(k, 0.0) for k in running)
        mirrored = {("Job", o["metadata"]["name"]) for o in [*jobs_before, *jobs_after]} | {
            ("JobGroup", o["metadata"]["name"]) for o in groups
        }
        waiting: dict[Key, str] = {}  # by creationTimestamp: all have the same priority here
        for kind, users in (("Job", user_jobs), ("JobGroup", user_groups)):
            for user in users:
                key = (kind, user["metadata"]["name"])
                spec = user.get("spec") or {}
                if spec.get("managedBy") != MANAGED_BY or spec.get("suspend") is True or finished(kind, user):
                    continue
                if key not in mirrored:
                    waiting[key] = str(user["metadata"]["creationTimestamp"])
        flagged: list[Key] = []
        if waiting and len(running) < MAX_JOBS:
            oldest = min(waiting.values())
            served_first = [k for k, created in waiting.items() if created == oldest]
            if all(cpu + self.asked[k] <= CPU_QUOTA + 1e-9 for k in served_first):
                flagged = served_first
        self.samples.append(
            Sample(now, sorted(f"{k}/{n}" for k, n in running), cpu, [f"{k}/{n}" for k, n in flagged])
        )
        for key in list(self._since):
            if key not in flagged:
                del self._since[key]
                self._reported.discard(key)
        for key in flagged:
            since = self._since.setdefault(key, now)
            if now - since > GRACE and key not in self._reported:
                self._reported.add(key)
                self.violations.append(
                    f"{key[0]}/{key[1]} waited from {since:.1f} s to {now:.1f} s while the worker ran "
                    f"{len(running)} of {MAX_JOBS} ({sorted(n for _, n in running)}) with {cpu:g} of "
                    f"{CPU_QUOTA:g} cpu and it asks {self.asked[key]:g}; the manager held it for {self.held()}"
                )


def over_capacity(
    history: list[tuple[str, str, Obj]], asked: dict[Key, float]
) -> tuple[list[str], int, float]:
    """Replaying every change of the mirrors on the worker in the cluster's order: each moment more than
    MAX_JOBS mirrors ran or they asked more than CPU_QUOTA cpu; and the most that ran and asked at once."""
    running: dict[Key, Obj] = {}
    problems: list[str] = []
    most_jobs, most_cpu = 0, 0.0
    for kind, type_, obj in history:
        key = (kind, obj["metadata"]["name"])
        if type_ == "DELETED" or finished(kind, obj):
            running.pop(key, None)
        else:
            running[key] = obj
        cpu = sum(asked.get(k, 0.0) for k in running)
        most_jobs, most_cpu = max(most_jobs, len(running)), max(most_cpu, cpu)
        if len(running) > MAX_JOBS or cpu > CPU_QUOTA + 1e-9:
            problems.append(
                f"resourceVersion {obj['metadata']['resourceVersion']}: {len(running)} mirrors asking {cpu:g} cpu "
                f"run at once: {sorted(f'{k}/{n}' for k, n in running)}"
            )
    return problems, most_jobs, most_cpu


async def test_jobs_and_jobgroups_share_the_worker_capacity_and_leave_no_slot_idle(
    shared_worker: SharedWorker,
) -> None:
    env = shared_worker
    management, worker = env.management, env.worker
    seed = int(os.environ.get("MULTIQUEUE_SHARED_CAPACITY_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"\nseed {seed} (set MULTIQUEUE_SHARED_CAPACITY_SEED to repeat this run)")

    # Jobs ask 500m (one pod), JobGroups 1 cpu (two pods of 500m): three Jobs fill the worker by count, two
    # JobGroups by cpu, one of each and one Job by both.
    waves: list[list[Obj]] = []
    for wave, (jobs_count, groups_count) in enumerate(((10, 5), (6, 3))):
        bodies = [job(f"job-{wave}-{i:02d}", "500m", rng.uniform(0.3, 1.2)) for i in range(jobs_count)]
        bodies += [
            jobgroup(f"group-{wave}-{i:02d}", 2, "500m", rng.uniform(0.4, 1.2)) for i in range(groups_count)
        ]
        rng.shuffle(bodies)
        waves.append(bodies)
    asked: dict[Key, float] = {}
    for body in (b for wave in waves for b in wave):
        pods = body["spec"]["replicatedJobs"][0]["replicas"] if body["kind"] == "JobGroup" else 1
        asked[(body["kind"], body["metadata"]["name"])] = pods * 0.5
    everything = set(asked)

    runner = JobGroupRunner(worker, NAMESPACE)
    users = {
        k: Recorder(management, resource_of(k), NAMESPACE, name=f"user {k}s") for k in ("Job", "JobGroup")
    }
    mirrors = {
        k: Recorder(worker, resource_of(k), NAMESPACE, label_selector=ORIGIN, name=f"{k} mirrors")
        for k in ("Job", "JobGroup")
    }
    recorders = [*users.values(), *mirrors.values()]
    dispatcher = env.manager.dispatcher
    assert dispatcher is not None
    sampler = Sampler(
        management, worker, asked, lambda: sorted(f"{k}/{n}" for k, n in dispatcher.ledger.placed_on(WORKER))
    )
    await runner.start()
    for recorder in recorders:
        await recorder.start()
    sampler.start()
    try:
        started = time.monotonic()

        def done(keys: set[Key]) -> set[Key]:
            return {
                (kind, name)
                for kind, name in keys
                if (user := users[kind].latest.get(f"{NAMESPACE}/{name}")) is not None
                and finished(kind, user)
            }

        first = waves[0]
        await asyncio.gather(*(submit(management, b) for b in first))
        first_keys = {(b["kind"], b["metadata"]["name"]) for b in first}
        # The second wave comes while the first is under way: some waiting, some running, slots freeing.
        await until_all(
            recorders,
            lambda: len(done(first_keys)) >= 6,
            60,
            lambda: f"6 of the first wave done: {done(first_keys)}; {sampler.report()}",
        )
        await asyncio.gather(*(submit(management, b) for b in waves[1]))
        await until_all(
            recorders,
            lambda: done(everything) == everything,
            90,
            lambda: f"everything done; not yet: {sorted(everything - done(everything))}; {sampler.report()}",
        )
        elapsed = time.monotonic() - started
        await sampler.stop()

        # Each finished as it should, on the worker, through exactly one mirror.
        failed = []
        for kind, name in sorted(everything):
            user = users[kind].latest[f"{NAMESPACE}/{name}"]
            good = "Completed" if kind == "JobGroup" else "Complete"
            if not any(
                c.get("type") == good and c.get("status") == "True" for c in user["status"]["conditions"]
            ):
                failed.append(f"{kind}/{name}: {user['status']}")
        assert failed == [], "Jobs or JobGroups that did not succeed"
        made: dict[Key, int] = {}
        for kind, recorder in mirrors.items():
            for mirror in recorder.added():
                key = (kind, mirror["metadata"]["name"])
                made[key] = made.get(key, 0) + 1
        assert {k: made.get(k, 0) for k in everything if made.get(k, 0) != 1} == {}, "mirrors made per Job"
        assert runner.failures == [], "the stand-in JobGroup controller failed"

        problems, most_jobs, most_cpu = over_capacity(merged(*mirrors.values()), asked)
        sampled_jobs = max(len(s.running) for s in sampler.samples)
        sampled_cpu = max(s.cpu for s in sampler.samples)
        idle = sum(1 for s in sampler.samples if s.waiting_while_free)
        print(
            f"{len(everything)} Jobs and JobGroups done in {elapsed:.1f} s; at once at most {most_jobs} mirrors "
            f"asking {most_cpu:g} cpu (every change), {sampled_jobs} asking {sampled_cpu:g} cpu "
            f"({len(sampler.samples)} samples); samples with a Job waiting while the worker had room for it: "
            f"{idle} (stretches up to {GRACE:g} s allowed)"
        )
        assert problems == [], "the worker ran more than its capacity"
        assert sampled_jobs <= MAX_JOBS and sampled_cpu <= CPU_QUOTA + 1e-9
        assert sampler.violations == [], "Jobs waited while the worker had room for them"
        assert len(sampler.samples) >= elapsed / SAMPLE_EVERY / 3, "the sampler fell far behind"
        # Both limits were reached, so both were put to the test.
        assert (most_jobs, most_cpu) == (MAX_JOBS, CPU_QUOTA), "the worker was never full"
    finally:
        await sampler.stop()
        for recorder in recorders:
            await recorder.stop()
        await runner.stop()


@dataclasses.dataclass(frozen=True)
class Round:
    """The worker filled by ``blockers`` (JobGroups of ``blocker_pods`` pods of 500m each); then a low- and a
    high-priority Job asking ``cpu`` wait. Freeing one blocker leaves room for exactly one of them: by
    ``bound`` (the count or the cpu)."""

    bound: str  # "jobs" or "cpu": what the worker runs out of
    blockers: int
    blocker_pods: int
    cpu: str


ROUNDS: Final = (
    Round("jobs", blockers=MAX_JOBS, blocker_pods=1, cpu="500m"),  # 3 of 3 Jobs, 1.5 of 2 cpu
    Round("cpu", blockers=2, blocker_pods=2, cpu="1"),  # 2 of 3 Jobs, 2 of 2 cpu
    Round("jobs", blockers=MAX_JOBS, blocker_pods=1, cpu="500m"),
    Round("cpu", blockers=2, blocker_pods=2, cpu="1"),
)


async def test_a_freed_slot_goes_to_the_higher_priority_job_first(shared_worker: SharedWorker) -> None:
    env = shared_worker
    management, worker = env.management, env.worker
    for client in (management, worker):  # the classes exist wherever the pods run, as on real clusters
        for name, value in (("low", 10), ("high", 1000)):
            await client.create(
                PRIORITY_CLASSES,
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                },
            )
    events = Recorder(management, EVENTS, NAMESPACE, name="Events")
    users = {
        k: Recorder(management, resource_of(k), NAMESPACE, name=f"user {k}s") for k in ("Job", "JobGroup")
    }
    mirrors = {
        k: Recorder(worker, resource_of(k), NAMESPACE, label_selector=ORIGIN, name=f"{k} mirrors")
        for k in ("Job", "JobGroup")
    }
    recorders = [events, *users.values(), *mirrors.values()]
    for recorder in recorders:
        await recorder.start()
    try:
        orders: list[tuple[str, ...]] = []
        for number, round_ in enumerate(ROUNDS):
            blockers = [f"blocker-{number}-{i}" for i in range(round_.blockers)]
            # Named so that every order but priority's (age, then name) would pick the low-priority Job first.
            low, high = f"job-{number}-a-low", f"job-{number}-b-high"
            # Blockers run until this test finishes them (no JobGroup controller runs them here); the two Jobs
            # run until deleted.
            for name in blockers:
                await submit(management, jobgroup(name, round_.blocker_pods, "500m", 0.0))
            await until_all(
                recorders,
                lambda: all(f"{NAMESPACE}/{b}" in mirrors["JobGroup"].latest for b in blockers),  # noqa: B023
                30,
                "every blocker running on the worker",
            )
            pending: dict[str, Obj] = {}
            for name, priority in ((low, "low"), (high, "high")):
                await submit(management, job(name, round_.cpu, 600.0, priority))
                await events.until(
                    lambda: events_about(events, name, ["Pending"]) != [],  # noqa: B023
                    30,
                    f"{name} waiting (a Pending Event)",
                )
                pending[name] = events_about(events, name, ["Pending"])[0]
            full = (
                f"jobs {MAX_JOBS}/{MAX_JOBS}"
                if round_.bound == "jobs"
                else f"cpu {CPU_QUOTA:g}/{CPU_QUOTA:g}"
            )
            for name, event in pending.items():
                expected = f"0/1 workers can take this Job: 1 has no capacity now ({WORKER}: {full})"
                assert event["message"] == expected, (name, event["message"])
            assert not any(f"{NAMESPACE}/{n}" in mirrors["Job"].latest for n in (low, high))

            # One blocker finishes: room for exactly one of the two.
            freed_at = time.monotonic()
            status = {
                "succeeded": round_.blocker_pods,
                "conditions": [{"type": "Completed", "status": "True"}],
            }
            await worker.patch(JOBGROUPS, blockers[0], {"status": status}, NAMESPACE, subresource="status")

            def started(names: tuple[str, ...]) -> list[str]:
                return [
                    m["metadata"]["name"] for m in mirrors["Job"].added() if m["metadata"]["name"] in names
                ]

            await until_all(recorders, lambda: started((low, high)) != [], 30, f"{high} or {low} started")  # noqa: B023
            seconds = time.monotonic() - freed_at
            first = started((low, high))
            assert first == [high], f"round {number}: mirrors made, in order: {first}"
            # The worker is full again: the low-priority Job goes on waiting, and starts once the next blocker ends.
            await worker.patch(JOBGROUPS, blockers[1], {"status": status}, NAMESPACE, subresource="status")
            await until_all(recorders, lambda: started((low, high)) == [high, low], 30, f"{low} started")  # noqa: B023
            orders.append(tuple(started((low, high))))
            print(
                f"round {number} ({round_.bound}): {high} started {seconds:.2f} s after a slot freed; then {low}"
            )

            # Clean slate for the next round.
            for name in [*blockers, low, high]:
                kind = "JobGroup" if name.startswith("blocker") else "Job"
                await management.delete(resource_of(kind), name, NAMESPACE, propagation="Background")
            await until_all(
                recorders,
                lambda: not any(r.latest for r in (*users.values(), *mirrors.values())),
                30,
                "the round's Jobs and mirrors gone",
            )
        assert orders == [(f"job-{n}-b-high", f"job-{n}-a-low") for n in range(len(ROUNDS))]
    finally:
        for recorder in recorders:
            await recorder.stop()
