"""Recording core/v1 Events about objects, the way client-go's recorder does.

Recording never blocks the caller: events go to a queue and a background task writes them. A repeat of the same
event (same object, type, reason and message) within the aggregation window updates the existing Event's
``count`` and ``lastTimestamp`` instead of creating another, so a controller that says the same thing every sync
does not flood the cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Final

from multiqueue.api.meta import format_time, metadata
from multiqueue.api.types import EVENTS, NORMAL, WARNING, Obj
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import KubeError, NotFound
from multiqueue.loop.tasks import cancel_and_wait

log = logging.getLogger(__name__)

AGGREGATION_WINDOW: Final = 600.0
# client-go's spam filter: per object, a burst of 25 events, then one more every five minutes.
SPAM_BURST: Final = 25
SPAM_REFILL_SECONDS: Final = 300.0
CACHE_SIZE: Final = 4096
QUEUE_LIMIT: Final = 10_000


class EventRecorder:
    def __init__(self, client: KubeClient, component: str, host: str = "") -> None:
        self.client = client
        self.component = component
        self.host = host
        self._queue: asyncio.Queue[tuple[Obj, str, str, str, datetime]] = asyncio.Queue(QUEUE_LIMIT)
        # (uid, type, reason, message) -> (event namespace, event name, count, monotonic time last written)
        self._recent: OrderedDict[tuple[str, str, str, str], tuple[str, str, int, float]] = OrderedDict()
        self._task: asyncio.Task[None] | None = None
        self._budgets: OrderedDict[str, tuple[float, float]] = (
            OrderedDict()
        )  # uid -> (tokens, monotonic time)
        self.dropped = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"events:{self.client.name}:{self.component}")

    async def stop(self, drain_timeout: float = 2.0) -> None:
        """Write what is queued (for a short while), then stop."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain_timeout):
                await self._queue.join()
        await cancel_and_wait([self._task])
        self._task = None

    def event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        """Record an event about ``obj``; returns at once. Floods about one object are dropped, as client-go does."""
        meta = metadata(obj)
        if not self._allow(str(meta.get("uid") or meta.get("name"))):
            self.dropped += 1
            return
        # Only what the Event names of the object is queued: a queued object would keep a whole Job alive, and a
        # burst queues thousands.
        involved = {
            "apiVersion": obj.get("apiVersion", ""),
            "kind": obj.get("kind", ""),
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        try:
            self._queue.put_nowait((involved, type_, reason, message, datetime.now(UTC)))
        except asyncio.QueueFull:
            self.dropped += 1

    def _allow(self, key: str) -> bool:
        now = time.monotonic()
        tokens, stamp = self._budgets.get(key, (float(SPAM_BURST), now))
        tokens = min(float(SPAM_BURST), tokens + (now - stamp) / SPAM_REFILL_SECONDS)
        allowed = tokens >= 1.0
        self._budgets[key] = (tokens - 1.0 if allowed else tokens, now)
        self._budgets.move_to_end(key)
        while len(self._budgets) > CACHE_SIZE:
            self._budgets.popitem(last=False)
        return allowed

    def normal(self, obj: Obj, reason: str, message: str) -> None:
        self.event(obj, NORMAL, reason, message)

    def warning(self, obj: Obj, reason: str, message: str) -> None:
        self.event(obj, WARNING, reason, message)

    async def flush(self) -> None:
        """Wait until every queued event is written (tests use this)."""
        await self._queue.join()

    async def _run(self) -> None:
        while True:
            involved, type_, reason, message, when = await self._queue.get()
            try:
                await self._write(involved, type_, reason, message, when)
            except KubeError as exc:
                log.warning("could not record event %s on %s: %s", reason, involved["name"], exc)
            except Exception:
                log.exception("recording event %s failed", reason)
            finally:
                self._queue.task_done()

    async def _write(self, involved: Obj, type_: str, reason: str, message: str, when: datetime) -> None:
        key = (str(involved["uid"] or involved["name"]), type_, reason, message)
        stamp = format_time(when)
        previous = self._recent.get(key)
        if previous is not None and time.monotonic() - previous[3] < AGGREGATION_WINDOW:
            namespace, name, count, _ = previous
            try:
                await self.client.patch(EVENTS, name, {"count": count + 1, "lastTimestamp": stamp}, namespace)
                self._remember(key, (namespace, name, count + 1, time.monotonic()))
                return
            except NotFound:
                pass  # collected meanwhile: create a fresh one
        namespace = str(involved["namespace"] or "default")
        name = f"{involved['name']}.{uuid.uuid4().hex[:16]}"
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "source": {"component": self.component, **({"host": self.host} if self.host else {})},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
        await self.client.create(EVENTS, body, namespace)
        self._remember(key, (namespace, name, 1, time.monotonic()))

    def _remember(self, key: tuple[str, str, str, str], value: tuple[str, str, int, float]) -> None:
        self._recent[key] = value
        self._recent.move_to_end(key)
        while len(self._recent) > CACHE_SIZE:
            self._recent.popitem(last=False)
