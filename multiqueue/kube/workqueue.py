"""A work queue of object keys, with the guarantees controllers rely on.

- A key waiting in the queue is there once, however often it is added.
- A key is handed to one worker at a time; if it is added while a worker has it, it goes back in the queue when
  that worker is done, so no change is ever missed and no two workers race on one object.
- Failed keys come back after a per-key exponential back-off (5 ms doubling to 1000 s); success forgets it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Final, Generic, TypeVar

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

BASE_DELAY: Final = 0.005
MAX_DELAY: Final = 1000.0


class ShutDown(Exception):
    """The queue is shut down: workers should return."""


class WorkQueue(Generic[K]):
    def __init__(self, name: str = "", base_delay: float = BASE_DELAY, max_delay: float = MAX_DELAY) -> None:
        self.name = name
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._queue: collections.deque[K] = collections.deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: collections.Counter[K] = collections.Counter()
        self._waiting: list[tuple[float, int, K]] = []  # (due, tie-breaker, key) for add_after
        self._sequence = itertools.count()
        self._wakeup = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._shutting_down = False
        self._idle = asyncio.Event()
        self._idle.set()

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def busy(self) -> bool:
        """Keys are queued, in progress or scheduled."""
        return bool(self._queue or self._processing or self._waiting)

    async def join(self) -> None:
        """Wait until nothing is queued, in progress or scheduled."""
        await self._idle.wait()

    def _note_state(self) -> None:
        if self.busy:
            self._idle.clear()
        else:
            self._idle.set()

    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._wakeup.set()
        self._note_state()

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        if self._shutting_down:
            return
        heapq.heappush(self._waiting, (time.monotonic() + delay, next(self._sequence), key))
        self._schedule_timer()
        self._note_state()

    def add_rate_limited(self, key: K) -> None:
        failures = self._failures[key]
        self._failures[key] += 1
        self.add_after(key, min(self.max_delay, self.base_delay * (2**failures)))

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def requeues(self, key: K) -> int:
        return self._failures[key]

    async def get(self) -> K:
        """The next key to work on; raises :class:`ShutDown` once the queue is shut down and drained."""
        while not self._queue:
            if self._shutting_down:
                raise ShutDown(self.name)
            self._wakeup.clear()
            await self._wakeup.wait()
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._wakeup.set()
        self._note_state()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def shut_down(self) -> None:
        self._shutting_down = True
        self._queue.clear()
        self._waiting.clear()
        if self._timer is not None:
            self._timer.cancel()
        self._wakeup.set()

    # --- delayed adds ----------------------------------------------------------------------------------------

    def _schedule_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if not self._waiting:
            self._timer = None
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, self._waiting[0][0] - time.monotonic())
        self._timer = loop.call_later(delay, self._release_due)

    def _release_due(self) -> None:
        now = time.monotonic()
        while self._waiting and self._waiting[0][0] <= now:
            _, _, key = heapq.heappop(self._waiting)
            self.add(key)
        self._schedule_timer()
        self._note_state()


async def run_workers(
    queue: WorkQueue[K],
    handler: Callable[[K], Awaitable[None]],
    workers: int,
) -> None:
    """Run ``workers`` tasks taking keys from ``queue`` until it shuts down.

    A handler that raises gets its key back after the back-off; one that returns has its failures forgotten.
    """

    async def worker() -> None:
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            try:
                await handler(key)
            except asyncio.CancelledError:
                queue.done(key)
                raise
            except Exception:
                log.exception("%s: syncing %r failed; retrying after back-off", queue.name, key)
                queue.done(key)
                queue.add_rate_limited(key)
            else:
                queue.forget(key)
                queue.done(key)

    tasks = [asyncio.create_task(worker(), name=f"{queue.name}-worker-{i}") for i in range(workers)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
