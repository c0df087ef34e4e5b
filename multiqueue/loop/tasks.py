"""Stopping background tasks: every long-running part (informers, controllers, the dispatcher) does it the same way."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel every task, then wait until each has ended, so none outlives the caller's shutdown.

    A cancellation that reaches the caller while it waits is the caller's own and goes on up: swallowing it (as
    ``suppress(CancelledError)`` around ``await task`` does) would let a loop that is being stopped run on. A task
    that failed rather than stopped raises its error here.
    """
    running = [t for t in tasks if t is not None]
    for task in running:
        task.cancel()
    if not running:
        return
    await asyncio.wait(running)
    for task in running:
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error
