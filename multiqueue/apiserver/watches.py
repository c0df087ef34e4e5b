"""One WATCH stream, as upstream's watch cache serves it: the current objects first when asked (ending with a
BOOKMARK so marked), then every change after the starting resourceVersion that the selectors let through, and
bookmarks that keep even a filtered watch's resourceVersion fresh.

Selectors apply to both sides of a change: an object that stops matching is DELETED for this watch (its last
matching state, at the change's resourceVersion), one that starts matching is ADDED. Bookmarks come every
``interval`` (upstream: a minute) and once more 2 seconds before the watch times out, whether or not events flow,
and only once they can carry a resourceVersion newer than the watch started from.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Final

from multiqueue.api.meta import as_dict
from multiqueue.api.types import Obj
from multiqueue.apiserver.resources import ResourceType
from multiqueue.apiserver.store import Event, Store

INITIAL_EVENTS_END: Final = "k8s.io/initial-events-end"
# Upstream's last bookmark comes this long before the watch's deadline, so a client resumes close to now.
PRE_TIMEOUT: Final = 2.0

Send = Callable[[str, Obj], Awaitable[None]]
Flush = Callable[[], Awaitable[None]]


def next_bookmark(now: float, interval: float, deadline: float) -> float | None:
    """When the next bookmark is due; None when the watch ends before one could be (upstream's nextBookmarkTime)."""
    due = min(now + interval, deadline - PRE_TIMEOUT)
    return due if due >= now else None


def leaving(event: Event) -> Obj:
    """What a watch whose selectors ``event`` takes its object out of sees: the object as it last matched, at the
    event's resourceVersion."""
    old = event.old or event.obj
    return {**old, "metadata": {**as_dict(old.get("metadata")), "resourceVersion": str(event.rv)}}


def seen_as(event: Event, matches: Callable[[Obj], bool]) -> tuple[str, Obj] | None:
    """The event a watch with these selectors gets for ``event``, if any."""
    if event.type == "DELETED":
        return ("DELETED", event.obj) if matches(event.obj) else None
    now_matches = matches(event.obj)
    before = event.old is not None and matches(event.old)
    if now_matches:
        return ("MODIFIED" if before else "ADDED", event.obj)
    return ("DELETED", leaving(event)) if before else None


@dataclasses.dataclass
class WatchStream:
    """What one watch request asked for; :meth:`run` sends it until the timeout or the store closes."""

    store: Store
    rtype: ResourceType
    namespace: str | None
    matches: Callable[[Obj], bool]
    send: Send
    # Events sent together go out together: ``send`` may hold them until this is awaited, after each batch.
    flush: Flush
    bookmarks: bool
    timeout: float
    interval: float

    def bookmark(self, rv: int, initial_events_end: bool = False) -> Obj:
        meta: Obj = {"resourceVersion": str(rv)}
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return {"kind": self.rtype.kind, "apiVersion": self.rtype.api_version, "metadata": meta}

    async def run(self, since: int, initial: bool) -> None:
        """Events after ``since``; with ``initial``, the objects as of ``since`` first. Raises
        :class:`~multiqueue.apiserver.store.Expired` before sending anything when ``since`` is too old."""
        started = time.monotonic()
        deadline = started + self.timeout
        watcher, backlog = self.store.watch(self.rtype.key, self.namespace, since)
        try:
            if initial:
                for obj in self.store.list_objects(self.rtype.key, self.namespace):
                    if self.matches(obj):
                        await self.send("ADDED", obj)
                if self.bookmarks:
                    await self.send("BOOKMARK", self.bookmark(since, initial_events_end=True))
            latest = since  # every event of this resource up to here has been handled
            for missed in backlog:
                latest = await self._handle(missed, latest)
            await self.flush()
            due = next_bookmark(started, self.interval, deadline)
            while (now := time.monotonic()) < deadline:
                wake = deadline if due is None else min(deadline, due)
                # What is queued already goes out in one write; only an empty queue is waited on.
                batch = watcher.ready()
                if not batch:
                    with contextlib.suppress(TimeoutError):
                        batch = [
                            await asyncio.wait_for(watcher.next(), max(0.0, wake - now)),
                            *watcher.ready(),
                        ]
                for event in batch:
                    if event is None:
                        await self.flush()
                        return  # the store is closing
                    latest = await self._handle(event, latest)
                if due is not None and time.monotonic() >= due:
                    # With nothing queued, this watch has seen everything published, whatever its resource.
                    rv = self.store.published_resource_version if watcher.drained else latest
                    if self.bookmarks and rv > since:
                        await self.send("BOOKMARK", self.bookmark(rv))
                    due = next_bookmark(time.monotonic(), self.interval, deadline)
                await self.flush()
        finally:
            watcher.close()

    async def _handle(self, event: Event, latest: int) -> int:
        if event.rv <= latest:
            return latest  # committed after the watch began, but part of the objects already sent
        seen = seen_as(event, self.matches)
        if seen is not None:
            await self.send(*seen)
        return event.rv
