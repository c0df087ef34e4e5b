"""Durability for one local API server's store: SQLite, written by one thread that batches whatever writes are
waiting into one transaction.

A write's future resolves only after that transaction, so success is never reported before the write is durable,
and batching keeps hundreds of writes per second cheap. The same transaction records each write's event and lets
events older than the watch window go, so a watch resumed after a restart (even after a crash) still finds every
event after its resourceVersion. Outcomes reach the event loop in resourceVersion order. When a transaction fails,
every write handed over before the store has undone them in memory fails with it: those later writes were decided
on top of the failed ones. Without a path nothing is stored, but writes still pass through the same thread, so
events keep the same order and timing.

The database and its WAL hold Secrets: the file is created 0600 (SQLite gives the WAL and shared-memory files the
database's mode) in a directory made 0700.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

from multiqueue.api.meta import metadata
from multiqueue.api.types import Obj
from multiqueue.apiserver.watchcache import Event

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
Row = tuple[str, ObjectKey, Obj]  # (resource, key, object)
FILE_MODE: Final = 0o600
DIRECTORY_MODE: Final = 0o700


class StoreClosed(Exception):
    """The store stopped, or its storage failed, while a write was waiting for its commit."""


@dataclasses.dataclass
class Write:
    """One object write on its way to the disk."""

    key: ObjectKey
    data: str | None  # JSON of the new object, None for a delete
    event: Event
    event_data: str  # JSON of the event's object
    old_data: str | None  # JSON of the object before, None for a create
    keep_after: int  # events at or before this resourceVersion have left the watch window
    epoch: int = 0
    done: asyncio.Future[None] | None = None


@dataclasses.dataclass(frozen=True)
class Loaded:
    """What a store starts from: every object, the last committed resourceVersion, the events kept (oldest
    first)."""

    rows: list[Row]
    resource_version: int
    history: list[Event]


class Journal:
    """The SQLite file of one store and the thread that writes it. Call :meth:`start` on the store's loop.

    ``on_commit`` is called on the loop with each committed write's event, before its future resolves;
    ``on_abort`` once per failed transaction, before the failed writes' futures do: the store then undoes every
    write still in flight, all of which fail.
    """

    def __init__(
        self, path: Path | None, on_commit: Callable[[Event], None], on_abort: Callable[[], None]
    ) -> None:
        self._path = path
        self._on_commit = on_commit
        self._on_abort = on_abort
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writes: queue.Queue[list[Write] | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._batch: list[Write] = []
        self._epoch = 0  # writes of an epoch a failure ended are never written
        self._failed_through = -1  # the writer thread's view of the last such epoch
        self.closed = False

    def load(self) -> Loaded:
        """What the database holds (nothing without a path). Blocks: run it in a thread."""
        if self._path is None:
            return Loaded([], 0, [])
        _prepare_files(self._path)
        db = self._connect()
        try:
            rows: list[Row] = [
                (resource, (namespace, name), json.loads(data))
                for resource, namespace, name, data in db.execute(
                    "SELECT resource, namespace, name, data FROM objects"
                )
            ]
            row = db.execute("SELECT value FROM state WHERE key = 'resourceVersion'").fetchone()
            history = _events(db.execute("SELECT rv, type, resource, data, old FROM events ORDER BY rv"))
            rv = max([0 if row is None else int(row[0]), *(e.rv for e in history[-1:])])
            return Loaded(rows, rv, history)
        finally:
            db.close()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._writer = threading.Thread(
            target=self._write_loop, name=f"store-writer:{self._path}", daemon=True
        )
        self._writer.start()

    async def close(self) -> None:
        """Flush waiting writes and stop the writer thread once it has committed them."""
        self._flush()
        self.closed = True
        self._writes.put(None)
        if self._writer is not None:
            await asyncio.to_thread(self._writer.join)

    def submit(self, write: Write) -> asyncio.Future[None]:
        """Hand ``write`` to the writer; the future resolves once it is durable and its event published (raises
        :class:`StoreClosed` if it never will be). Call nothing that awaits between deciding a write and this."""
        if self.closed:
            raise StoreClosed("the API server is shutting down")
        assert self._loop is not None, "Store.open() was not awaited"
        write.epoch = self._epoch
        write.done = self._loop.create_future()
        self._batch.append(write)
        if len(self._batch) == 1:
            # Everything written during this turn of the event loop goes to the disk in one transaction.
            self._loop.call_soon(self._flush)
        return write.done

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
                writes = [w for b in batches for w in b]
                doomed = [w for w in writes if w.epoch <= self._failed_through]
                fresh = writes[len(doomed) :]
                error: BaseException | None = None
                if db is not None and fresh:
                    try:
                        _persist(db, fresh)
                    except sqlite3.Error as exc:  # disk full, I/O error: fail the writes, keep serving
                        log.error("commit of %d writes failed: %s", len(fresh), exc)
                        error = exc
                        self._failed_through = max(w.epoch for w in fresh)
                assert self._loop is not None
                self._loop.call_soon_threadsafe(self._settle, doomed, fresh, error)
        finally:
            if db is not None:
                db.close()

    def _settle(self, doomed: list[Write], fresh: list[Write], error: BaseException | None) -> None:
        """On the loop: report each write's outcome, in resourceVersion order."""
        failed = doomed + fresh if error is not None else doomed
        if failed and failed[-1].epoch == self._epoch:
            self._epoch += 1
            self._on_abort()
        for write in failed:
            _resolve(write, StoreClosed(f"storage failed: {error or 'an earlier commit failed'}"))
        if error is None:
            for write in fresh:
                self._on_commit(write.event)
                _resolve(write, None)

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
        db.execute(
            "CREATE TABLE IF NOT EXISTS events (rv INTEGER PRIMARY KEY, type TEXT NOT NULL, "
            "resource TEXT NOT NULL, data TEXT NOT NULL, old TEXT)"
        )
        return db


