"""Durability for one local API server's store: SQLite, written by one thread that batches whatever writes are
waiting into one transaction.

A write's ``commit`` returns only after that transaction, so success is never reported before the write is
durable, and batching keeps hundreds of writes per second cheap. Each committed write's event is published on the
event loop, in resourceVersion order, before its ``commit`` returns. Without a path nothing is stored, but writes
still pass through the same thread, so events keep the same order and timing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from multiqueue.api.types import Obj
from multiqueue.local.apiserver.watchcache import Event

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
Row = tuple[str, ObjectKey, Obj]  # (resource, key, object)


class StoreClosed(Exception):
    """The store stopped while a write was waiting for its commit."""


@dataclasses.dataclass
class _Pending:
    rv: int
    resource: str
    key: ObjectKey
    data: str | None  # JSON of the new object, None for a delete
    event: Event
    done: asyncio.Future[None]


class Journal:
    """The SQLite file of one store and the thread that writes it. Call :meth:`start` on the store's loop."""

    def __init__(self, path: Path | None, publish: Callable[[Event], None]) -> None:
        self._path = path
        self._publish = publish  # called on the loop with each committed write's event
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writes: queue.Queue[list[_Pending] | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._batch: list[_Pending] = []
        self.closed = False

    def load(self) -> tuple[list[Row], int]:
        """Every stored object and the last resourceVersion handed out (0 without a path). Blocks: run it in a
        thread."""
        if self._path is None:
            return [], 0
        self._path.parent.mkdir(parents=True, exist_ok=True)
        db = self._connect()
        try:
            rows: list[Row] = [
                (resource, (namespace, name), json.loads(data))
                for resource, namespace, name, data in db.execute(
                    "SELECT resource, namespace, name, data FROM objects"
                )
            ]
            row = db.execute("SELECT value FROM state WHERE key = 'resourceVersion'").fetchone()
            return rows, 0 if row is None else int(row[0])
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

    async def commit(self, rv: int, resource: str, key: ObjectKey, obj: Obj | None, event: Event) -> None:
        """Write ``obj`` (None: delete) under ``key``; returns once it is durable and ``event`` is published."""
        if self.closed:
            raise StoreClosed("the API server is shutting down")
        assert self._loop is not None, "Store.open() was not awaited"
        data = None if obj is None else json.dumps(obj, separators=(",", ":"))
        pending = _Pending(rv, resource, key, data, event, self._loop.create_future())
        self._batch.append(pending)
        if len(self._batch) == 1:
            # Everything written during this turn of the event loop goes to the disk in one transaction.
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
                        _persist(db, writes)
                    except sqlite3.Error as exc:  # disk full, I/O error: fail the writes, keep serving
                        log.error("commit of %d writes failed: %s", len(writes), exc)
                        error = exc
                assert self._loop is not None
                self._loop.call_soon_threadsafe(self._committed, writes, error)
        finally:
            if db is not None:
                db.close()

    def _committed(self, writes: list[_Pending], error: BaseException | None) -> None:
        for p in writes:
            if error is not None:
                if not p.done.done():
                    p.done.set_exception(StoreClosed(f"storage failed: {error}"))
                continue
            self._publish(p.event)
            if not p.done.done():
                p.done.set_result(None)

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


def _persist(db: sqlite3.Connection, writes: list[_Pending]) -> None:
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
