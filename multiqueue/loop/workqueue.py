"""A work queue of object keys, with the guarantees controllers rely on.

- A key waiting in the queue is there once, however often it is added.
- A key is handed to one worker at a time; if it is added while a worker has it, it goes back in the queue when
  that worker is done, so no change is ever missed and no two workers race on one object.
- A key scheduled for later (``add_after``) waits there once: a second ``add_after`` can only bring it earlier,
  as client-go's delaying queue does, so a burst of changes coalesced through ``add_after`` is handled once.
- ``add(key, first=True)`` puts a key ahead of those added without it (a change someone is waiting to see, such as
  a Job's end, need not wait behind a backlog of new work); each group keeps its own order. A key a worker has
  goes ahead once that worker is done.
- Failed keys come back after a per-key exponential back-off (5 ms doubling to 1000 s); success forgets it
  (:class:`multiqueue.loop.ratelimit.ExponentialBackoff`).

The loop that takes keys from the queue and runs a sync on each is :func:`multiqueue.loop.reconcile.reconcile`.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from multiqueue.loop.ratelimit import BASE_DELAY, MAX_DELAY, ExponentialBackoff

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """The queue is shut down: workers should return."""


class _Delays(Generic[K]):
    """Keys due later (client-go's delaying queue): one live entry per key, released by one timer at the first
    due time. Moving a key earlier pushes a new heap entry; the old one is stale and skipped when it comes up."""

    def __init__(self, release: Callable[[list[K]], None]) -> None:
        self._release = release  # called on the event loop with the keys that came due
        self._heap: list[tuple[float, int, K]] = []  # (due, sequence, key)
        self._due: dict[K, tuple[float, int]] = {}  # per key, the (due, sequence) of its live entry
        self._sequence = itertools.count()
        self._timer: asyncio.TimerHandle | None = None

    def __bool__(self) -> bool:
        return bool(self._due)

    def schedule(self, key: K, due: float) -> None:
        """Release ``key`` at monotonic time ``due``, unless it is already due at that time or earlier."""
        current = self._due.get(key)
        if current is not None and current[0] <= due:
            return
        sequence = next(self._sequence)
        self._due[key] = (due, sequence)
        heapq.heappush(self._heap, (due, sequence, key))
        if self._heap[0][1] == sequence:  # the new first due: the timer must fire sooner
            self._schedule_timer()

    def remaining(self, key: K) -> float | None:
        current = self._due.get(key)
        return None if current is None else max(0.0, current[0] - time.monotonic())

    def clear(self) -> None:
        self._heap.clear()
        self._due.clear()
        if self._timer is not None:
            self._timer.cancel()

    def _live(self, entry: tuple[float, int, K]) -> bool:
        due, sequence, key = entry
        return self._due.get(key) == (due, sequence)

    def _schedule_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        while self._heap and not self._live(self._heap[0]):
            heapq.heappop(self._heap)
        if not self._heap:
            self._timer = None
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, self._heap[0][0] - time.monotonic())
        self._timer = loop.call_later(delay, self._release_due)

    def _release_due(self) -> None:
        now = time.monotonic()
        released: list[K] = []
        while self._heap and self._heap[0][0] <= now:
            entry = heapq.heappop(self._heap)
            if self._live(entry):
                del self._due[entry[2]]
                released.append(entry[2])
        self._schedule_timer()
        self._release(released)


class WorkQueue(Generic[K]):
    def __init__(self, name: str = "", base_delay: float = BASE_DELAY, max_delay: float = MAX_DELAY) -> None:
        self.name = name
        self._backoff: ExponentialBackoff[K] = ExponentialBackoff(base_delay, max_delay)
        self._queue: collections.deque[K] = collections.deque()
        # Keys added with first=True, handed out before the queue; a key may also still have an entry in the queue,
        # which is skipped when it comes up (the key was handed out, or is being worked on).
        self._first: collections.deque[K] = collections.deque()
        self._ahead: set[K] = set()
        # Keys added with first=True while a worker had them: they go ahead, not behind the queue, once it is done.
        self._ahead_when_done: set[K] = set()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._delays: _Delays[K] = _Delays(self._add_due)
        self._wakeup = asyncio.Event()
        self._shutting_down = False
        self._idle = asyncio.Event()
        self._idle.set()

    def __len__(self) -> int:
        """Keys waiting to be handed out (not those in progress, nor those scheduled for later)."""
        return len(self._dirty - self._processing)

    @property
    def busy(self) -> bool:
        """Keys are queued, in progress or scheduled."""
        return bool(self._dirty or self._processing or self._delays)

    async def join(self) -> None:
        """Wait until nothing is queued, in progress or scheduled."""
        await self._idle.wait()

    def _note_state(self) -> None:
        if self.busy:
            self._idle.clear()
        else:
            self._idle.set()

    def add(self, key: K, first: bool = False) -> None:
        if self._shutting_down:
            return
        if first and key in self._processing:
            self._ahead_when_done.add(key)
        if key in self._dirty:
            if first and key not in self._processing and key not in self._ahead:
                self._ahead.add(key)
                self._first.append(key)
                self._wakeup.set()
            return
        self._dirty.add(key)
        if key not in self._processing:
            if first:
                self._ahead.add(key)
            (self._first if first else self._queue).append(key)
            self._wakeup.set()
        self._note_state()

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` once ``delay`` seconds have passed.

        A key already waiting keeps one entry, due at the earliest time asked for. A key already added since it
        was last handed out is left alone: it will be handed out anyway (at once, or when the worker that has it
        is done), and that sync sees the latest state.
        """
        if delay <= 0:
            self.add(key)
            return
        if self._shutting_down or key in self._dirty:
            return
        self._delays.schedule(key, time.monotonic() + delay)
        self._note_state()

    def waiting(self, key: K) -> float | None:
        """Seconds until ``key`` is added by an earlier ``add_after``, or None when it is not waiting."""
        return self._delays.remaining(key)

    def add_rate_limited(self, key: K) -> None:
        self.add_after(key, self._backoff.when(key))

    def forget(self, key: K) -> None:
        self._backoff.forget(key)

    def requeues(self, key: K) -> int:
        return self._backoff.requeues(key)

    async def get(self) -> K:
        """The next key to work on; raises :class:`ShutDown` once the queue is shut down and drained."""
        while True:
            while not (self._first or self._queue):
                if self._shutting_down:
                    raise ShutDown(self.name)
                self._wakeup.clear()
                await self._wakeup.wait()
            if self._first:
                key = self._first.popleft()
                self._ahead.discard(key)
            else:
                key = self._queue.popleft()
            if key in self._dirty and key not in self._processing:
                break
            self._note_state()  # an entry left behind by a key handed out from the other end
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        ahead = key in self._ahead_when_done
        self._ahead_when_done.discard(key)
        if key in self._dirty:
            if ahead:
                self._ahead.add(key)
            (self._first if ahead else self._queue).append(key)
            self._wakeup.set()
        self._note_state()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def shut_down(self) -> None:
        self._shutting_down = True
        self._queue.clear()
        self._first.clear()
        self._ahead.clear()
        self._ahead_when_done.clear()
        self._delays.clear()
        self._wakeup.set()

    def _add_due(self, keys: list[K]) -> None:
        for key in keys:
            self.add(key)
        self._note_state()
