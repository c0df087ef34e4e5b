"""The one reconcile loop every controller runs (the workers of :class:`multiqueue.loop.runner.Runner`): queue →
sync (decide, then act) → requeue.

A sync returns when its key should be looked at again: a number of seconds (the next schedule time, a deadline, a
back-off the decide step computed) or None when nothing is due until something changes. A sync that raises gets
its key back after the queue's per-key exponential back-off, so no controller hand-rolls its retries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import TypeVar

from multiqueue.loop.errors import ExpectedFailure
from multiqueue.loop.tasks import cancel_and_wait
from multiqueue.loop.workqueue import ShutDown, WorkQueue

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


async def reconcile(queue: WorkQueue[K], sync: Callable[[K], Awaitable[float | None]], workers: int) -> None:
    """Run ``workers`` tasks taking keys from ``queue`` until it shuts down (or this is cancelled).

    ``sync(key)`` returning a number brings the key back after that many seconds (0: at once); returning None
    ends it. Either way its failures are forgotten. Raising logs one line and requeues it with back-off.
    """

    async def worker() -> None:
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            # The requeue comes before done(), as in client-go, so the queue never looks idle in between.
            try:
                requeue_after = await sync(key)
            except asyncio.CancelledError:
                queue.done(key)
                raise
            except Exception as exc:
                _log_failure(queue.name, key, exc)
                queue.add_rate_limited(key)
                queue.done(key)
                continue
            queue.forget(key)
            if requeue_after is not None:
                queue.add_after(key, requeue_after)
            queue.done(key)

    tasks = [asyncio.create_task(worker(), name=f"{queue.name}-worker-{i}") for i in range(workers)]
    try:
        await asyncio.gather(*tasks)
    finally:
        await cancel_and_wait(tasks)


def _log_failure(queue: str, key: object, exc: Exception) -> None:
    """One record per failure. An expected failure (an API conflict, a server away) says enough in its
    message, the traceback only at debug level. Anything else is a bug: full traceback."""
    if isinstance(exc, ExpectedFailure):
        log.warning(
            "%s: syncing %r failed: %s; retrying after back-off",
            queue,
            key,
            exc,
            exc_info=exc if log.isEnabledFor(logging.DEBUG) else None,
        )
    else:
        log.error("%s: syncing %r failed: %r; retrying after back-off", queue, key, exc, exc_info=exc)
