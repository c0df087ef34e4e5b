"""Object storage for one local API server: an in-memory view, SQLite for durability, and a watch window.

Why this shape:

- Reads are served from memory, so GET and LIST never touch the disk.
- Every write gets the next resourceVersion of the cluster (one counter, like etcd's revision), is applied to
  memory at once (so conflict checks of later writes see it), and is committed to SQLite by one writer thread that
  batches whatever writes are waiting into one transaction. The caller's ``await`` returns only after that commit,
  so success is never reported before the write is durable, and batching keeps hundreds of writes per second cheap.
- Watch events are published only after their commit, in resourceVersion order, and kept in a bounded window;
  a watch that asks for a resourceVersion older than the window gets :class:`Expired` (the server's 410).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import logging
import queue
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any, Final

from multiqueue.api.meta import as_dict, as_list, metadata
from multiqueue.api.types import Obj

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects

DEFAULT_WINDOW: Final = 20_000
WATCHER_QUEUE_LIMIT: Final = 50_000


class Expired(Exception):
    """The requested resourceVersion is older than the watch window (HTTP 410 Gone, reason Expired)."""


class StoreClosed(Exception):
    """The store stopped while a write was waiting for its commit."""


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    type: str  # ADDED, MODIFIED or DELETED
    resource: str
    obj: Obj
    rv: int
    # The object before this change (None for ADDED): lets the garbage collector see removed owner references.
    old: Obj | None = None

    @property
    def namespace(self) -> str:
        return str(metadata(self.obj).get("namespace") or "")


@dataclasses.dataclass
class _Pending:
    rv: int
    resource: str
    key: ObjectKey
    data: str | None  # JSON of the new object, None for a delete
    event: Event
    done: asyncio.Future[None]


class Watcher:
    """One open watch: events matching its resource and namespace, queued until the handler sends them."""

    def __init__(self, store: Store, resource: str, namespace: str | None) -> None:
        self._store = store
        self.resource = resource
        self.namespace = namespace
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()

    def _offer(self, event: Event) -> None:
        if self.namespace and event.namespace != self.namespace:
            return
        if self._queue.qsize() >= WATCHER_QUEUE_LIMIT:
            # A consumer this far behind is cut off; it re-lists, as clients do after any broken watch.
            self._queue.put_nowait(None)
            self._store._unsubscribe(self)
            return
        self._queue.put_nowait(event)

    def _end(self) -> None:
        self._queue.put_nowait(None)

    async def next(self) -> Event | None:
        """The next event, or None once the watch has ended."""
        return await self._queue.get()

    def close(self) -> None:
        self._store._unsubscribe(self)

    async def __aiter__(self) -> AsyncIterator[Event]:
        while (event := await self.next()) is not None:
            yield event


class Store:
    """All objects of one cluster. Create with :meth:`open`; writes must happen on the store's event loop."""

    def __init__(self, path: Path | None, window: int = DEFAULT_WINDOW) -> None:
        self._path = path
        self._objects: dict[str, dict[ObjectKey, Obj]] = collections.defaultdict(dict)
        self._rv = 0
        self._base_rv = 0  # the resourceVersion at start-up: older events are not in the window
        self._window: collections.deque[Event] = collections.deque(maxlen=max(1, window))
        self._watchers: dict[str, set[Watcher]] = collections.defaultdict(set)
        self._listeners: list[Callable[[Event], None]] = []
        # owner UID -> objects that name it in ownerReferences, for garbage collection without full scans.
        self._dependents: dict[str, set[tuple[str, ObjectKey]]] = collections.defaultdict(set)
        self._by_uid: dict[str, tuple[str, ObjectKey]] = {}
        self._writes: queue.Queue[list[_Pending] | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._batch: list[_Pending] = []
        self._closed = False

    # --- lifecycle -------------------------------------------------------------------------------------------

    @classmethod
    async def open(cls, path: Path | None, window: int = DEFAULT_WINDOW) -> Store:
        store = cls(path, window)
        store._loop = asyncio.get_running_loop()
        if path is not None:
            await asyncio.to_thread(store._load)
        store._base_rv = store._rv
        store._writer = threading.Thread(target=store._write_loop, name=f"store-writer:{path}", daemon=True)
        store._writer.start()
        return store

    async def close(self) -> None:
        """Flush waiting writes, end every watch and stop the writer thread."""
        if self._closed:
            return
        self._flush()
        self._closed = True
        self._writes.put(None)
        if self._writer is not None:
            await asyncio.to_thread(self._writer.join)
        for watchers in list(self._watchers.values()):
            for watcher in list(watchers):
                watcher._end()
        self._watchers.clear()

    # --- reads -----------------------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion handed out (what a LIST reports)."""
        return self._rv

    @property
    def oldest_watchable(self) -> int:
        """Watches may start from this resourceVersion or any later one."""
        if len(self._window) == self._window.maxlen:
            return self._window[0].rv - 1
        return self._base_rv

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        return self._objects[resource].get((namespace, name))

    def list_objects(self, resource: str, namespace: str | None = None) -> list[Obj]:
        """Objects sorted by (namespace, name), the order continue tokens rely on."""
        objects = self._objects[resource]
        keys = sorted(k for k in objects if namespace is None or k[0] == namespace)
        return [objects[k] for k in keys]

    def count(self, resource: str) -> int:
        return len(self._objects[resource])

    def by_uid(self, uid: str) -> tuple[str, Obj] | None:
        """The live object with this UID and its resource key, if any."""
        found = self._by_uid.get(uid)
        if found is None:
            return None
        obj = self._objects[found[0]].get(found[1])
        return (found[0], obj) if obj is not None else None

    def dependents(self, owner_uid: str) -> list[tuple[str, Obj]]:
        """Objects whose ownerReferences name ``owner_uid``."""
        found = []
        for resource, key in list(self._dependents.get(owner_uid, ())):
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
        self._index_owners(resource, key, old, obj)
        event = Event("MODIFIED" if old is not None else "ADDED", resource, obj, rv, old)
        await self._commit(_Pending(rv, resource, key, _encode(obj), event, self._future()))
        return obj

    async def remove(self, resource: str, namespace: str, name: str) -> Obj | None:
        """Delete the object for good; the DELETED event carries a fresh resourceVersion, as upstream's does."""
        key = (namespace, name)
        old = self._objects[resource].pop(key, None)
        if old is None:
            return None
        rv = self.next_resource_version()
        final = {**old, "metadata": {**as_dict(old.get("metadata")), "resourceVersion": str(rv)}}
        self._index_owners(resource, key, old, None)
        await self._commit(
            _Pending(rv, resource, key, None, Event("DELETED", resource, final, rv, old), self._future())
        )
        return final

    def _future(self) -> asyncio.Future[None]:
        assert self._loop is not None, "Store.open() was not awaited"
        return self._loop.create_future()

    async def _commit(self, pending: _Pending) -> None:
        if self._closed:
            raise StoreClosed("the API server is shutting down")
        self._batch.append(pending)
        if len(self._batch) == 1:
            # Everything written during this turn of the event loop goes to the disk in one transaction.
            assert self._loop is not None
            self._loop.call_soon(self._flush)
        await asyncio.shield(pending.done)

    def _flush(self) -> None:
        if self._batch:
            batch, self._batch = self._batch, []
            self._writes.put(batch)

    def _write_loop(self) -> None:
        db = self._connect() if self._path is not None else None
        try:
            while True:
                batch = self._writes.get()
                if batch is None:
                    return
                # Gather every batch already waiting: one transaction, one fsync.
                batches = [batch]
                while True:
                    try:
                        more = self._writes.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        self._writes.put(None)
                        break
                    batches.append(more)
                writes = [p for b in batches for p in b]
                error: BaseException | None = None
                if db is not None:
                    try:
                        self._persist(db, writes)
                    except sqlite3.Error as exc:  # disk full, I/O error: fail the writes, keep serving
                        log.error("commit of %d writes failed: %s", len(writes), exc)
                        error = exc
                assert self._loop is not None
                self._loop.call_soon_threadsafe(self._committed, writes, error)
        finally:
            if db is not None:
                db.close()

    def _persist(self, db: sqlite3.Connection, writes: list[_Pending]) -> None:
        with db:
            for p in writes:
                if p.data is None:
                    db.execute(
                        "DELETE FROM objects WHERE resource = ? AND namespace = ? AND name = ?",
                        (p.resource, *p.key),
                    )
                else:
                    db.execute(
                        "INSERT OR REPLACE INTO objects (resource, namespace, name, data) VALUES (?, ?, ?, ?)",
                        (p.resource, *p.key, p.data),
                    )
            db.execute(
                "INSERT OR REPLACE INTO state (key, value) VALUES ('resourceVersion', ?)", (writes[-1].rv,)
            )

    def _committed(self, writes: list[_Pending], error: BaseException | None) -> None:
        for p in writes:
            if error is not None:
                if not p.done.done():
                    p.done.set_exception(StoreClosed(f"storage failed: {error}"))
                continue
            self._publish(p.event)
            if not p.done.done():
                p.done.set_result(None)

    # --- watch -----------------------------------------------------------------------------------------------

    def add_listener(self, listener: Callable[[Event], None]) -> None:
        """Called with every committed event of every resource (the garbage collector uses this)."""
        self._listeners.append(listener)

    def watch(self, resource: str, namespace: str | None, since: int) -> tuple[Watcher, list[Event]]:
        """A watcher for events after ``since`` and the already-committed events it must send first.

        Raises :class:`Expired` when ``since`` is older than the window.
        """
        if since < self.oldest_watchable:
            raise Expired(f"too old resource version: {since} ({self.oldest_watchable + 1})")
        backlog = [
            e
            for e in self._window
            if e.rv > since and e.resource == resource and (not namespace or e.namespace == namespace)
        ]
        watcher = Watcher(self, resource, namespace)
        self._watchers[resource].add(watcher)
        return watcher, backlog

    def _unsubscribe(self, watcher: Watcher) -> None:
        self._watchers[watcher.resource].discard(watcher)

    def _publish(self, event: Event) -> None:
        self._window.append(event)
        for watcher in list(self._watchers.get(event.resource, ())):
            watcher._offer(event)
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:
                log.exception("store listener failed on %s %s", event.type, event.resource)

    # --- owner index -----------------------------------------------------------------------------------------

    def _index_owners(self, resource: str, key: ObjectKey, old: Obj | None, new: Obj | None) -> None:
        if old is not None:
            self._by_uid.pop(str(metadata(old).get("uid") or ""), None)
        if new is not None and metadata(new).get("uid"):
            self._by_uid[str(metadata(new)["uid"])] = (resource, key)
        for uid in _owner_uids(old) - _owner_uids(new):
            self._dependents[uid].discard((resource, key))
            if not self._dependents[uid]:
                del self._dependents[uid]
        for uid in _owner_uids(new):
            self._dependents[uid].add((resource, key))

    # --- SQLite ----------------------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        assert self._path is not None
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        # FULL: the WAL is fsynced at each commit, so an acknowledged write survives power loss.
        db.execute("PRAGMA synchronous=FULL")
        db.execute(
            "CREATE TABLE IF NOT EXISTS objects (resource TEXT NOT NULL, namespace TEXT NOT NULL, "
            "name TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (resource, namespace, name)) WITHOUT ROWID"
        )
        db.execute("CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
        return db

    def _load(self) -> None:
        assert self._path is not None
        self._path.parent.mkdir(parents=True, exist_ok=True)
        db = self._connect()
        try:
            for resource, namespace, name, data in db.execute(
                "SELECT resource, namespace, name, data FROM objects"
            ):
                obj = json.loads(data)
                self._objects[resource][(namespace, name)] = obj
                self._index_owners(resource, (namespace, name), None, obj)
                self._rv = max(self._rv, int(metadata(obj).get("resourceVersion") or 0))
            row = db.execute("SELECT value FROM state WHERE key = 'resourceVersion'").fetchone()
            if row is not None:
                self._rv = max(self._rv, int(row[0]))
        finally:
            db.close()


def _encode(obj: Obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _owner_uids(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    refs: Iterable[Any] = as_list(metadata(obj).get("ownerReferences"))
    return {str(r["uid"]) for r in refs if isinstance(r, dict) and r.get("uid")}
