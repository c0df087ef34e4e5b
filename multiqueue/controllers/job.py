"""The embedded Job controller: the thin executor around ``job_sync.decide``.

Informers for Jobs and Pods feed a work queue of Job keys; each sync reads the cache, asks ``decide`` what to do,
and performs it in upstream's order: status first, then the finalizers of pods that status records, then pod
creates (in slow-start batches) or deletes, then events. It returns when ``decide`` wants the Job looked at again
(a deadline, a pod back-off, a TTL), and the shared reconcile loop requeues it. Expectations remember creates and
deletes not yet seen in the cache, so a Job never gets its pods twice.

Before each sync of a running Job, the Job claims its pods as upstream's does (``job_claims``): it adopts the
orphans its selector matches and releases the pods it controls that no longer match, then syncs with the pods it
owns.

A second queue, of pod keys, releases orphan pods as upstream does: a pod still carrying the tracking finalizer
after its Job is gone (or replaced, or finished, or after the garbage collector orphaned it) loses the finalizer,
or it could never be deleted.

All time comes from the injected clock, so tests move it instead of waiting.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Final

from opentelemetry import metrics
from opentelemetry.metrics import Histogram, Meter

from multiqueue.api import jobs
from multiqueue.api.meta import controller_ref, is_deleting, key_of, labels_of, metadata, namespace_of, uid_of
from multiqueue.api.types import JOBS, PODS, Obj
from multiqueue.controllers.job_claims import adoption_patch, claims, may_adopt, release_patch
from multiqueue.controllers.job_orphans import job_of, owning_job_name, releases_orphan
from multiqueue.controllers.job_pod_facts import has_tracking_finalizer
from multiqueue.controllers.job_sync import Actions, decide
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import Handlers, Informer, InformerFactory
from multiqueue.loop.controller import Controller
from multiqueue.loop.errors import ExpectedFailure
from multiqueue.loop.runner import Runner
from multiqueue.loop.source import Feed

log = logging.getLogger(__name__)

COMPONENT: Final = "job-controller"
JOB_UID_INDEX: Final = "job-uid"
UNCONTROLLED_INDEX: Final = "uncontrolled-in-namespace"
EXPECTATIONS_TIMEOUT: Final = timedelta(minutes=5)
STATUS_CONFLICT_RETRY: Final = 0.01
ORPHAN_WORKERS: Final = 1
REMOVE_TRACKING_FINALIZER: Final = {
    "metadata": {"$deleteFromPrimitiveList/finalizers": [jobs.TRACKING_FINALIZER]}
}


def _owning_job_uid(pod: Obj) -> list[str]:
    ref = controller_ref(pod)
    return [str(ref["uid"])] if ref is not None and ref.get("kind") == "Job" and ref.get("uid") else []


def _uncontrolled_namespace(pod: Obj) -> list[str]:
    """The namespace of a pod no controller owns: where a Job looks for pods to adopt."""
    return [namespace_of(pod)] if controller_ref(pod) is None else []


class AdoptionRefused(ExpectedFailure):
    """The Job changed under the sync (deleted, or replaced by another of the same name): adopt nothing now."""


@dataclasses.dataclass
class _Expectation:
    since: datetime
    adds: int = 0
    deletes: int = 0

    def satisfied(self, now: datetime) -> bool:
        return (self.adds <= 0 and self.deletes <= 0) or now - self.since > EXPECTATIONS_TIMEOUT


@dataclasses.dataclass
class JobControllerMetrics:
    """Upstream's job_controller metrics: counts kept in-process (exported by the telemetry layer), and the sync
    duration histogram, recorded through OpenTelemetry as each sync ends."""

    syncs: collections.Counter[tuple[str, str, str]] = dataclasses.field(default_factory=collections.Counter)
    finished: collections.Counter[tuple[str, str, str]] = dataclasses.field(
        default_factory=collections.Counter
    )
    pods_finished: collections.Counter[tuple[str, str]] = dataclasses.field(
        default_factory=collections.Counter
    )
    by_external_controller: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    sync_duration: Histogram | None = None

    def count_sync(self, mode: str, result: str, action: str, seconds: float) -> None:
        self.syncs[(mode, result, action)] += 1
        if self.sync_duration is not None:
            self.sync_duration.record(seconds, {"completion_mode": mode, "result": result, "action": action})

    def count_finished(self, job: Obj, status: Obj) -> None:
        """The Job, as it was before ``status`` was written, finished with that write."""
        new = {**job, "status": status}
        finished = jobs.finished_condition(new)
        if finished is None or jobs.is_finished(job):
            return
        conditions = status.get("conditions") or []
        reason = next((str(c.get("reason", "")) for c in conditions if c.get("type") == finished[0]), "")
        result = "succeeded" if finished[0] == jobs.COMPLETE else "failed"
        self.finished[(jobs.completion_mode(job), result, reason)] += 1

    def count_pods_finished(self, job: Obj, status: Obj) -> None:
        """Pods this status write moved into the Job's succeeded or failed counts (upstream's
        job_pods_finished_total)."""
        before = jobs.status_of(job)
        for result in ("succeeded", "failed"):
            added = int(status.get(result) or 0) - int(before.get(result) or 0)
            if added > 0:
                self.pods_finished[(jobs.completion_mode(job), result)] += added


class JobController:
    def __init__(
        self,
        client: KubeClient,
        factory: InformerFactory,
        recorder: EventRecorder,
        *,
        workers: int = 4,
        clock: Callable[[], datetime] | None = None,
        meter: Meter | None = None,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.clock = clock or (lambda: datetime.now(UTC))
        self.jobs: Informer = factory.informer(JOBS)
        self.pods: Informer = factory.informer(PODS)
        self.pods.add_index(JOB_UID_INDEX, _owning_job_uid)
        self.pods.add_index(UNCONTROLLED_INDEX, _uncontrolled_namespace)
        self.metrics = JobControllerMetrics(
            sync_duration=(meter or metrics.get_meter(__name__)).create_histogram(
                "job_controller_job_sync_duration_seconds",
                unit="s",
                description="How long one Job sync took.",
            )
        )
        self._expectations: dict[str, _Expectation] = {}
        self.runner: Runner[str] = Runner(
            Controller(
                COMPONENT,
                self.sync,
                workers,
                feeds=[
                    Feed(
                        self.jobs,
                        Handlers(
                            on_add=self._job_added,
                            on_update=lambda _o, n: self._enqueue_job(n),
                            on_delete=lambda j: self.runner.add(key_of(j)),
                        ),
                    ),
                    Feed(
                        self.pods,
                        Handlers(
                            on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted
                        ),
                    ),
                ],
                cached=self._cached_jobs,
            )
        )
        self.orphans: Runner[str] = Runner(
            Controller(
                f"{COMPONENT}-orphan-pods",
                self.sync_orphan_pod,
                ORPHAN_WORKERS,
                feeds=[
                    Feed(self.jobs, Handlers(on_delete=self._job_deleted)),
                    Feed(
                        self.pods,
                        Handlers(on_add=self._route_orphan, on_update=lambda _o, p: self._route_orphan(p)),
                    ),
                ],
                cached=self._cached_orphans,
            )
        )
        self.runner.open()
        self.orphans.open()

    async def run(self) -> None:
        """Process Jobs and orphan pods until cancelled (the informers are started by their factory): one term
        as leader, each starting from every cached Job and pod."""
        await asyncio.gather(self.runner.run(), self.orphans.run())

    async def close(self) -> None:
        """For good: the handlers unsubscribed, the queues shut down."""
        await self.runner.stop()
        await self.orphans.stop()

    def _cached_jobs(self) -> list[str]:
        """The Jobs every cached Job and pod stand for."""
        keys = [key_of(job) for job in self.jobs.objects() if jobs.is_managed_by_builtin_controller(job)]
        for pod in self.pods.objects():
            job = self._live_job(pod)
            if job is not None and jobs.is_managed_by_builtin_controller(job):
                keys.append(key_of(job))
        return keys

    def _cached_orphans(self) -> list[str]:
        return [key_of(pod) for pod in self.pods.objects() if self._is_orphan(pod)]

    # --- event handlers: only enqueue --------------------------------------------------------------------------

    def _job_added(self, job: Obj) -> None:
        if not jobs.is_managed_by_builtin_controller(job):
            owner = jobs.managed_by(job) or ""
            log.debug(
                "Skip syncing the job as it is managed by an external controller: %s (%s)", key_of(job), owner
            )
            self.metrics.by_external_controller[owner] += 1
            return
        self.runner.add(key_of(job))

    def _enqueue_job(self, job: Obj) -> None:
        if jobs.is_managed_by_builtin_controller(job):
            self.runner.add(key_of(job))

    def _owner_key(self, pod: Obj) -> str | None:
        name = owning_job_name(pod)
        return None if name is None else f"{namespace_of(pod)}/{name}"

    def _job_deleted(self, job: Obj) -> None:
        """Its pods that still carry the tracking finalizer are orphans now (upstream: cleanupPodFinalizers); its
        own sync forgets its expectations."""
        for pod in self.pods.by_index(JOB_UID_INDEX, str(metadata(job).get("uid"))):
            if has_tracking_finalizer(pod):
                self.orphans.add(key_of(pod))

    def _named_job(self, pod: Obj) -> Obj | None:
        """The cached Job with the name the pod's controller reference gives (its UID may differ)."""
        key = self._owner_key(pod)
        return None if key is None else self.jobs.get(key)

    def _live_job(self, pod: Obj) -> Obj | None:
        """The live Job that controls the pod, if any."""
        return job_of(pod, self._named_job(pod))

    def _adopters(self, pod: Obj) -> list[Obj]:
        """The cached Jobs that would adopt ``pod`` (upstream: getPodJobs); more than one is a user's error."""
        if controller_ref(pod) is not None:
            return []
        return [job for job in self.jobs.objects(namespace_of(pod)) if may_adopt(job, pod)]

    def _is_orphan(self, pod: Obj) -> bool:
        """No live Job controls the pod, none is about to adopt it, and it still holds the finalizer one would
        release."""
        named = self._named_job(pod)
        return job_of(pod, named) is None and releases_orphan(pod, named) and not self._adopters(pod)

    def _route_job(self, pod: Obj) -> None:
        """A changed pod concerns its Job's sync (which also releases the pods of a finished Job)."""
        job = self._live_job(pod)
        if job is not None:
            self._enqueue_job(job)

    def _route_orphan(self, pod: Obj) -> None:
        """A changed pod that no live Job controls goes to the orphan queue when it holds the finalizer."""
        if self._is_orphan(pod):
            self.orphans.add(key_of(pod))

    def _offer_for_adoption(self, pod: Obj) -> None:
        for job in self._adopters(pod):
            self.runner.add(key_of(job))

    def _pod_added(self, pod: Obj) -> None:
        key = self._owner_key(pod)
        if key is not None and key in self._expectations:
            self._expectations[key].adds -= 1
        self._route_job(pod)
        self._offer_for_adoption(pod)

    def _pod_updated(self, old: Obj, pod: Obj) -> None:
        previous = self._owner_key(old)
        if previous is not None and previous != self._owner_key(pod):
            self.runner.add(previous)  # its controller reference changed: the old Job lost a pod
        self._route_job(pod)
        if labels_of(old) != labels_of(pod) or controller_ref(old) != controller_ref(pod):
            self._offer_for_adoption(pod)

    def _pod_deleted(self, pod: Obj) -> None:
        key = self._owner_key(pod)
        if key is not None:
            if key in self._expectations:
                self._expectations[key].deletes -= 1
            self.runner.add(key)

    # --- one sync ----------------------------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        """One Job: decide, act, and say when to look again (None: when something changes)."""
        started = time.perf_counter()
        job = self.jobs.get(key)
        if job is None:
            self._expectations.pop(key, None)
            return None
        now = self.clock()
        expectation = self._expectations.get(key)
        can_manage = expectation is None or expectation.satisfied(now)
        owned = self.pods.by_index(JOB_UID_INDEX, str(metadata(job).get("uid")))
        if jobs.is_managed_by_builtin_controller(job) and not jobs.is_finished(job):
            owned = await self._claim(job, owned)
        actions = decide(job, owned, now, can_manage_pods=can_manage)
        if actions.malformed:
            log.warning("Job %s left alone: %s", key, actions.malformed)
        if actions.skipped:
            return None
        action = "pods_created" if actions.create else "pods_deleted" if actions.delete else "reconciling"
        result = "success"
        try:
            return await self._execute(key, job, actions)
        except Exception:
            result = "error"
            raise
        finally:
            self.metrics.count_sync(jobs.completion_mode(job), result, action, time.perf_counter() - started)

    async def sync_orphan_pod(self, key: str) -> None:
        """Release a pod no live Job tracks any more (upstream: syncOrphanPod), checked again on the cache.

        When the cache has no Job by the pod's controller reference, the server is asked: the Jobs informer may
        lag the Pods informer, and a finalizer removed from a live Job's pod would lose that pod's count.
        """
        pod = self.pods.get(key)
        if pod is None:
            return
        named = self._named_job(pod)
        if not releases_orphan(pod, named):
            return
        name = owning_job_name(pod)
        if name is not None and job_of(pod, named) is None:
            try:
                named = await self.client.get(JOBS, name, namespace_of(pod))
            except NotFound:
                named = None
            if not releases_orphan(pod, named):
                return
        await self._release(pod)

    async def _claim(self, job: Obj, controlled: list[Obj]) -> list[Obj]:
        """The pods ``job`` owns for this sync, once it has adopted the orphans it matches and released the pods
        that stopped matching (upstream: getPodsForJob)."""
        uncontrolled = self.pods.by_index(UNCONTROLLED_INDEX, namespace_of(job))
        claimed = claims(job, [*controlled, *uncontrolled])
        await asyncio.gather(*(self._patch_claim(p, release_patch(job, p)) for p in claimed.release))
        owned = list(claimed.owned)
        if claimed.adopt:
            await self._check_adopter(job)
            adopted = await asyncio.gather(
                *(self._patch_claim(p, adoption_patch(job, p)) for p in claimed.adopt)
            )
            owned += [pod for pod in adopted if pod is not None]
        return owned

    async def _check_adopter(self, job: Obj) -> None:
        """Read the Job from the server before adopting for it: the cache may hold a Job since deleted or replaced."""
        try:
            fresh = await self.client.get(JOBS, str(metadata(job).get("name")), namespace_of(job))
        except NotFound as exc:
            raise AdoptionRefused(f"Job {key_of(job)} is gone") from exc
        if uid_of(fresh) != uid_of(job):
            raise AdoptionRefused(
                f"original Job {key_of(job)} is gone: got uid {uid_of(fresh)}, wanted {uid_of(job)}"
            )
        if is_deleting(fresh):
            raise AdoptionRefused(f"Job {key_of(job)} has just been deleted")

    async def _patch_claim(self, pod: Obj, patch: Obj) -> Obj | None:
        """Adopt or release ``pod``; the pod as patched, or None when it is gone."""
        try:
            return await self.client.patch(
                PODS, str(metadata(pod)["name"]), patch, namespace_of(pod), patch_type="strategic"
            )
        except NotFound:
            return None

    async def _execute(self, key: str, job: Obj, actions: Actions) -> float | None:
        namespace, name = namespace_of(job), str(metadata(job).get("name"))
        if actions.delete_job:
            with contextlib.suppress(NotFound, Conflict):
                await self.client.delete(
                    JOBS,
                    name,
                    namespace,
                    propagation="Background",
                    preconditions={"uid": str(metadata(job).get("uid"))},
                )
            return None
        if actions.status is not None:
            try:
                await self.client.update_status(JOBS, {**job, "status": actions.status})
            except Conflict:
                return STATUS_CONFLICT_RETRY  # our cache is behind; decide again from fresh data
            except NotFound:
                return None
            self.metrics.count_finished(job, actions.status)
            self.metrics.count_pods_finished(job, actions.status)
        await self._remove_finalizers(actions.remove_finalizers)
        if actions.delete:
            await self._delete_pods(key, job, actions.delete, release=actions.release_before_delete)
        elif actions.create:
            await self._create_pods(key, job, actions.create)
        for event in actions.events:
            self.recorder.event(job, event.type, event.reason, event.message)
        # A hair past the moment decide named, so the next sync is not a moment early.
        return None if actions.requeue_after is None else actions.requeue_after + 0.001

    async def _remove_finalizers(self, pods: list[Obj]) -> None:
        await asyncio.gather(*(self._release(p) for p in pods))

    async def _release(self, pod: Obj) -> None:
        """Take the Job's tracking finalizer off ``pod`` (a pod already gone needs nothing)."""
        with contextlib.suppress(NotFound):
            await self.client.patch(
                PODS,
                str(metadata(pod)["name"]),
                REMOVE_TRACKING_FINALIZER,
                namespace_of(pod),
                patch_type="strategic",
            )

    async def _delete_pods(self, key: str, job: Obj, pods: list[Obj], *, release: bool = False) -> None:
        """Delete ``pods``; with ``release``, each loses the tracking finalizer first, so it is never counted."""
        expectation = self._expectations.setdefault(key, _Expectation(self.clock()))
        expectation.deletes += len(pods)
        expectation.since = self.clock()

        async def delete(pod: Obj) -> None:
            name = str(metadata(pod)["name"])
            try:
                if release and has_tracking_finalizer(pod):
                    await self.client.patch(
                        PODS, name, REMOVE_TRACKING_FINALIZER, namespace_of(pod), patch_type="strategic"
                    )
                await self.client.delete(PODS, name, namespace_of(pod))
                self.recorder.normal(job, "SuccessfulDelete", f"Deleted pod: {name}")
            except NotFound:
                expectation.deletes -= 1
            except KubeError as exc:
                expectation.deletes -= 1
                self.recorder.warning(job, "FailedDelete", f"Error deleting: {exc}")
                raise

        await asyncio.gather(*(delete(p) for p in pods))

    async def _create_pods(self, key: str, job: Obj, pods: list[Obj]) -> None:
        """Slow start: batches of 1, 2, 4, ... stopping at the first failure."""
        expectation = self._expectations.setdefault(key, _Expectation(self.clock()))
        expectation.adds += len(pods)
        expectation.since = self.clock()
        remaining = list(pods)
        batch = 1
        while remaining:
            current, remaining = remaining[:batch], remaining[batch:]
            results = await asyncio.gather(
                *(self._create_one(job, p) for p in current), return_exceptions=True
            )
            failures = [r for r in results if isinstance(r, BaseException)]
            expectation.adds -= len(failures)
            if failures:
                expectation.adds -= len(remaining)  # not attempted: nothing to wait for
                raise failures[0]
            batch *= 2

    async def _create_one(self, job: Obj, pod: Obj) -> None:
        try:
            created = await self.client.create(PODS, pod, namespace_of(job))
        except AlreadyExists:
            return
        except KubeError as exc:
            self.recorder.warning(job, "FailedCreate", f"Error creating: {exc}")
            raise
        self.recorder.normal(job, "SuccessfulCreate", f"Created pod: {metadata(created).get('name')}")
