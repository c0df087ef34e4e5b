"""The dashboard's live picture: a line per Job and per worker, kept from the manager's own caches, and one
stream of changes that every open page shares.

Jobs and workers come from the manager's read model (no request of their own), the reason a Job waits from a
watch of the dispatcher's Events (only the latest per Job is kept; a watch that fails is started again).
Changes are gathered for a moment (:class:`Timings`) and encoded once for all pages; a page that
falls :data:`BACKLOG` messages behind is dropped, and its browser reconnects and starts from a fresh snapshot.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import statistics
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any, Final

from multiqueue.api import fastjson
from multiqueue.api.meta import as_dict, key_of, uid_of
from multiqueue.api.types import EVENTS, Obj
from multiqueue.dashboard.rows import Entry, job_entry, worker_entry
from multiqueue.dispatch.dispatcher import COMPONENT as DISPATCHER_COMPONENT
from multiqueue.dispatch.generic import GenericJob
from multiqueue.dispatch.inspect import Change, event_time, follow_objects, job_row
from multiqueue.dispatch.readmodel import ReadModel, Subscription
from multiqueue.kube.client import KubeClient
from multiqueue.loop.tasks import cancel_and_wait

log = logging.getLogger(__name__)

CHART_POINTS: Final = 120  # ten minutes of the chart
LATENCY_WINDOW: Final = 500  # the latest dispatch latencies a chart point summarises
BACKLOG: Final = 64  # messages a page may fall behind before it is dropped
FINISHED: Final = frozenset({"Complete", "Failed", "Finished"})
# What the page needs of an Event to show why a Job waits.
_EVENT_FIELDS: Final = ("reason", "message", "lastTimestamp", "eventTime", "firstTimestamp")


@dataclasses.dataclass(frozen=True)
class Timings:
    """How often the live view acts, in seconds."""

    flush: float = 0.2  # changes gathered before they go out: a change shows well within 1 s
    workers: float = 2.0  # worker lines recomputed (load moves with every placement)
    chart: float = 5.0
    events_retry: float = 5.0  # after the Events watch failed (the management cluster out of reach)


DEFAULT_TIMINGS: Final = Timings()


class LiveView:
    """Every dispatched Job's line and every worker's, and the pages following them: a subscriber of the
    manager's read model."""

    def __init__(
        self,
        manager: ReadModel,
        management: KubeClient,
        clock: Callable[[], float] = time.time,
        timings: Timings = DEFAULT_TIMINGS,
    ) -> None:
        self.manager = manager
        self.timings = timings
        self.management = management
        self.identity = manager.identity
        self.clock = clock
        self.jobs: dict[str, Entry] = {}  # by UID
        self.workers: dict[str, Entry] = {}
        self.chart: collections.deque[Entry] = collections.deque(maxlen=CHART_POINTS)
        self._where: dict[str, tuple[str, str]] = {}  # UID -> (kind, namespace/name) in the informers
        self._latest: dict[str, Obj] = {}  # UID -> the dispatcher's latest Event about it (trimmed)
        self._changed: set[str] = set()
        self._removed: set[str] = set()
        self._workers_changed = False
        self._dirty = asyncio.Event()
        self._pages: set[asyncio.Queue[bytes | None]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._subscription: Subscription | None = None

    # --- following the manager ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._subscription = self.manager.subscribe(self)
        self._refresh_workers()
        self._add_chart_point()  # the chart's first line is drawn one period after the page opens, not two
        timings = self.timings
        self._tasks = [
            asyncio.create_task(self._follow_events(), name="dashboard:events"),
            asyncio.create_task(self._flush_loop(), name="dashboard:flush"),
            asyncio.create_task(
                self._every(timings.workers, self._refresh_workers), name="dashboard:workers"
            ),
            asyncio.create_task(self._every(timings.chart, self._add_chart_point), name="dashboard:chart"),
        ]

    async def stop(self) -> None:
        if self._subscription is not None:
            self._subscription.cancel()
        await cancel_and_wait(self._tasks)
        for page in list(self._pages):
            self._drop(page)

    # What the read model tells (Listener).

    def job_changed(self, adapter: GenericJob, obj: Obj) -> None:
        uid = uid_of(obj)
        self._where[uid] = (adapter.resource.kind, key_of(obj))
        row = job_row(adapter, obj, self.identity, self._latest, datetime.now(UTC))
        entry = job_entry(row, obj, event_time(self._latest.get(uid, {})))
        if self.jobs.get(uid) != entry:
            self.jobs[uid] = entry
            self._changed.add(uid)
            self._removed.discard(uid)
            self._dirty.set()

    def job_deleted(self, obj: Obj) -> None:
        uid = uid_of(obj)
        self._where.pop(uid, None)
        self._latest.pop(uid, None)
        if self.jobs.pop(uid, None) is not None:
            self._changed.discard(uid)
            self._removed.add(uid)
            self._dirty.set()

    def _event_seen(self, event: Obj) -> None:
        uid = str(as_dict(event.get("involvedObject")).get("uid") or "")
        if not uid or event_time(event) < event_time(self._latest.get(uid, {})):
            return
        self._latest[uid] = {k: event[k] for k in _EVENT_FIELDS if k in event}
        where = self._where.get(uid)
        if where is None:
            return
        found = self.manager.job(*where)
        if found is not None:
            self.job_changed(*found)

    async def _follow_events(self) -> None:
        """The dispatcher's Events, listed then watched; while the watch is down only reasons stop moving."""
        while True:
            changes: asyncio.Queue[Change] = asyncio.Queue()
            follower = asyncio.create_task(
                follow_objects(
                    self.management, EVENTS, changes, None, f"reportingComponent={DISPATCHER_COMPONENT}"
                )
            )
            try:
                while not isinstance(change := await changes.get(), BaseException):
                    self._event_seen(change[1])
            finally:
                await cancel_and_wait([follower])
            log.warning(
                "the dashboard lost the dispatcher's Events (%s); following them again in %gs",
                change,
                self.timings.events_retry,
            )
            await asyncio.sleep(self.timings.events_retry)

    def workers_changed(self) -> None:
        self._refresh_workers()

    def _refresh_workers(self) -> None:
        found = {state.name: worker_entry(state) for state in self.manager.workers()}
        if found != self.workers:
            self.workers = found
            self._workers_changed = True
            self._dirty.set()

    def _add_chart_point(self) -> None:
        snapshot = self.manager.snapshot()
        latencies = list(snapshot.dispatch_latency[-LATENCY_WINDOW:])
        self.chart.append(
            {
                "time": self.clock(),
                "dispatched": sum(snapshot.dispatched.values()),
                "finished": sum(1 for e in self.jobs.values() if e["state"] in FINISHED),
                "latencyP50": statistics.median(latencies) if latencies else None,
                "latencyP99": _p99(latencies),
            }
        )
        self._dirty.set()

    @staticmethod
    async def _every(seconds: float, work: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(seconds)
            work()

    # --- pages ---------------------------------------------------------------------------------------------------

    def snapshot(self) -> Entry:
        return {
            "manager": {"name": self.identity.origin, "managedBy": self.identity.managed_by},
            "jobs": list(self.jobs.values()),
            "workers": list(self.workers.values()),
            "chart": list(self.chart),
        }

    @contextlib.asynccontextmanager
    async def page(self) -> AsyncIterator[asyncio.Queue[bytes | None]]:
        """A page's messages: a snapshot first, then each batch of changes; None when the page fell behind."""
        messages: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=BACKLOG)
        messages.put_nowait(_message("snapshot", self.snapshot()))
        self._pages.add(messages)
        try:
            yield messages
        finally:
            self._pages.discard(messages)

    async def _flush_loop(self) -> None:
        last_point = None
        while True:
            await self._dirty.wait()
            await asyncio.sleep(self.timings.flush)
            self._dirty.clear()
            if self._changed or self._removed:
                self._refresh_workers()  # a Job placed or finished moves its worker's load: shown together
            changes: dict[str, Any] = {}
            if self._changed:
                changes["jobs"] = [self.jobs[u] for u in self._changed if u in self.jobs]
            if self._removed:
                changes["removed"] = sorted(self._removed)
            if self._workers_changed:
                changes["workers"] = list(self.workers.values())
            if self.chart and self.chart[-1] is not last_point:
                last_point = changes["chart"] = self.chart[-1]
            self._changed, self._removed, self._workers_changed = set(), set(), False
            if not changes:
                continue
            message = _message("changes", changes)
            for page in list(self._pages):
                try:
                    page.put_nowait(message)
                except asyncio.QueueFull:
                    self._drop(page)

    def _drop(self, page: asyncio.Queue[bytes | None]) -> None:
        self._pages.discard(page)
        with contextlib.suppress(asyncio.QueueEmpty):
            page.get_nowait()  # room for the end, which outranks whatever it had not read
        page.put_nowait(None)


def _message(event: str, data: object) -> bytes:
    """One server-sent event."""
    return b"event: " + event.encode() + b"\ndata: " + fastjson.dumps(data) + b"\n\n"


def _p99(samples: list[float]) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
