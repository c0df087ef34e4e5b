"""Running a declared controller: its work queue across leader terms, its subscriptions, and its shutdown.

The handlers of every feed are subscribed once (:meth:`Runner.open`) and stay so until :meth:`Runner.stop`, so a
replica that does not lead still keeps its bookkeeping current. A term (:meth:`Runner.run`) waits for the sources'
caches, queues every cached key, and runs the workers until it is cancelled; the queue it leaves behind is a fresh
one, which gathers what changes until the next term.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

from multiqueue.loop.controller import Controller
from multiqueue.loop.reconcile import reconcile
from multiqueue.loop.source import Unsubscribe
from multiqueue.loop.tasks import cancel_and_wait
from multiqueue.loop.workqueue import WorkQueue

K = TypeVar("K", bound=Hashable)


class Runner(Generic[K]):
    """Owns one controller's queue, subscriptions and workers."""

    def __init__(self, controller: Controller[K]) -> None:
        self.controller = controller
        self._queue: WorkQueue[K] = WorkQueue(controller.name)
        self._subscriptions: list[Unsubscribe] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._ready = asyncio.Event()  # set while a term runs, once it has queued what the caches hold

    # --- what handlers call: only enqueue ----------------------------------------------------------------------

    def add(self, key: K, first: bool = False) -> None:
        self._queue.add(key, first)

    def add_after(self, key: K, delay: float) -> None:
        self._queue.add_after(key, delay)

    def resync(self) -> None:
        """Queue every key the caches hold (after a test moved a clock: delays computed from a fake clock mean
        nothing to the queue's real timers)."""
        for key in self.controller.cached():
            self._queue.add(key)

    async def join(self) -> None:
        """Wait until a term has begun and nothing is queued, in progress or scheduled."""
        await self._ready.wait()
        await self._queue.join()

    # --- lifecycle -----------------------------------------------------------------------------------------------

    def open(self) -> None:
        """Subscribe every feed's handlers (once; a cache replays what it holds)."""
        if self._subscriptions is None:
            self._subscriptions = [feed.source.add_handlers(feed.handlers) for feed in self.controller.feeds]

    async def run(self) -> None:
        """One term: wait for the caches, queue what they hold, then sync keys until cancelled."""
        self.open()
        controller = self.controller
        await asyncio.gather(*(feed.source.wait_for_sync() for feed in controller.feeds))
        if controller.prepare is not None:
            await controller.prepare()
        self.resync()
        self._ready.set()
        beside: asyncio.Task[None] | None = None
        if controller.beside is not None:
            beside = asyncio.create_task(controller.beside(), name=f"{controller.name}-beside")
        try:
            await reconcile(self._queue, controller.sync, controller.workers)
        finally:
            await cancel_and_wait([beside])
            self._renew()

    def start(self) -> None:
        """Subscribe and run one term as a task of its own, until :meth:`stop`: for loops that run for as long as
        their owner does."""
        self.open()
        self._task = asyncio.create_task(self.run(), name=self.controller.name)

    async def stop(self) -> None:
        """For good: no more events, the queue shut down, the workers cancelled and awaited."""
        self._stopped = True
        for unsubscribe in self._subscriptions or ():
            unsubscribe()
        self._subscriptions = []
        self._queue.shut_down()
        await cancel_and_wait([self._task])
        self._task = None

    def _renew(self) -> None:
        """The term is over: its queue goes, a fresh one gathers changes until the next term (or stays shut down
        once stopped)."""
        self._ready.clear()
        self._queue.shut_down()
        if not self._stopped:
            self._queue = WorkQueue(self.controller.name)