def _prepare_files(path: Path) -> None:
    """The directory 0700 and the database 0600 before SQLite opens it, whatever an older version left."""
    path.parent.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
    path.parent.chmod(DIRECTORY_MODE)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE))
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if file.exists():
            file.chmod(FILE_MODE)


def _resolve(write: Write, error: BaseException | None) -> None:
    assert write.done is not None
    if write.done.done():
        return
    if error is None:
        write.done.set_result(None)
    else:
        write.done.set_exception(error)


def _events(rows: sqlite3.Cursor) -> list[Event]:
    """Stored events, each ``old`` shared with the previous event of its object when they are the same."""
    events: list[Event] = []
    last: dict[tuple[str, str, str], tuple[str, Obj]] = {}  # (resource, namespace, name) -> (JSON, object)
    for rv, type_, resource, data, old_data in rows:
        obj = json.loads(data)
        meta = metadata(obj)
        key = (resource, str(meta.get("namespace") or ""), str(meta.get("name")))
        previous = last.get(key)
        old = None
        if old_data is not None:
            old = previous[1] if previous is not None and previous[0] == old_data else json.loads(old_data)
        events.append(Event(type_, resource, obj, int(rv), old, len(data) + len(old_data or "")))
        last[key] = (data, obj)
    return events


def _persist(db: sqlite3.Connection, writes: list[Write]) -> None:
    """One transaction: the connection autocommits each statement unless one is begun (a crash between the
    statements of a write would otherwise keep some of them)."""
    with db:
        db.execute("BEGIN IMMEDIATE")
        for w in writes:
            resource = w.event.resource
            if w.data is None:
                db.execute(
                    "DELETE FROM objects WHERE resource = ? AND namespace = ? AND name = ?",
                    (resource, *w.key),
                )
            else:
                db.execute(
                    "INSERT OR REPLACE INTO objects (resource, namespace, name, data) VALUES (?, ?, ?, ?)",
                    (resource, *w.key, w.data),
                )
            db.execute(
                "INSERT OR REPLACE INTO events (rv, type, resource, data, old) VALUES (?, ?, ?, ?, ?)",
                (w.event.rv, w.event.type, resource, w.event_data, w.old_data),
            )
        db.execute("DELETE FROM events WHERE rv <= ?", (max(w.keep_after for w in writes),))
        db.execute(
            "INSERT OR REPLACE INTO state (key, value) VALUES ('resourceVersion', ?)", (writes[-1].event.rv,)
        )
