"""Performs what ``lifecycle.decide`` asked for, in order, and decides nothing.

What the clusters answer is recorded for the next decision: a worker that refuses a mirror (any 4xx other than
a conflict) is a :class:`Rejection` the next ``decide`` sees; a conflict or a vanished object ends the sync, to be
looked at again soon with what the caches say then.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from multiqueue.api.meta import labels_of, metadata, namespace_of
from multiqueue.api.types import NAMESPACES, Obj
from multiqueue.dispatch.capacity import Key, Ledger, Rank
from multiqueue.dispatch.decision import RETRY_SOON, WORKER_BUSY_RETRY, Actions, Rejection, StatusRejection
from multiqueue.dispatch.generic import GenericJob
from multiqueue.dispatch.metrics import DispatcherMetrics
from multiqueue.dispatch.mirror import (
    CLUSTER_LABEL,
    ORIGIN_LABEL,
    PARTS_ANNOTATION,
    PROGRESS_ANNOTATION,
    Identity,
    placement_metadata,
    release_metadata,
)
from multiqueue.dispatch.workers import WorkerBusy, WorkerPool, WorkerUnreachable
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import AlreadyExists, ApiError, Conflict, NotFound, TooManyRequests
from multiqueue.kube.events import EventRecorder

log = logging.getLogger(__name__)


class _Stop(Exception):
    """Ends a sync early; carries when to look again."""

    def __init__(self, requeue_after: float | None) -> None:
        self.requeue_after = requeue_after


class Executor:
    def __init__(
        self,
        management: KubeClient,
        pool: WorkerPool,
        ledger: Ledger,
        recorder: EventRecorder,
        metrics: DispatcherMetrics,
        identity: Identity,
    ) -> None:
        self.management = management
        self.pool = pool
        self.ledger = ledger
        self.recorder = recorder
        self.metrics = metrics
        self.identity = identity
        # Key -> worker -> what the worker last answered to creating this Job's mirror.
        self.rejections: dict[Key, dict[str, Rejection]] = {}
        # Key -> the management cluster's refusal of the status last written to the user's object.
        self.status_rejections: dict[Key, StatusRejection] = {}

    async def run(
        self, key: Key, adapter: GenericJob, user: Obj | None, actions: Actions, rank: Rank
    ) -> float | None:
        """Perform ``actions``; when to sync ``key`` again."""
        if actions.hold is not None:
            self.ledger.hold(key, actions.hold)  # before any await: no concurrent sync places past a limit
        if actions.waiting is not None:
            self.ledger.wait(key, rank, actions.waiting.candidates)
        else:
            self.ledger.unwait(key)
        try:
            await self._perform(key, adapter, user, actions)
        except _Stop as stop:
            return stop.requeue_after
        except (WorkerBusy, WorkerUnreachable) as stalled:
            # Everything done so far is recorded in the clusters; the next sync goes on from there.
            log.info(
                "worker %s is slow to answer or stopped answering; %s/%s is synced again later", stalled, *key
            )
            return WORKER_BUSY_RETRY
        return actions.requeue_after

    async def _perform(self, key: Key, adapter: GenericJob, user: Obj | None, actions: Actions) -> None:
        for worker, mirror in actions.delete_mirrors:
            await self.delete_mirror(adapter, worker, mirror)
        if user is None:
            return
        if actions.place_on is not None:
            placed = placement_metadata(user, actions.place_on, self.identity.finalizer, actions.parts)
            user = await self._patch_user(adapter, user, {"metadata": placed})
        elif actions.redispatch is not None or actions.parts is not None:
            moved: Obj = {}
            if actions.redispatch is not None:
                moved["labels"] = {CLUSTER_LABEL: actions.redispatch[1]}
            if actions.parts is not None:
                moved["annotations"] = {PARTS_ANNOTATION: actions.parts}
            user = await self._patch_user(adapter, user, {"metadata": moved})
        if actions.redispatch is not None:
            self.metrics.redispatched[actions.redispatch[0]] += 1
        if actions.create_mirror is not None:
            await self._create_mirror(key, adapter, *actions.create_mirror)
            self.metrics.dispatched_to(key, actions.create_mirror[0])
        if actions.seed_progress is not None:
            worker, seeded = actions.seed_progress
            async with self._talking_to(worker) as client:
                await _or_stop(client.update_status(adapter.resource, seeded))
        if actions.suspend_mirror is not None:
            worker, suspend = actions.suspend_mirror
            patch = {**adapter.suspend_patch(suspend)}
            if not suspend:
                patch["metadata"] = {"annotations": {PROGRESS_ANNOTATION: None}}
            async with self._talking_to(worker) as client:
                with contextlib.suppress(NotFound):
                    await client.patch(adapter.resource, _name(user), patch, namespace_of(user))
        if actions.scale_mirror is not None:
            worker, parallelism = actions.scale_mirror
            async with self._talking_to(worker) as client:
                with contextlib.suppress(NotFound):
                    await client.patch(
                        adapter.resource,
                        _name(user),
                        {"spec": {"parallelism": parallelism}},
                        namespace_of(user),
                    )
        if actions.status is not None:
            await self._write_status(key, adapter, user, actions.status)
            if adapter.is_finished({**user, "status": actions.status}):
                self.metrics.status_synced(key)
        if actions.unplace or actions.remove_finalizer:
            await self._patch_user(
                adapter, user, {"metadata": release_metadata(user, self.identity.finalizer, actions.unplace)}
            )
        if actions.status_refused:
            self.metrics.rejected["invalid_transition"] += 1
        for event in actions.events:
            self.recorder.event(user, event.type, event.reason, event.message)

    async def _write_status(self, key: Key, adapter: GenericJob, user: Obj, status: Obj) -> None:
        """The user's status; a refusal (a 4xx other than a conflict) is recorded for the next decision."""
        try:
            await _or_stop(self.management.update_status(adapter.resource, {**user, "status": status}))
        except TooManyRequests:
            raise
        except ApiError as exc:
            if not 400 <= exc.code < 500:
                raise
            earlier = self.status_rejections.get(key)
            attempts = earlier.attempts + 1 if earlier is not None and earlier.status == status else 1
            self.status_rejections[key] = StatusRejection(
                status, exc.reason or type(exc).__name__, exc.message, self.pool.clock(), attempts
            )
            log.info("the management cluster answered %s to the status of %s/%s", exc.reason, *key)
            raise _Stop(0) from None
        self.status_rejections.pop(key, None)

    @contextlib.asynccontextmanager
    async def _talking_to(self, worker: str) -> Any:
        found = self.pool.workers.get(worker)
        if found is None:
            raise _Stop(RETRY_SOON)  # removed meanwhile
        async with found.slots.held(worker):
            yield found.client

    async def _patch_user(self, adapter: GenericJob, user: Obj, patch: Obj) -> Obj:
        """A merge patch of the user's object at the version decided on; a conflict ends the sync."""
        patch["metadata"]["resourceVersion"] = metadata(user).get("resourceVersion")
        try:
            return await self.management.patch(adapter.resource, _name(user), patch, namespace_of(user))
        except (Conflict, NotFound):
            # A hold taken for this placement goes with the watch event of the change that got there first.
            raise _Stop(RETRY_SOON) from None

    async def _create_mirror(self, key: Key, adapter: GenericJob, worker: str, body: Obj) -> None:
        namespace = str(metadata(body).get("namespace"))
        async with self._talking_to(worker) as client:
            try:
                await _create_in_namespace(client, adapter, body, namespace)
            except AlreadyExists as exc:
                existing = await client.get(adapter.resource, _name(body), namespace)
                self._rejected(key, worker, exc, labels_of(existing).get(ORIGIN_LABEL, ""))
            except (Conflict, NotFound, TooManyRequests):
                raise
            except ApiError as exc:
                if not 400 <= exc.code < 500:
                    raise
                self._rejected(key, worker, exc, None)
        self.rejections.pop(key, None)

    def _rejected(self, key: Key, worker: str, error: ApiError, existing_origin: str | None) -> None:
        earlier = self.rejections.get(key, {}).get(worker)
        attempts = earlier.attempts + 1 if earlier is not None else 1
        reason = error.reason or type(error).__name__
        self.rejections.setdefault(key, {})[worker] = Rejection(
            worker, reason, error.message, self.pool.clock(), attempts, existing_origin
        )
        log.info("worker %s answered %s to creating the mirror of %s/%s", worker, reason, key[0], key[1])
        raise _Stop(0)

    async def delete_mirror(self, adapter: GenericJob, worker: str, mirror: Obj) -> None:
        meta = metadata(mirror)
        async with self._talking_to(worker) as client:
            with contextlib.suppress(NotFound, Conflict):
                await client.delete(
                    adapter.resource,
                    str(meta["name"]),
                    namespace_of(mirror),
                    propagation="Background",
                    preconditions={"uid": str(meta.get("uid"))},
                )


async def _create_in_namespace(client: KubeClient, adapter: GenericJob, body: Obj, namespace: str) -> None:
    """Create ``body``; a worker without its namespace gets it first. Only the first mirror of a namespace costs
    the extra requests: asking for the namespace before every create would double what dispatching sends."""
    try:
        await client.create(adapter.resource, body, namespace)
        return
    except NotFound as missing:
        if missing.kind != "namespaces":
            raise
    with contextlib.suppress(AlreadyExists):
        await client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
    await client.create(adapter.resource, body, namespace)


async def _or_stop(write: Any) -> None:
    """A write whose conflict ends the sync (to decide again from fresh caches) and whose target may be gone."""
    try:
        await write
    except Conflict:
        raise _Stop(RETRY_SOON) from None
    except NotFound:
        raise _Stop(None) from None


def _name(obj: Obj) -> str:
    return str(metadata(obj)["name"])
