"""Waiting for state without sleeping: re-check a condition whenever something the test watches changes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest

from multiqueue.apiserver.server import ApiServer
from multiqueue.apiserver.store import Event
from multiqueue.kube.informer import Handlers, Informer


class Changes:
    """An event set by informer handlers on every add, update and delete."""

    def __init__(self, *informers: Informer) -> None:
        self.changed = asyncio.Event()
        for informer in informers:
            informer.add_handlers(
                Handlers(
                    on_add=lambda _o: self.changed.set(),
                    on_update=lambda _o, _n: self.changed.set(),
                    on_delete=lambda _o: self.changed.set(),
                )
            )

    async def until(self, predicate: Callable[[], bool], within: float = 30.0) -> None:
        async with asyncio.timeout(within):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()


async def until_stored(server: ApiServer, holds: Callable[[], bool], within: float = 10.0) -> None:
    """Wait, on the store's own events, until ``holds()`` about what ``server`` stores."""
    changed = asyncio.Event()

    def saw(_: Event) -> None:
        changed.set()

    server.store.add_handlers(saw)
    async with asyncio.timeout(within):
        while not holds():
            changed.clear()
            await changed.wait()


@contextlib.asynccontextmanager
async def saying_on_timeout(what: Callable[[], str]) -> AsyncIterator[None]:
    """A timeout inside fails the test with ``what()``: what was seen instead of what was waited for."""
    try:
        yield
    except TimeoutError:
        pytest.fail(f"timed out: {what()}")
