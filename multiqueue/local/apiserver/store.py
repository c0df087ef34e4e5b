"""Object storage for one local API server: an in-memory view of every object and the resourceVersion counter,
in front of durability (:mod:`.journal`), the owner index (:mod:`.owners`) and the watch window (:mod:`.watchcache`).

Why this shape:

- Reads are served from memory, so GET and LIST never touch the disk.
- Every write gets the next resourceVersion of the cluster (one counter, like etcd's revision), is applied to
  memory at once (so conflict checks of later writes see it), and is committed to SQLite by the journal's writer
  thread. The caller's ``await`` returns only after that commit, so success is never reported before the write is
  durable.
- Watch events are published only after their commit, in resourceVersion order, and kept in a bounded window;
  a watch that asks for a resourceVersion older than the window gets :class:`Expired` (the server's 410).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from pathlib import Path

from multiqueue.api.meta import as_dict, metadata
from multiqueue.api.types import Obj
from multiqueue.local.apiserver.journal import Journal, ObjectKey, StoreClosed
from multiqueue.local.apiserver.owners import OwnerIndex
from multiqueue.local.apiserver.watchcache import DEFAULT_WINDOW, Event, Expired, WatchCache, Watcher

# The names other modules import from here, wherever they are defined.
__all__ = ["DEFAULT_WINDOW", "Event", "Expired", "ObjectKey", "Store", "StoreClosed", "Watcher"]


class Store:
    """All objects of one cluster. Create with :meth:`open`; writes must happen on the store's event loop."""

    def __init__(self, path: Path | None, window: int = DEFAULT_WINDOW) -> None:
        self._objects: dict[str, dict[ObjectKey, Obj]] = collections.defaultdict(dict)
        self._rv = 0
        self._owners: OwnerIndex[tuple[str, ObjectKey]] = OwnerIndex()
        self._watch = WatchCache(window)
        self._journal = Journal(path, self._watch.publish)

    # --- lifecycle -------------------------------------------------------------------------------------------

    @classmethod
    async def open(cls, path: Path | None, window: int = DEFAULT_WINDOW) -> Store:
        store = cls(path, window)
        if path is not None:
            await asyncio.to_thread(store._load)
        store._watch.start_at(store._rv)
        store._journal.start()
        return store

    async def close(self) -> None:
        """Flush waiting writes, end every watch and stop the writer thread."""
        if self._journal.closed:
            return
        await self._journal.close()
        self._watch.end_all()

    def _load(self) -> None:
        rows, rv = self._journal.load()
        for resource, key, obj in rows:
            self._objects[resource][key] = obj
            self._owners.update((resource, key), None, obj)
            self._rv = max(self._rv, int(metadata(obj).get("resourceVersion") or 0))
        self._rv = max(self._rv, rv)

    # --- reads -----------------------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion handed out (what a LIST reports)."""
        return self._rv

    @property
    def published_resource_version(self) -> int:
        """The newest resourceVersion whose event watchers have been offered (writes still committing are not)."""
        return self._watch.last_rv

    @property
    def oldest_watchable(self) -> int:
        """Watches may start from this resourceVersion or any later one."""
        return self._watch.oldest_watchable

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        return self._objects[resource].get((namespace, name))

    def list_objects(self, resource: str, namespace: str | None = None) -> list[Obj]:
        """Objects sorted by (namespace, name), the order continue tokens rely on."""
        objects = self._objects[resource]
        keys = sorted(k for k in objects if namespace is None or k[0] == namespace)
        return [objects[k] for k in keys]

    def objects_at(self, resource: str, namespace: str | None, rv: int) -> list[Obj]:
        """The objects as they were at ``rv`` (a LIST with resourceVersionMatch=Exact), sorted as
        :meth:`list_objects`: today's, with the changes after ``rv`` undone from the watch window.
        :class:`Expired` when ``rv`` is older than the window."""
        objects = {
            (str(metadata(o).get("namespace") or ""), str(metadata(o).get("name"))): o
            for o in self.list_objects(resource, namespace)
        }
        for event in reversed(self._watch.since(resource, namespace, rv)):
            meta = metadata(event.obj)
            key = (str(meta.get("namespace") or ""), str(meta.get("name")))
            if event.old is None:
                objects.pop(key, None)
            else:
                objects[key] = event.old
        return [objects[k] for k in sorted(objects)]

    def count(self, resource: str) -> int:
        return len(self._objects[resource])

    def by_uid(self, uid: str) -> tuple[str, Obj] | None:
        """The live object with this UID and its resource key, if any."""
        found = self._owners.locate(uid)
        if found is None:
            return None
        obj = self._objects[found[0]].get(found[1])
        return (found[0], obj) if obj is not None else None

    def dependents(self, owner_uid: str) -> list[tuple[str, Obj]]:
        """Objects whose ownerReferences name ``owner_uid``."""
        found = []
        for resource, key in self._owners.dependents(owner_uid):
            obj = self._objects[resource].get(key)
            if obj is not None:
                found.append((resource, obj))
        return found

    # --- writes ----------------------------------------------------------------------------------------------

    def next_resource_version(self) -> int:
        self._rv += 1
        return self._rv

    async def put(self, resource: str, obj: Obj) -> Obj:
        """Create or replace ``obj``; the caller has checked preconditions and set everything but the RV."""
        meta = as_dict(obj.get("metadata"))
        key = (str(meta.get("namespace") or ""), str(meta["name"]))
        old = self._objects[resource].get(key)
        rv = self.next_resource_version()
        meta["resourceVersion"] = str(rv)
        self._objects[resource][key] = obj
        self._owners.update((resource, key), old, obj)
        event = Event("MODIFIED" if old is not None else "ADDED", resource, obj, rv, old)
        await self._journal.commit(rv, resource, key, obj, event)
        return obj

    async def remove(self, resource: str, namespace: str, name: str) -> Obj | None:
        """Delete the object for good; the DELETED event carries a fresh resourceVersion, as upstream's does."""
        key = (namespace, name)
        old = self._objects[resource].pop(key, None)
        if old is None:
            return None
        rv = self.next_resource_version()
        final = {**old, "metadata": {**as_dict(old.get("metadata")), "resourceVersion": str(rv)}}
        self._owners.update((resource, key), old, None)
        await self._journal.commit(rv, resource, key, None, Event("DELETED", resource, final, rv, old))
        return final

    # --- watch -----------------------------------------------------------------------------------------------

    def add_listener(self, listener: Callable[[Event], None]) -> None:
        """Called with every committed event of every resource (the garbage collector uses this)."""
        self._watch.add_listener(listener)

    def watch(self, resource: str, namespace: str | None, since: int) -> tuple[Watcher, list[Event]]:
        """A watcher for events after ``since`` and the already-committed events it must send first.

        Raises :class:`Expired` when ``since`` is older than the window.
        """
        return self._watch.watch(resource, namespace, since)
