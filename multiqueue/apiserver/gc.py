"""Garbage collection and namespace clean-up for one local API server.

Upstream runs these in kube-controller-manager; a local cluster runs them beside its store so that
``propagationPolicy`` and namespace deletion behave as users expect (CronJob -> Job -> Pod cascades,
``blockOwnerDeletion`` under Foreground, orphaning). Work arrives from store events as keys on a queue; each item
is re-read from the store when processed, so repeats and stale items are harmless. A write that fails (a conflict
with a writer in between, say) brings its item back after the queue's back-off, as upstream's collector retries:
nothing is promised (a finalizer removed) before the work it stands for is done.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator

from multiqueue.api.meta import as_dict, as_list, metadata
from multiqueue.api.types import Obj
from multiqueue.apiserver.registry import Registry
from multiqueue.apiserver.resources import ResourceType
from multiqueue.apiserver.rest import FOREGROUND_FINALIZER, ORPHAN_FINALIZER, ApiError, Rest
from multiqueue.apiserver.store import Event, Store
from multiqueue.apiserver.strategies import BACKGROUND, FOREGROUND
from multiqueue.loop.controller import Controller
from multiqueue.loop.runner import Runner
from multiqueue.loop.source import Feed

log = logging.getLogger(__name__)

# ("owner-gone", uid) | ("owner", uid) | ("namespace", name)
WorkItem = tuple[str, str]


class GarbageCollector:
    def __init__(self, store: Store, registry: Registry, rest: Rest) -> None:
        self.store = store
        self.registry = registry
        self.rest = rest
        self.runner: Runner[WorkItem] = Runner(
            Controller(
                "garbage-collector", self._sync, feeds=[Feed(store, self._on_event)], cached=self._scan
            )
        )

    def start(self) -> None:
        self.runner.start()

    async def stop(self) -> None:
        await self.runner.stop()

    # --- what needs looking at -------------------------------------------------------------------------------

    def _enqueue(self, item: WorkItem) -> None:
        self.runner.add(item)

    def _on_event(self, event: Event) -> None:
        meta = metadata(event.obj)
        uid = str(meta.get("uid") or "")
        if event.type == "DELETED":
            self._enqueue(("owner-gone", uid))
        elif meta.get("deletionTimestamp"):
            finalizers = as_list(meta.get("finalizers"))
            if ORPHAN_FINALIZER in finalizers or FOREGROUND_FINALIZER in finalizers:
                self._enqueue(("owner", uid))
            if event.resource == "namespaces":
                self._enqueue(("namespace", str(meta.get("name"))))
        # A dependent that changes or goes may unblock an owner waiting in foreground deletion.
        for ref in as_list(meta.get("ownerReferences")):
            if isinstance(ref, dict) and ref.get("uid"):
                owner = self.store.by_uid(str(ref["uid"]))
                if owner is not None and metadata(owner[1]).get("deletionTimestamp"):
                    self._enqueue(("owner", str(ref["uid"])))
        if event.type == "DELETED" and event.namespace:
            namespace = self.store.get("namespaces", "", event.namespace)
            if namespace is not None and metadata(namespace).get("deletionTimestamp"):
                self._enqueue(("namespace", event.namespace))

    def _scan(self) -> Iterator[WorkItem]:
        """What a start looks at: finish what was in flight and collect dependents whose owners are gone (after a
        restart)."""
        for rtype in self.registry.storages():
            for obj in self.store.list_objects(rtype.key):
                meta = metadata(obj)
                if meta.get("deletionTimestamp"):
                    yield ("owner", str(meta.get("uid")))
                    if rtype.key == "namespaces":
                        yield ("namespace", str(meta.get("name")))
                for ref in as_list(meta.get("ownerReferences")):
                    uid = str(as_dict(ref).get("uid") or "")
                    if uid and self.store.by_uid(uid) is None:
                        yield ("owner-gone", uid)

    # --- doing it --------------------------------------------------------------------------------------------

    async def _sync(self, item: WorkItem) -> None:
        """One item; a refused write is raised as the client's typed error, so the shared loop retries it."""
        kind, value = item
        if kind == "owner-gone":
            await self._collect_dependents(value)
        elif kind == "owner":
            await self._process_deleting_owner(value)
        elif kind == "namespace":
            await self._clean_namespace(value)

    def _rtype(self, key: str) -> ResourceType | None:
        types = self.registry.by_key(key)
        return types[0] if types else None

    async def _collect_dependents(self, owner_uid: str) -> None:
        """The owner is gone: delete dependents that have no other live owner, else just drop the reference."""
        for resource, dependent in self.store.dependents(owner_uid):
            rtype = self._rtype(resource)
            if rtype is None:
                continue
            live = [r for r in _owner_refs(dependent) if self.store.by_uid(str(r["uid"])) is not None]
            if live:
                await self._drop_owner_refs(rtype, dependent, {owner_uid})
            elif not metadata(dependent).get("deletionTimestamp"):
                await self._delete(rtype, dependent, BACKGROUND)

    async def _process_deleting_owner(self, uid: str) -> None:
        found = self.store.by_uid(uid)
        if found is None:
            return
        resource, owner = found
        rtype = self._rtype(resource)
        if rtype is None or not metadata(owner).get("deletionTimestamp"):
            return
        finalizers = as_list(metadata(owner).get("finalizers"))
        dependents = self.store.dependents(uid)
        if ORPHAN_FINALIZER in finalizers:
            for dep_resource, dependent in dependents:
                dep_type = self._rtype(dep_resource)
                if dep_type is not None:
                    await self._drop_owner_refs(dep_type, dependent, {uid})
            await self.rest.remove_finalizer(rtype, owner, ORPHAN_FINALIZER)
        elif FOREGROUND_FINALIZER in finalizers:
            blocking = 0
            for dep_resource, dependent in dependents:
                dep_type = self._rtype(dep_resource)
                if dep_type is None:
                    continue
                blocks = any(
                    r.get("uid") == uid and r.get("blockOwnerDeletion") is True
                    for r in _owner_refs(dependent)
                )
                blocking += blocks
                if not metadata(dependent).get("deletionTimestamp"):
                    await self._delete(dep_type, dependent, FOREGROUND if blocks else BACKGROUND)
            if blocking == 0:
                await self.rest.remove_finalizer(rtype, owner, FOREGROUND_FINALIZER)

    async def _clean_namespace(self, name: str) -> None:
        namespace = self.store.get("namespaces", "", name)
        if namespace is None or not metadata(namespace).get("deletionTimestamp"):
            return
        remaining = 0
        # A CRD served in several versions, or Events in two groups, are stored once: each storage is visited once.
        for rtype in (t for t in self.registry.storages() if t.namespaced):
            for obj in self.store.list_latest(rtype.key, name):
                remaining += 1
                if not metadata(obj).get("deletionTimestamp"):
                    await self._delete(rtype, obj, BACKGROUND)
        if remaining == 0:
            await self.rest.finalize_namespace(name)

    async def _delete(self, rtype: ResourceType, obj: Obj, policy: str) -> None:
        meta = metadata(obj)
        try:
            await self.rest.delete(
                rtype,
                str(meta.get("namespace") or ""),
                str(meta.get("name")),
                {"propagationPolicy": policy, "preconditions": {"uid": meta.get("uid")}},
            )
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise

    async def _drop_owner_refs(self, rtype: ResourceType, obj: Obj, uids: set[str]) -> None:
        current = self.store.get(
            rtype.key, str(metadata(obj).get("namespace") or ""), str(metadata(obj).get("name"))
        )
        if current is None:
            return
        updated = copy.deepcopy(current)
        meta = metadata(updated)
        refs = [r for r in as_list(meta.get("ownerReferences")) if as_dict(r).get("uid") not in uids]
        if refs:
            meta["ownerReferences"] = refs
        else:
            meta.pop("ownerReferences", None)
        try:
            await self.rest.update(
                rtype,
                str(meta.get("namespace") or ""),
                str(meta.get("name")),
                updated,
                manager="kube-controller-manager",
            )
        except ApiError as exc:
            if exc.code != 404:  # a conflict is tried again on a fresh read
                raise


def _owner_refs(obj: Obj) -> list[Obj]:
    return [r for r in as_list(metadata(obj).get("ownerReferences")) if isinstance(r, dict) and r.get("uid")]
