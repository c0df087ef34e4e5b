"""The embedded Job and CronJob controllers end every scenario where kube-controller-manager ends it.

Users read a Job's conditions, counters and indexes, its pods and its Events to know what happened; the dispatcher
mirrors them between clusters. Each scenario of controller_scenarios.py runs in a namespace of its own on both
clusters at once; the test waits on watches until the scenario's end condition holds on each side, then compares
the final status (conditions by type, status and reason; counters; indexes), the pods by phase and the Events'
reasons. It prints ``N of M scenarios identical`` and every difference.

Run by hand against two running clusters (a kubeconfig each, context ``fidelity``)::

    python3 -m tests.fidelity.test_controllers EMBEDDED_KUBECONFIG UPSTREAM_KUBECONFIG [NAME ...]
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from multiqueue.api.types import CRONJOBS, EVENTS, JOBS, NAMESPACES, PODS, Resource
from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.kube.config import load_credentials
from tests.fidelity.conftest import CLUSTER, Pair
from tests.fidelity.controller_scenarios import SCENARIOS, Obj, Scenario

PREFIX = "ctl"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
JOB_TIMEOUT = 120.0  # from the start of the run to a Job scenario's end
CRON_TIMEOUT = 190.0  # two schedule times at most, and the Jobs they start
EVENT_GRACE = 10.0  # Events are written after the status that ends a scenario
SA_TIMEOUT = 30.0


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _conditions_true(job: Obj) -> set[str]:
    return {
        str(c.get("type"))
        for c in (job.get("status") or {}).get("conditions") or []
        if isinstance(c, dict) and c.get("status") == "True"
    }


def _finished(job: Obj) -> bool:
    return bool(_conditions_true(job) & {"Complete", "Failed"})


class Cluster:
    """One side: watches of Jobs, CronJobs, pods and Events in every namespace, kept as a cache; waiters are woken
    on every change."""

    KINDS: tuple[Resource, ...] = (JOBS, CRONJOBS, PODS, EVENTS)

    def __init__(self, client: KubeClient, marker_dir: Path) -> None:
        self.client = client
        self.name = client.name
        self.marker_dir = marker_dir
        self.objects: dict[str, dict[tuple[str, str], Obj]] = {r.plural: {} for r in self.KINDS}
        self.changed = asyncio.Event()
        self.ended: set[str] = set()
        # by a barrier's kind, the scenarios it waits for: those whose deadline is not later than its own, so that a
        # Job barrier does not wait on CronJob scenarios that may run past it
        self.awaited: dict[str, set[str]] = {}
        self.began = datetime.now(UTC)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        versions = await asyncio.gather(*(self._list(r) for r in self.KINDS))
        self._tasks = [
            asyncio.create_task(self._watch(r, v)) for r, v in zip(self.KINDS, versions, strict=True)
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _list(self, resource: Resource) -> str:
        items, version = await self.client.list(resource)
        for item in items:
            self._store(resource, "ADDED", item)
        return version

    def _store(self, resource: Resource, kind: str, obj: Obj) -> None:
        meta = _meta(obj)
        namespace = str(meta.get("namespace", ""))
        if not namespace.startswith(PREFIX + "-"):
            return
        key = (namespace, str(meta.get("name")))
        if kind == "DELETED":
            self.objects[resource.plural].pop(key, None)
        else:
            self.objects[resource.plural][key] = obj
        self.wake()

    def wake(self) -> None:
        old, self.changed = self.changed, asyncio.Event()
        old.set()

    async def _watch(self, resource: Resource, version: str) -> None:
        while True:
            async for event in self.client.watch(resource, resource_version=version, timeout_seconds=600):
                obj = event.get("object") or {}
                version = str(_meta(obj).get("resourceVersion") or version)
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    self._store(resource, str(event["type"]), obj)

    def in_namespace(self, resource: Resource, namespace: str) -> list[Obj]:
        return [o for (ns, _), o in self.objects[resource.plural].items() if ns == namespace]

    async def wait(self, what: str, predicate: Any, deadline: float) -> bool:
        """Until ``predicate()`` holds (True) or the monotonic ``deadline`` passes (False)."""
        while True:
            waiter = self.changed
            if predicate():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), min(remaining, 1.0))  # 1 s: clock-bound conditions


@dataclasses.dataclass
class Run:
    """One scenario on one side."""

    scenario: Scenario
    cluster: Cluster
    namespace: str
    log: list[str] = dataclasses.field(default_factory=list)
    timed_out: str = ""
    final: Obj = dataclasses.field(default_factory=dict)  # the summary, taken before cleaning up
    racy_seen: set[str] = dataclasses.field(default_factory=set)

    def freeze(self) -> None:
        self.final = self.summary()
        reasons = {str(e.get("reason")) for e in self.events()}
        self.racy_seen = reasons & set(self.scenario.racy_events)

    @property
    def resource(self) -> Resource:
        return JOBS if self.scenario.kind == "Job" else CRONJOBS

    @property
    def object_name(self) -> str:
        return self.scenario.name

    def obj(self) -> Obj | None:
        return self.cluster.objects[self.resource.plural].get((self.namespace, self.object_name))

    def pods(self) -> list[Obj]:
        return self.cluster.in_namespace(PODS, self.namespace)

    def jobs(self) -> list[Obj]:
        return self.cluster.in_namespace(JOBS, self.namespace)

    def events(self, kind: str | None = None, name: str | None = None) -> list[Obj]:
        kind = kind or self.scenario.kind
        name = name or self.object_name
        return [
            e
            for e in self.cluster.in_namespace(EVENTS, self.namespace)
            if (e.get("involvedObject") or {}).get("kind") == kind
            and (e.get("involvedObject") or {}).get("name") == name
        ]

    async def release(self) -> None:
        """Take the scenario's own finalizers off its object, so its namespace can go."""
        if self.scenario.finalizers and self.obj() is not None:
            patch = {"metadata": {"finalizers": None}}
            await self.cluster.client.patch(self.resource, self.object_name, patch, self.namespace)

    def event_reasons(self) -> list[str]:
        """The reasons of the object's Events, less those the scenario names as a matter of timing."""
        reasons = {str(e.get("reason")) for e in self.events()}
        return sorted(reasons - set(self.scenario.racy_events))

    def first_tick(self) -> datetime:
        began = self.cluster.began
        return began.replace(second=0, microsecond=0) + timedelta(minutes=1)

    def holds(self, condition: Obj) -> bool:
        """Every key of ``condition`` holds now (see controller_scenarios for their meaning)."""
        obj = self.obj()
        pods = self.pods()
        for key, want in condition.items():
            if key == "finished":
                ok = obj is not None and _finished(obj)
            elif key == "condition":
                ok = obj is not None and want in _conditions_true(obj)
            elif key == "running":
                running = [
                    p
                    for p in pods
                    if (p.get("status") or {}).get("phase") == "Running"
                    and not _meta(p).get("deletionTimestamp")
                ]
                ok = len(running) >= want
            elif key == "settled":
                status = (obj or {}).get("status") or {}
                ok = (
                    not status.get("active")
                    and not status.get("terminating")
                    and all((p.get("status") or {}).get("phase") in ("Succeeded", "Failed") for p in pods)
                )
            elif key == "job_gone":
                ok = obj is None
            elif key == "pods":
                ok = len(pods) == want
            elif key == "released":
                ok = all(TRACKING_FINALIZER not in (_meta(p).get("finalizers") or []) for p in pods)
            elif key == "orphaned":
                ok = all(not _meta(p).get("ownerReferences") for p in pods)
            elif key == "deleting":
                ok = obj is not None and bool(_meta(obj).get("deletionTimestamp"))
            elif key == "event":
                ok = any(e.get("reason") == want for e in self.events())
            elif key == "jobs_finished":
                ok = sum(1 for j in self.jobs() if _finished(j)) >= want
            elif key == "jobs_active":
                ok = obj is not None and len((obj.get("status") or {}).get("active") or []) >= want
            elif key == "jobs":
                ok = sum(1 for j in self.jobs() if not _meta(j).get("deletionTimestamp")) == want
            elif key == "jobs_ready":
                ok = sum(1 for j in self.jobs() if ((j.get("status") or {}).get("ready") or 0) >= 1) >= want
            elif key == "after_tick":
                ok = datetime.now(UTC) >= self.first_tick() + timedelta(seconds=want)
            elif key == "barrier":
                ok = self.cluster.ended >= self.cluster.awaited[self.scenario.kind]
            else:
                raise ValueError(f"unknown condition {key!r} in scenario {self.scenario.name}")
            if not ok:
                return False
        return True

    def substitute(self, value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("{marker}", str(self.cluster.marker_dir / f"{self.scenario.name}.marker"))
        if isinstance(value, dict):
            return {k: self.substitute(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.substitute(v) for v in value]
        return value

    async def create(self) -> None:
        client = self.cluster.client
        await client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        )
        if self.cluster.name == "upstream":
            # kube-apiserver refuses pods until the namespace's default ServiceAccount exists; without this wait the
            # Job controller's first creates could fail there and leave a FailedCreate Event the scenario is not about.
            await self._wait_for_service_account()
        body = {
            "apiVersion": "batch/v1",
            "kind": self.scenario.kind,
            "metadata": {"name": self.object_name, "namespace": self.namespace},
            "spec": self.substitute(self.scenario.spec),
        }
        if self.scenario.finalizers:
            body["metadata"]["finalizers"] = list(self.scenario.finalizers)
        await client.create(self.resource, body, self.namespace)

    async def _wait_for_service_account(self) -> None:
        client = self.cluster.client
        deadline = time.monotonic() + SA_TIMEOUT
        path = f"/api/v1/namespaces/{self.namespace}/serviceaccounts"
        async for event in client.watch(
            Resource("", "v1", "serviceaccounts", "ServiceAccount"),
            self.namespace,
            field_selector="metadata.name=default",
            timeout_seconds=int(SA_TIMEOUT),
        ):
            if event.get("type") == "ADDED":
                return
            if time.monotonic() > deadline:
                break
        raise AssertionError(f"upstream: no default ServiceAccount in {path} within {SA_TIMEOUT:g}s")

    async def act(self, operation: Obj) -> None:
        client = self.cluster.client
        if "patch" in operation:
            await client.patch(self.resource, self.object_name, operation["patch"], self.namespace)
        elif "delete" in operation:
            await client.delete(
                self.resource, self.object_name, self.namespace, propagation=operation["delete"]
            )
        elif "delete_pod" in operation:
            running = [p for p in self.pods() if (p.get("status") or {}).get("phase") == "Running"]
            await client.delete(PODS, str(_meta(running[0])["name"]), self.namespace)
        elif "relabel_pod" in operation:
            running = [p for p in self.pods() if (p.get("status") or {}).get("phase") == "Running"]
            labels = {"metadata": {"labels": operation["relabel_pod"]}}
            await client.patch(PODS, str(_meta(running[0])["name"]), labels, self.namespace)
        elif "unown_pod" in operation:
            running = [p for p in self.pods() if (p.get("status") or {}).get("phase") == "Running"]
            remove = [{"op": "remove", "path": "/metadata/ownerReferences"}]
            await client.patch(
                PODS, str(_meta(running[0])["name"]), remove, self.namespace, patch_type="json"
            )
        else:
            raise ValueError(f"unknown operation {operation!r} in scenario {self.scenario.name}")
        self.log.append(f"did {json.dumps(operation)}")

    async def play(self, deadline: float) -> None:
        """Create, act on each step's condition, and wait for the end condition (or the deadline)."""
        try:
            await self.create()
            for step in self.scenario.steps:
                if not await self.cluster.wait("step", lambda s=step: self.holds(s["when"]), deadline):
                    self.timed_out = f"step {json.dumps(step['when'])} never held"
                    return
                await self.act(step["do"])
            if not await self.cluster.wait("end", lambda: self.holds(self.scenario.until), deadline):
                self.timed_out = f"end {json.dumps(self.scenario.until)} never held"
            if self.scenario.kind == "CronJob":
                # No further schedule time may add Jobs between the end and the comparison.
                await self.cluster.client.patch(
                    CRONJOBS, self.object_name, {"spec": {"suspend": True}}, self.namespace
                )
        finally:
            self.cluster.ended.add(self.scenario.name)
            self.cluster.wake()

    # --- what is compared ---------------------------------------------------------------------------------------

    def summary(self) -> Obj:
        if self.scenario.kind == "Job":
            result = _job_summary(self.obj())
            result["pods"] = _pod_summary(self.pods())
            result["events"] = self.event_reasons()
            return result
        cronjob = self.obj() or {}
        status = cronjob.get("status") or {}
        jobs = sorted(self.jobs(), key=lambda j: str((j.get("status") or {}).get("startTime") or "~"))
        return {
            "status keys": sorted(status),
            "active": len(status.get("active") or []),
            "jobs": [_job_summary(j, cron=True) for j in jobs],
            "pods": _pod_summary(self.pods()),
            "events": self.event_reasons(),
            "job events": sorted(
                {
                    str(e.get("reason"))
                    for e in self.cluster.in_namespace(EVENTS, self.namespace)
                    if (e.get("involvedObject") or {}).get("kind") == "Job"
                }
            ),
        }


def _job_summary(job: Obj | None, cron: bool = False) -> Obj:
    if job is None:
        return {"exists": False}
    status = job.get("status")
    result: Obj = {"exists": True, "status": "absent" if status is None else "present"}
    status = status or {}
    result["status keys"] = sorted(status)
    result["conditions"] = sorted(
        (str(c.get("type")), str(c.get("status")), str(c.get("reason")))
        for c in status.get("conditions") or []
        if isinstance(c, dict)
    )
    for field in (
        "succeeded",
        "failed",
        "active",
        "ready",
        "terminating",
        "completedIndexes",
        "failedIndexes",
    ):
        result[field] = status.get(field)
    result["uncountedTerminatedPods"] = status.get("uncountedTerminatedPods")
    if cron:
        result["deleting"] = bool(_meta(job).get("deletionTimestamp"))
        scheduled = str((_meta(job).get("annotations") or {}).get(SCHEDULED_ANNOTATION, ""))
        result["scheduled offset"] = scheduled[19:] if len(scheduled) > 19 else scheduled
    return result


def _pod_summary(pods: Sequence[Obj]) -> Obj:
    phases = collections.Counter(
        str((p.get("status") or {}).get("phase")) + (" deleting" if _meta(p).get("deletionTimestamp") else "")
        for p in pods
    )
    tracked = sum(1 for p in pods if TRACKING_FINALIZER in (_meta(p).get("finalizers") or []))
    return {"phases": dict(sorted(phases.items())), "tracking finalizer": tracked}


@dataclasses.dataclass
class Outcome:
    pairs: list[tuple[Run, Run]]
    seconds: float

    def differences(self) -> list[tuple[str, list[str]]]:
        found = []
        for ours, theirs in self.pairs:
            lines = []
            for run in (ours, theirs):
                if run.timed_out:
                    lines.append(f"{run.cluster.name}: {run.timed_out}")
            a, b = ours.final, theirs.final
            for key in sorted(set(a) | set(b)):
                if a.get(key) != b.get(key):
                    lines.append(
                        f"{key}: embedded {json.dumps(a.get(key))} / upstream {json.dumps(b.get(key))}"
                    )
            if lines:
                found.append((ours.scenario.name, lines))
        return found

    def report(self) -> str:
        wrong = self.differences()
        total = len(self.pairs)
        lines = [f"{total - len(wrong)} of {total} scenarios identical ({self.seconds:.1f}s)"]
        for ours, theirs in self.pairs:
            for reason in ours.scenario.racy_events:
                seen = [r.cluster.name for r in (ours, theirs) if reason in r.racy_seen]
                lines.append(
                    f"  ({ours.scenario.name}: {reason} not compared, a matter of timing; seen on {seen})"
                )
        for name, diffs in wrong:
            scenario = next(s for s in SCENARIOS if s.name == name)
            lines.append(f"--- {name}: {scenario.intent}")
            lines += [f"  {d}" for d in diffs]
        return "\n".join(lines)


def _timeout(kind: str) -> float:
    """From the start of the run to the deadline of a scenario of this kind."""
    return JOB_TIMEOUT if kind == "Job" else CRON_TIMEOUT


async def _events_agree(pairs: list[tuple[Run, Run]], deadline: float) -> None:
    """Events trail the status that ended a scenario: give them a moment to agree."""

    def agree() -> bool:
        return all(a.summary()["events"] == b.summary()["events"] for a, b in pairs)

    clusters = {id(r.cluster): r.cluster for pair in pairs for r in pair}
    waits = [c.wait("events", agree, deadline) for c in clusters.values()]
    await asyncio.gather(*waits)


async def compare(embedded: KubeClient, upstream: KubeClient, names: Sequence[str] = ()) -> Outcome:
    scenarios = [s for s in SCENARIOS if not names or s.name in names]
    run_id = uuid.uuid4().hex[:5]
    with tempfile.TemporaryDirectory(prefix="ctl-markers-") as markers:
        clusters = []
        for client in (embedded, upstream):
            folder = Path(markers) / client.name
            folder.mkdir()
            clusters.append(Cluster(client, folder))
        for cluster in clusters:
            cluster.awaited = {
                kind: {
                    s.name
                    for s in scenarios
                    if "barrier" not in s.until and _timeout(s.kind) <= _timeout(kind)
                }
                for kind in ("Job", "CronJob")
            }
        await asyncio.gather(*(c.start() for c in clusters))
        began = time.monotonic()
        pairs: list[tuple[Run, Run]] = []
        for scenario in scenarios:
            namespace = f"{PREFIX}-{scenario.name}-{run_id}"
            pair = [Run(scenario, c, namespace) for c in clusters]
            pairs.append((pair[0], pair[1]))
        try:
            plays = [r.play(began + _timeout(r.scenario.kind)) for pair in pairs for r in pair]
            await asyncio.gather(*plays)
            await _events_agree(pairs, time.monotonic() + EVENT_GRACE)
            for run in (r for pair in pairs for r in pair):
                run.freeze()
            return Outcome(pairs, time.monotonic() - began)
        finally:
            await asyncio.gather(*(r.release() for pair in pairs for r in pair), return_exceptions=True)
            await asyncio.gather(*(c.stop() for c in clusters))
            deletes = [r.cluster.client.delete(NAMESPACES, r.namespace) for pair in pairs for r in pair]
            await asyncio.gather(*deletes, return_exceptions=True)


async def test_controllers_agree_with_upstream(pair: Pair) -> None:
    async with pair.clients() as (embedded, upstream):
        outcome = await compare(embedded, upstream)
    report = outcome.report()
    print(report)
    assert sum(1 for s in SCENARIOS if s.kind == "Job") >= 25
    assert sum(1 for s in SCENARIOS if s.kind == "CronJob") >= 8
    assert not outcome.differences(), report


async def _main(kubeconfigs: list[str], names: list[str]) -> None:
    options = ClientOptions(max_attempts=1, request_timeout=30.0)
    clients = [
        KubeClient(await load_credentials(Path(path), CLUSTER), name, options)
        for path, name in zip(kubeconfigs, ("embedded", "upstream"), strict=True)
    ]
    try:
        outcome = await compare(clients[0], clients[1], names)
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    print(outcome.report())


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:3], sys.argv[3:]))
