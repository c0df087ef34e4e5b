"""Informers: a local, always-current cache of one resource on one cluster, and change notifications.

LIST (paginated) then WATCH from the list's resourceVersion, with bookmarks to keep that version fresh. A watch
that ends is resumed from the last version seen; a 410 or any broken connection leads to a fresh LIST, and objects
that vanished meanwhile are reported as deleted, so handlers never miss a delete. Handlers only enqueue keys;
workers read the cache. One informer serves everyone who needs the same resource (:class:`InformerFactory`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Callable
from typing import Final

from multiqueue.api.compaction import compacted
from multiqueue.api.meta import key_of, metadata
from multiqueue.api.types import Obj, Resource
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import Gone, KubeError
from multiqueue.kube.indexer import NAMESPACE_INDEX, Indexer, IndexFunc
from multiqueue.loop.source import Unsubscribe
from multiqueue.loop.tasks import cancel_and_wait

log = logging.getLogger(__name__)

AddHandler = Callable[[Obj], None]
UpdateHandler = Callable[[Obj, Obj], None]
DeleteHandler = Callable[[Obj], None]

RELIST_BACKOFF_MAX: Final = 30.0


class Handlers:
    """What to call on changes. Handlers must be quick: enqueue a key, never await I/O."""

    def __init__(
        self,
        on_add: AddHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: DeleteHandler | None = None,
    ) -> None:
        self.on_add = on_add
        self.on_update = on_update
        self.on_delete = on_delete


@dataclasses.dataclass(frozen=True, slots=True)
class Selection:
    """What one informer lists and watches; also the key under which :class:`InformerFactory` shares it."""

    resource: Resource
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None


class _Health:
    """Whether the cache has synced and whether the last LIST or WATCH failed: how callers tell that a cluster
    is unreachable. ``changed`` is set whenever ``healthy`` flips; waiters clear it. ``answered`` is set once the
    server has answered at all, with a list or an error."""

    def __init__(self) -> None:
        self.synced = asyncio.Event()
        self.last_error: Exception | None = None
        self.changed = asyncio.Event()
        self.answered = asyncio.Event()

    @property
    def healthy(self) -> bool:
        return self.synced.is_set() and self.last_error is None

    def failed(self, exc: Exception) -> None:
        if self.last_error is None:
            self.changed.set()
        self.last_error = exc
        self.answered.set()

    def listed(self) -> None:
        if self.last_error is not None or not self.synced.is_set():
            self.changed.set()
        self.last_error = None
        self.synced.set()
        self.answered.set()


# What an informer keeps of each object it is given, from the object and what it kept of its last version.
Transform = Callable[[Obj, Obj | None], Obj]
# For caches that hold many objects and whose readers never look at managedFields.
COMPACT: Final[Transform] = compacted


class Informer:
    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        watch_timeout: int = 300,
        transform: Transform | None = None,
    ) -> None:
        self.client = client
        self.transform = transform
        self.selection = Selection(resource, namespace, label_selector, field_selector)
        self.watch_timeout = watch_timeout
        self._cache = Indexer()
        self.get = self._cache.get  # the cached object under a key, or None
        self._handlers: list[Handlers] = []
        self._health = _Health()
        self._task: asyncio.Task[None] | None = None
        self.resource_version = ""
        self.relists = 0  # how often the informer had to LIST again (tests and metrics read it)

    # --- cache -----------------------------------------------------------------------------------------------

    def objects(self, namespace: str | None = None) -> list[Obj]:
        if namespace is None:
            return self._cache.objects()
        return self._cache.by_index(NAMESPACE_INDEX, namespace)

    def keys(self) -> list[str]:
        return self._cache.keys()

    def by_index(self, index: str, value: str) -> list[Obj]:
        return self._cache.by_index(index, value)

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Add a custom index; existing objects are indexed at once."""
        self._cache.add_index(name, func)

    def add_handlers(self, handlers: Handlers) -> Unsubscribe:
        """Register change handlers; objects already cached are replayed as adds. Calling what this returns
        removes them."""
        self._handlers.append(handlers)
        if handlers.on_add is not None:
            for obj in self._cache.objects():
                handlers.on_add(obj)

        def unsubscribe() -> None:
            if handlers in self._handlers:
                self._handlers.remove(handlers)

        return unsubscribe

    @property
    def has_synced(self) -> bool:
        return self._health.synced.is_set()

    @property
    def healthy(self) -> bool:
        """Synced, and the last LIST or WATCH did not fail."""
        return self._health.healthy

    @property
    def last_error(self) -> Exception | None:
        """Why the last LIST or WATCH failed, until one succeeds again."""
        return self._health.last_error

    @property
    def health_changed(self) -> asyncio.Event:
        """Set whenever ``healthy`` flips; waiters clear it."""
        return self._health.changed

    async def wait_for_sync(self) -> None:
        await self._health.synced.wait()

    async def wait_for_answer(self) -> None:
        """Until the first LIST has been answered, with the objects or an error (:attr:`last_error`)."""
        await self._health.answered.wait()

    # --- running ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(
                self._run(), name=f"informer:{self.client.name}:{self.selection.resource.plural}"
            )

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None

    async def _run(self) -> None:
        failures = 0
        # Started again after stop(): resume watching from the last version seen, as a reconnect would.
        need_list = not self.resource_version
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    failures = 0
                await self._watch()
            except Gone:
                log.info(
                    "%s/%s: watch window expired; listing again",
                    self.client.name,
                    self.selection.resource.plural,
                )
                need_list = True
            except (KubeError, ValueError) as exc:
                self._health.failed(exc)
                failures += 1
                need_list = True
                delay = min(RELIST_BACKOFF_MAX, 0.2 * 2 ** min(failures, 10)) * (0.5 + random.random() / 2)
                log.warning(
                    "%s/%s: %s; listing again in %.1fs",
                    self.client.name,
                    self.selection.resource.plural,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)

    async def _list(self) -> None:
        selection = self.selection
        items, rv = await self.client.list(
            selection.resource,
            selection.namespace,
            label_selector=selection.label_selector,
            field_selector=selection.field_selector,
        )
        self.relists += 1
        fresh = {key_of(obj): obj for obj in items}
        for key in [k for k in self._cache if k not in fresh]:
            self._delete(key)
        for key, obj in fresh.items():
            self._upsert(key, obj)
        self.resource_version = rv
        self._health.listed()

    async def _watch(self) -> None:
        selection = self.selection
        async for event in self.client.watch(
            selection.resource,
            selection.namespace,
            resource_version=self.resource_version,
            label_selector=selection.label_selector,
            field_selector=selection.field_selector,
            timeout_seconds=self.watch_timeout,
        ):
            kind = event.get("type")
            obj = event.get("object") or {}
            rv = str(metadata(obj).get("resourceVersion") or "")
            if kind == "BOOKMARK":
                self.resource_version = rv or self.resource_version
                continue
            key = key_of(obj)
            if kind == "DELETED":
                self._delete(key, obj)
            elif kind in ("ADDED", "MODIFIED"):
                self._upsert(key, obj)
            if rv:
                self.resource_version = rv

    # --- store updates ---------------------------------------------------------------------------------------

    def _upsert(self, key: str, obj: Obj) -> None:
        old = self._cache.get(key)
        if self.transform is not None:
            obj = self.transform(obj, old)
        if old is not None and metadata(old).get("resourceVersion") == metadata(obj).get("resourceVersion"):
            return
        self._cache.put(key, obj)
        for handlers in self._handlers:
            try:
                if old is None:
                    if handlers.on_add is not None:
                        handlers.on_add(obj)
                elif handlers.on_update is not None:
                    handlers.on_update(old, obj)
            except Exception:
                log.exception("informer handler failed for %s", key)

    def _delete(self, key: str, final: Obj | None = None) -> None:
        old = self._cache.pop(key)
        if old is None:
            return
        for handlers in self._handlers:
            if handlers.on_delete is not None:
                try:
                    handlers.on_delete(final or old)
                except Exception:
                    log.exception("informer delete handler failed for %s", key)


class InformerFactory:
    """One informer per (resource, namespace, selectors) on a cluster, shared by every controller that asks."""

    def __init__(self, client: KubeClient, transform: Transform | None = None) -> None:
        """``transform``: what every informer of the factory keeps of an object (client-go's SetTransform), such
        as :data:`COMPACT`."""
        self.client = client
        self.transform = transform
        self._informers: dict[Selection, Informer] = {}

    def informer(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = None,
    ) -> Informer:
        """``transform``, when given, replaces the factory's for this informer; the first caller's stays."""
        key = Selection(resource, namespace, label_selector, field_selector)
        if key not in self._informers:
            self._informers[key] = Informer(
                self.client,
                resource,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                transform=transform or self.transform,
            )
        return self._informers[key]

    def start(self) -> None:
        for informer in self._informers.values():
            informer.start()

    async def wait_for_sync(self) -> None:
        await asyncio.gather(*(i.wait_for_sync() for i in self._informers.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(i.stop() for i in self._informers.values()))
