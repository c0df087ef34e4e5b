"""CustomResourceDefinitions: accept their names, mark them Established, serve their kinds, clean up after them."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from multiqueue.api.meta import as_dict, as_list, condition_is_true, format_time, metadata
from multiqueue.api.types import Obj
from multiqueue.apiserver.registry import CRD_KEY, Registry, crd_types
from multiqueue.apiserver.resources import ResourceType
from multiqueue.apiserver.rest import ApiError, Rest
from multiqueue.apiserver.store import Event, Store
from multiqueue.apiserver.strategies import CLEANUP_FINALIZER
from multiqueue.loop.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class CrdController:
    def __init__(self, store: Store, registry: Registry, rest: Rest, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.registry = registry
        self.rest = rest
        self.clock = clock
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._removed: list[
            ResourceType
        ] = []  # kinds whose CRD went: their objects are deleted in the background

    def start(self) -> None:
        """Serve every CRD already Established before the first request arrives."""
        for crd in self.store.list_objects(CRD_KEY):
            if condition_is_true(as_dict(crd.get("status")).get("conditions"), "Established"):
                self.registry.apply_crd(crd)
            else:
                self._queue.put_nowait(_as_event(crd))
        self.store.add_handlers(self._on_event)
        self._task = asyncio.create_task(self._run(), name="crd-controller")

    async def stop(self) -> None:
        await cancel_and_wait([self._task])

    def _on_event(self, event: Event) -> None:
        if event.resource != CRD_KEY:
            return
        # Serve (or stop serving) at once, before any client can see the event that says so.
        if event.type == "DELETED":
            self._removed.extend(self.registry.remove_crd(str(metadata(event.obj).get("name")))[:1])
        elif condition_is_true(as_dict(event.obj.get("status")).get("conditions"), "Established"):
            self.registry.apply_crd(event.obj)
        self._queue.put_nowait(event)

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self._sync(event)
            except ApiError as exc:
                log.warning("CustomResourceDefinition %s: %s", metadata(event.obj).get("name"), exc)
            except Exception:
                log.exception("CustomResourceDefinition controller failed")

    async def _sync(self, event: Event) -> None:
        name = str(metadata(event.obj).get("name"))
        if event.type == "DELETED":
            removed, self._removed = self._removed, []
            for rtype in removed:
                for obj in self.store.list_latest(rtype.key):
                    meta = metadata(obj)
                    await self.store.remove(
                        rtype.key, str(meta.get("namespace") or ""), str(meta.get("name"))
                    )
            return
        crd = self.store.get(CRD_KEY, "", name)
        if crd is None:
            return
        if metadata(crd).get("deletionTimestamp"):
            if CLEANUP_FINALIZER in as_list(metadata(crd).get("finalizers")):
                await self._clean_up(crd)
            return
        if condition_is_true(as_dict(crd.get("status")).get("conditions"), "Established"):
            return  # served since the event arrived
        updated = copy.deepcopy(crd)
        status = as_dict(updated.setdefault("status", {}))
        stamp = format_time(self.clock())
        # A definition's conditions carry no lastProbeTime.
        status["conditions"] = [
            {
                "type": type_,
                "status": "True",
                "lastTransitionTime": stamp,
                "reason": reason,
                "message": message,
            }
            for type_, reason, message in (
                ("NamesAccepted", "NoConflicts", "no conflicts found"),
                ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            )
        ]
        status["acceptedNames"] = as_dict(updated.get("spec")).get("names", {})
        status["storedVersions"] = [
            str(v.get("name"))
            for v in as_dict(updated.get("spec")).get("versions", [])
            if as_dict(v).get("storage")
        ]
        rtype = self.registry.by_key(CRD_KEY)[0]
        # Clients see the write that says Established only at its commit, when the listener above serves the kind.
        await self.rest.update(rtype, "", name, updated, subresource="status", manager="kube-apiserver")

    async def _clean_up(self, crd: Obj) -> None:
        """A definition being deleted: its objects go first, then its finalizer, and with it the definition."""
        for rtype in crd_types(crd)[:1]:
            for obj in self.store.list_latest(rtype.key):
                meta = metadata(obj)
                await self.store.remove(rtype.key, str(meta.get("namespace") or ""), str(meta.get("name")))
        await self.rest.remove_finalizer(self.registry.by_key(CRD_KEY)[0], crd, CLEANUP_FINALIZER)


def _as_event(obj: dict[str, Any]) -> Event:
    return Event("ADDED", CRD_KEY, obj, int(metadata(obj).get("resourceVersion") or 0))
