"""Waiting for state without sleeping: re-check a condition whenever something the test watches changes."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

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


async def first_line(fifo: Path, within: float = 10.0) -> str:
    """What a process wrote to the named pipe ``fifo`` first, waiting on the event loop until it did."""
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    loop = asyncio.get_running_loop()
    readable = asyncio.Event()
    loop.add_reader(fd, readable.set)
    try:
        async with asyncio.timeout(within):
            await readable.wait()
        return os.read(fd, 4096).decode().splitlines()[0].strip()
    finally:
        loop.remove_reader(fd)
        os.close(fd)
