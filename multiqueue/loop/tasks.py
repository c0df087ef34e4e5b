"""Running and stopping background tasks: every long-running part (informers, controllers, the dispatcher) does it
the same way."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

log = logging.getLogger(__name__)


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


async def guarded(name: str, work: Callable[[], Awaitable[None]]) -> None:
    """Run one named part of a process. A part that fails is logged under its name with the traceback and ends
    alone: the process and its other parts go on, and stopping it later does not raise the old failure again.
    ``work`` is called here, so a part stopped before it began leaves no coroutine behind that never ran."""
    try:
        await work()
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("%s stopped", name)


def start_guarded(name: str, work: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
    """A task of its own for :func:`guarded` ``work``, named as the part it runs."""
    return asyncio.create_task(guarded(name, work), name=name)
