"""The embedded CronJob controller: the executor around ``cronjob_sync.decide``.

Informers for CronJobs and Jobs (Jobs indexed by their owning CronJob) feed a work queue of CronJob keys. A sync
deletes what history limits or the Replace policy ask for (background propagation), creates the scheduled Job
(adopting it when it already exists and is ours), records it in ``status.active`` with ``lastScheduleTime``, and
returns the delay until the next schedule time, which the shared reconcile loop turns into a requeue.

All time comes from the injected clock; a test that moves a fake clock calls :meth:`CronJobController.resync`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from multiqueue.api import jobs
from multiqueue.api.meta import controller_ref, is_controlled_by, key_of, metadata, namespace_of
from multiqueue.api.types import CRONJOBS, JOBS, Obj
from multiqueue.controllers.cronjob_sync import Actions, decide
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import AlreadyExists, Conflict, NotFound
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import Handlers, Informer, InformerFactory
from multiqueue.loop.controller import Controller
from multiqueue.loop.runner import Runner
from multiqueue.loop.source import Feed

log = logging.getLogger(__name__)

COMPONENT: Final = "cronjob-controller"
CRONJOB_UID_INDEX: Final = "cronjob-uid"
STATUS_CONFLICT_RETRY: Final = 0.01


def _owning_cronjob_uid(job: Obj) -> list[str]:
    ref = controller_ref(job)
    return [str(ref["uid"])] if ref is not None and ref.get("kind") == "CronJob" and ref.get("uid") else []


def _active_ref(job: Obj) -> Obj:
    meta = metadata(job)
    return {
        "kind": "Job",
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "apiVersion": "batch/v1",
        "resourceVersion": meta.get("resourceVersion"),
    }


class CronJobController:
    def __init__(
        self,
        client: KubeClient,
        factory: InformerFactory,
        recorder: EventRecorder,
        *,
        workers: int = 2,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.clock = clock or (lambda: datetime.now(UTC))
        self.cronjobs: Informer = factory.informer(CRONJOBS)
        self.jobs: Informer = factory.informer(JOBS)
        self.jobs.add_index(CRONJOB_UID_INDEX, _owning_cronjob_uid)
        changed = Handlers(
            on_add=lambda c: self.runner.add(key_of(c)), on_update=lambda _o, c: self.runner.add(key_of(c))
        )
        owned = Handlers(
            on_add=self._enqueue_owner,
            on_update=lambda _o, j: self._enqueue_owner(j),
            on_delete=self._enqueue_owner,
        )
        self.runner: Runner[str] = Runner(
            Controller(
                COMPONENT,
                self.sync,
                workers,
                feeds=[Feed(self.cronjobs, changed), Feed(self.jobs, owned)],
                cached=lambda: [key_of(cronjob) for cronjob in self.cronjobs.objects()],
            )
        )
        self.runner.open()

    async def run(self) -> None:
        """Sync CronJobs until cancelled: one term (as leader); each starts from every cached CronJob."""
        await self.runner.run()

    async def close(self) -> None:
        """For good: the handlers unsubscribed, the queue shut down."""
        await self.runner.stop()

    def resync(self) -> None:
        """Look at every cached CronJob again, after a test moved the clock (the requeue delay computed from a fake
        clock means nothing to the queue's real timers)."""
        self.runner.resync()

    def _enqueue_owner(self, job: Obj) -> None:
        ref = controller_ref(job)
        if ref is not None and ref.get("kind") == "CronJob":
            self.runner.add(f"{namespace_of(job)}/{ref.get('name')}")

    async def sync(self, key: str) -> float | None:
        """One CronJob: decide, act, and return the seconds until its next schedule time (None: none)."""
        cronjob = self.cronjobs.get(key)
        if cronjob is None:
            return None
        owned = self.jobs.by_index(CRONJOB_UID_INDEX, str(metadata(cronjob).get("uid")))
        actions = decide(cronjob, owned, self.clock())
        return await self._execute(cronjob, actions)

    async def _execute(self, cronjob: Obj, actions: Actions) -> float | None:
        for job in actions.delete:
            with contextlib.suppress(NotFound, Conflict):
                await self.client.delete(
                    JOBS,
                    str(metadata(job)["name"]),
                    namespace_of(job),
                    propagation="Background",
                    preconditions={"uid": str(metadata(job).get("uid"))},
                )
        status = actions.status
        if actions.create is not None:
            created = await self._create(cronjob, actions.create)
            if created is None:
                status = None  # not ours or not created: leave lastScheduleTime alone and try again
            else:
                status = dict(status if status is not None else cronjob.get("status") or {})
                if not jobs.is_finished(created):
                    status["active"] = [*status.get("active", []), _active_ref(created)]
        if status is not None:
            try:
                await self.client.update_status(CRONJOBS, {**cronjob, "status": status})
            except Conflict:
                return STATUS_CONFLICT_RETRY  # our cache is behind; decide again from fresh data
            except NotFound:
                return None
        for event in actions.events:
            self.recorder.event(cronjob, event.type, event.reason, event.message)
        return actions.requeue_after

    async def _create(self, cronjob: Obj, job: Obj) -> Obj | None:
        name = str(metadata(job)["name"])
        try:
            created = await self.client.create(JOBS, job, namespace_of(cronjob))
        except AlreadyExists:
            existing = await self.client.get(JOBS, name, namespace_of(cronjob))
            if is_controlled_by(existing, cronjob):
                return existing  # made by us before a restart: adopt it
            self.recorder.warning(
                cronjob, "FailedCreate", f"Error creating job: job {name} exists and is not ours"
            )
            return None
        self.recorder.normal(cronjob, "SuccessfulCreate", f"Created job {name}")
        return created
