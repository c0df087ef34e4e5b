"""Object storage for one local API server: an in-memory view of every object and the resourceVersion counter,
in front of durability (:mod:`.journal`), the owner index (:mod:`.owners`) and the watch window (:mod:`.watchcache`).

Why this shape:

- Reads are served from memory, so GET and LIST never touch the disk.
- Every write gets the next resourceVersion of the cluster (one counter, like etcd's revision) and is applied to
  the writers' view at once, so the checks of later writes (preconditions, names taken) see it. Clients see only
  committed state: while writes to an object are in flight, reads get the object as last committed, and the
  resourceVersion a LIST reports is the last committed one. So no client ever sees a resourceVersion that a crash
  could hand out again.
- Commits complete in resourceVersion order. The caller's ``await`` returns only after its commit; a failed
  commit leaves nothing of its write (nor of the writes decided on top of it) in memory.
- Watch events are published at their commit, in resourceVersion order, and kept in a window bounded by count and
  bytes that is stored with the objects, so it survives a restart; a watch that asks for a resourceVersion older
  than the window gets :class:`Expired` (the server's 410).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from pathlib import Path
from typing import Final

from multiqueue.api import fastjson
from multiqueue.api.meta import as_dict, metadata
from multiqueue.api.types import Obj
from multiqueue.apiserver.journal import Journal, ObjectKey, StoreClosed, Write
from multiqueue.apiserver.owners import OwnerIndex
from multiqueue.apiserver.watchcache import (
    DEFAULT_WINDOW,
    DEFAULT_WINDOW_BYTES,
    Event,
    Expired,
    WatchCache,
    Watcher,
)
from multiqueue.loop.source import Unsubscribe

# The names other modules import from here, wherever they are defined.
__all__ = [
    "DEFAULT_WINDOW",
    "DEFAULT_WINDOW_BYTES",
    "Event",
    "Expired",
    "ObjectKey",
    "Store",
    "StoreClosed",
    "Watcher",
]


def _key(obj: Obj) -> ObjectKey:
    meta = metadata(obj)
    return (str(meta.get("namespace") or ""), str(meta.get("name")))


def _json(obj: Obj) -> str:
    return fastjson.dumps(obj).decode()


# The most JSON one object may take in the store: no more than a request may carry (--max-request-bytes), so a
# patch or an update cannot grow an object past what a client could send. kube-apiserver's own bound is etcd's
# 1.5 MiB request limit on the object's protobuf, which is smaller than its JSON (a difference that is listed).
MAX_OBJECT_BYTES: Final = 3 * 1024 * 1024


class ObjectTooLarge(ValueError):
    """A write whose object is larger than the store keeps; nothing of it is stored."""

    def __init__(self, size: int) -> None:
        super().__init__(
            f"Request entity too large: the object is {size} bytes of JSON, over the {MAX_OBJECT_BYTES} "
            "this server stores"
        )


class Store:
    """All objects of one cluster. Create with :meth:`open`; writes must happen on the store's event loop."""

    def __init__(
        self, path: Path | None, window: int = DEFAULT_WINDOW, window_bytes: int = DEFAULT_WINDOW_BYTES
    ) -> None:
        self._latest: dict[str, dict[ObjectKey, Obj]] = collections.defaultdict(dict)  # writes in flight too
        # For objects with writes in flight: the value last committed (None: none), and how many writes are left.
        self._committed: dict[str, dict[ObjectKey, Obj | None]] = collections.defaultdict(dict)
        self._in_flight: dict[tuple[str, ObjectKey], int] = {}
        self._rv = 0  # the last resourceVersion handed to a write
        self._committed_rv = 0
        self._owners: OwnerIndex[tuple[str, ObjectKey]] = OwnerIndex()
        self._watch = WatchCache(window, window_bytes)
        self._journal = Journal(path, self._on_commit, self._on_abort)

    # --- lifecycle -------------------------------------------------------------------------------------------

    @classmethod
    async def open(
        cls, path: Path | None, window: int = DEFAULT_WINDOW, window_bytes: int = DEFAULT_WINDOW_BYTES
    ) -> Store:
        store = cls(path, window, window_bytes)
        loaded = await asyncio.to_thread(store._journal.load)
        rv = loaded.resource_version
        for resource, key, obj in loaded.rows:
            store._latest[resource][key] = obj
            store._owners.update((resource, key), None, obj)
            rv = max(rv, int(metadata(obj).get("resourceVersion") or 0))
        store._rv = store._committed_rv = rv
        store._watch.start_at(rv, loaded.history)
        store._journal.start()
        return store

    async def close(self) -> None:
        """Flush waiting writes, end every watch and stop the writer thread."""
        if self._journal.closed:
            return
        await self._journal.close()
        self._watch.end_all()

    # --- reads: committed state only --------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The newest committed resourceVersion (what a LIST reports)."""
        return self._committed_rv

    @property
    def published_resource_version(self) -> int:
        """The newest resourceVersion whose event watchers have been offered."""
        return self._watch.last_rv

    @property
    def oldest_watchable(self) -> int:
        """Watches may start from this resourceVersion or any later one."""
        return self._watch.oldest_watchable

    async def wait_for(self, rv: int) -> None:
        """Return once ``rv`` is committed."""
        await self._watch.wait_for(rv)

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        """The object as last committed."""
        key = (namespace, name)
        committed = self._committed.get(resource)
        if committed and key in committed:
            return committed[key]
        return self._latest[resource].get(key)

    def list_objects(self, resource: str, namespace: str | None = None) -> list[Obj]:
        """Committed objects sorted by (namespace, name), the order continue tokens rely on."""
        objects = self._latest[resource]
        committed = self._committed.get(resource)
        if not committed:
            keys = sorted(k for k in objects if namespace is None or k[0] == namespace)
            return [objects[k] for k in keys]
        keys = sorted(k for k in objects.keys() | committed.keys() if namespace is None or k[0] == namespace)
        found = (committed[k] if k in committed else objects[k] for k in keys)
        return [o for o in found if o is not None]

    def objects_at(self, resource: str, namespace: str | None, rv: int) -> list[Obj]:
        """The objects as they were at ``rv`` (a LIST with resourceVersionMatch=Exact, a continued LIST), sorted
        as :meth:`list_objects`: today's, with the changes after ``rv`` undone from the watch window.
        :class:`Expired` when ``rv`` is older than the window."""
        objects = {_key(o): o for o in self.list_objects(resource, namespace)}
        for event in reversed(self._watch.since(resource, namespace, rv)):
            key = _key(event.obj)
            if event.old is None:
                objects.pop(key, None)
            else:
                objects[key] = event.old
        return [objects[k] for k in sorted(objects)]

    # --- the writers' view: what later writes are checked against ----------------------------------------------

    def latest(self, resource: str, namespace: str, name: str) -> Obj | None:
        """The object with every accepted write applied, committed or not: what a write must be checked against."""
        return self._latest[resource].get((namespace, name))

    def list_latest(self, resource: str, namespace: str | None = None) -> list[Obj]:
        """Like :meth:`list_objects`, with writes still in flight applied."""
        objects = self._latest[resource]
        return [objects[k] for k in sorted(k for k in objects if namespace is None or k[0] == namespace)]

    def by_uid(self, uid: str) -> tuple[str, Obj] | None:
        """The live object with this UID and its resource key, if any (writers' view: the garbage collector's)."""
        found = self._owners.locate(uid)
        if found is None:
            return None
        obj = self._latest[found[0]].get(found[1])
        return (found[0], obj) if obj is not None else None

    def dependents(self, owner_uid: str) -> list[tuple[str, Obj]]:
        """Objects whose ownerReferences name ``owner_uid`` (writers' view)."""
        found = []
        for resource, key in self._owners.dependents(owner_uid):
            obj = self._latest[resource].get(key)
            if obj is not None:
                found.append((resource, obj))
        return found

    # --- writes ----------------------------------------------------------------------------------------------

    async def put(self, resource: str, obj: Obj) -> Obj:
        """Create or replace ``obj``; the caller has checked preconditions and set everything but the RV."""
        meta = as_dict(obj.get("metadata"))
        key = (str(meta.get("namespace") or ""), str(meta["name"]))
        old = self._latest[resource].get(key)
        self._check_open()
        rv = self._rv + 1
        meta["resourceVersion"] = str(rv)
        data = _json(obj)
        if len(data) > MAX_OBJECT_BYTES:
            raise ObjectTooLarge(len(data))
        old_data = None if old is None else _json(old)
        event = Event(
            "MODIFIED" if old is not None else "ADDED", resource, obj, rv, old, _size(data, old_data)
        )
        await self._write(key, obj, Write(key, data, event, data, old_data, self._watch.oldest_watchable))
        return obj

    async def remove(self, resource: str, namespace: str, name: str) -> Obj | None:
        """Delete the object for good; the DELETED event carries a fresh resourceVersion, as upstream's does."""
        key = (namespace, name)
        old = self._latest[resource].get(key)
        if old is None:
            return None
        self._check_open()
        rv = self._rv + 1
        final = {**old, "metadata": {**as_dict(old.get("metadata")), "resourceVersion": str(rv)}}
        data, old_data = _json(final), _json(old)
        event = Event("DELETED", resource, final, rv, old, _size(data, old_data))
        await self._write(key, None, Write(key, None, event, data, old_data, self._watch.oldest_watchable))
        return final

    def _check_open(self) -> None:
        if self._journal.closed:
            raise StoreClosed("the API server is shutting down")

    async def _write(self, key: ObjectKey, obj: Obj | None, write: Write) -> None:
        """Apply ``write`` to the writers' view, keeping the committed value for readers, and wait for it."""
        resource = write.event.resource
        objects = self._latest[resource]
        old = objects.get(key)
        flight = (resource, key)
        if flight not in self._in_flight:
            self._committed[resource][key] = old
        self._in_flight[flight] = self._in_flight.get(flight, 0) + 1
        self._rv = write.event.rv
        if obj is None:
            objects.pop(key, None)
        else:
            objects[key] = obj
        self._owners.update(flight, old, obj)
        await asyncio.shield(self._journal.submit(write))

    def _on_commit(self, event: Event) -> None:
        """``event``'s write is durable: readers see it from now on, then watchers and listeners are told."""
        key = _key(event.obj)
        flight = (event.resource, key)
        left = self._in_flight.pop(flight) - 1
        if left:
            self._in_flight[flight] = left
            self._committed[event.resource][key] = None if event.type == "DELETED" else event.obj
        else:
            del self._committed[event.resource][key]
        self._committed_rv = event.rv
        self._watch.publish(event)

    def _on_abort(self) -> None:
        """A commit failed: every write in flight fails, so the writers' view goes back to the committed one."""
        for (resource, key), _ in self._in_flight.items():
            committed = self._committed[resource].pop(key)
            objects = self._latest[resource]
            self._owners.update((resource, key), objects.get(key), committed)
            if committed is None:
                objects.pop(key, None)
            else:
                objects[key] = committed
        self._in_flight.clear()

    # --- watch -----------------------------------------------------------------------------------------------

    def add_handlers(self, listener: Callable[[Event], None]) -> Unsubscribe:
        """Call ``listener`` with every committed event of every resource (the server's own controllers feed on
        this), until what this returns is called."""
        return self._watch.add_listener(listener)

    async def wait_for_sync(self) -> None:
        """The store is its own cache, complete once opened: nothing to wait for."""

    def watch(self, resource: str, namespace: str | None, since: int) -> tuple[Watcher, list[Event]]:
        """A watcher for events after ``since`` and the already-committed events it must send first.

        Raises :class:`Expired` when ``since`` is older than the window.
        """
        return self._watch.watch(resource, namespace, since)


def _size(data: str, old_data: str | None) -> int:
    """What an event weighs against the watch window's byte budget."""
    return len(data) + len(old_data or "")
