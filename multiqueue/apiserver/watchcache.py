"""The watch side of a local API server's store: committed events, the bounded window a watch may resume from,
and the open watches and listeners they are fanned out to (upstream's watch cache).

Events arrive here only after their commit, in resourceVersion order; a watch that asks for a resourceVersion
older than the window gets :class:`Expired` (the server's 410). The window is bounded by a number of events and by
the bytes of their objects, so a large object written many times cannot hold more than the budget in memory.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable
from typing import Final

from multiqueue.api.meta import metadata
from multiqueue.api.types import Obj
from multiqueue.loop.source import Unsubscribe

log = logging.getLogger(__name__)

DEFAULT_WINDOW: Final = 20_000
DEFAULT_WINDOW_BYTES: Final = 32 * 1024 * 1024
WATCHER_QUEUE_LIMIT: Final = 50_000


class Expired(Exception):
    """The requested resourceVersion is older than the watch window (HTTP 410 Gone, reason Expired)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    type: str  # ADDED, MODIFIED or DELETED
    resource: str
    obj: Obj
    rv: int
    # The object before this change (None for ADDED): lets the garbage collector see removed owner references.
    old: Obj | None = None
    # What the event weighs against the window's byte budget: the length of its objects' JSON.
    size: int = 0

    @property
    def namespace(self) -> str:
        return str(metadata(self.obj).get("namespace") or "")


class Watcher:
    """One open watch: events matching its resource and namespace, queued until the handler sends them."""

    def __init__(self, cache: WatchCache, resource: str, namespace: str | None) -> None:
        self._cache = cache
        self.resource = resource
        self.namespace = namespace
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()

    def _offer(self, event: Event) -> None:
        if self.namespace and event.namespace != self.namespace:
            return
        if self._queue.qsize() >= WATCHER_QUEUE_LIMIT:
            # A consumer this far behind is cut off; it re-lists, as clients do after any broken watch.
            self._queue.put_nowait(None)
            self._cache._unsubscribe(self)
            return
        self._queue.put_nowait(event)

    def _end(self) -> None:
        self._queue.put_nowait(None)

    @property
    def drained(self) -> bool:
        """Every event offered so far has been taken."""
        return self._queue.empty()

    async def next(self) -> Event | None:
        """The next event, or None once the watch has ended."""
        return await self._queue.get()

    def ready(self, most: int = 512) -> list[Event | None]:
        """The events queued now (at most ``most``), without waiting; None among them: the watch has ended."""
        taken: list[Event | None] = []
        while len(taken) < most and not self._queue.empty():
            taken.append(self._queue.get_nowait())
        return taken

    def close(self) -> None:
        self._cache._unsubscribe(self)

    async def __aiter__(self) -> AsyncIterator[Event]:
        while (event := await self.next()) is not None:
            yield event


class WatchCache:
    """The last committed events of every resource (at most ``window`` of them and ``window_bytes`` of objects),
    and who is told of the next ones."""

    def __init__(self, window: int = DEFAULT_WINDOW, window_bytes: int = DEFAULT_WINDOW_BYTES) -> None:
        self._count = max(1, window)
        self._budget = window_bytes
        self._window: collections.deque[Event] = collections.deque()
        self._bytes = 0
        self._last_rv = 0  # the newest event published, of any resource
        self._watchers: dict[str, set[Watcher]] = collections.defaultdict(set)
        self._listeners: list[Callable[[Event], None]] = []
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []  # (resourceVersion, woken once it is here)

    def start_at(self, rv: int, history: list[Event]) -> None:
        """The store holds everything up to ``rv``; ``history`` (oldest first) is what survives of the events
        before it, so watches may resume from the first of them on."""
        self._window.clear()
        self._bytes = 0
        for event in history:
            self._record(event)
        self._last_rv = rv

    @property
    def last_rv(self) -> int:
        """The newest resourceVersion whose event every watcher has been offered: a watch that has sent all its
        queued events is current up to here, so a bookmark may carry it."""
        return self._last_rv

    @property
    def oldest_watchable(self) -> int:
        """Watches may start from this resourceVersion or any later one: every event after it is in the window."""
        return self._window[0].rv - 1 if self._window else self._last_rv

    async def wait_for(self, rv: int) -> None:
        """Return once an event at or after ``rv`` has been published (at once if one has)."""
        if self._last_rv >= rv:
            return
        entry = (rv, asyncio.get_running_loop().create_future())
        self._waiting.append(entry)
        try:
            await entry[1]
        finally:
            self._waiting.remove(entry)

    def add_listener(self, listener: Callable[[Event], None]) -> Unsubscribe:
        """Called with every committed event of every resource, until what this returns is called."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def watch(self, resource: str, namespace: str | None, since: int) -> tuple[Watcher, list[Event]]:
        """A watcher for events after ``since`` and the already-committed events it must send first.

        Raises :class:`Expired` when ``since`` is older than the window.
        """
        backlog = self.since(resource, namespace, since)
        watcher = Watcher(self, resource, namespace)
        self._watchers[resource].add(watcher)
        return watcher, backlog

    def since(self, resource: str, namespace: str | None, rv: int) -> list[Event]:
        """The committed events of ``resource`` after ``rv``, oldest first; :class:`Expired` when ``rv`` is older
        than the window."""
        if rv < self.oldest_watchable:
            raise Expired(f"too old resource version: {rv} ({self.oldest_watchable})")
        return [
            e
            for e in self._window
            if e.rv > rv and e.resource == resource and (not namespace or e.namespace == namespace)
        ]

    def publish(self, event: Event) -> None:
        """Record a committed event and hand it to every watcher of its resource and every listener."""
        self._record(event)
        self._last_rv = event.rv
        for rv, woken in self._waiting:
            if rv <= event.rv and not woken.done():
                woken.set_result(None)
        for watcher in list(self._watchers.get(event.resource, ())):
            watcher._offer(event)
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:
                log.exception("store listener failed on %s %s", event.type, event.resource)

    def _record(self, event: Event) -> None:
        """Keep ``event``, letting the oldest go while the window is over either bound (the newest one stays,
        whatever it weighs)."""
        self._window.append(event)
        self._bytes += event.size
        while len(self._window) > 1 and (len(self._window) > self._count or self._bytes > self._budget):
            self._bytes -= self._window.popleft().size

    def end_all(self) -> None:
        """End every open watch (the store is closing)."""
        for watchers in list(self._watchers.values()):
            for watcher in list(watchers):
                watcher._end()
        self._watchers.clear()

    def _unsubscribe(self, watcher: Watcher) -> None:
        self._watchers[watcher.resource].discard(watcher)
