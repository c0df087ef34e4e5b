"""A worker's request slots: a hung worker holds no more than its slots, and none of them past the moment its
health probe fails."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from multiqueue.dispatch import workers
from multiqueue.dispatch.workers import SLOW_AFTER, Slots, WorkerBusy, WorkerUnreachable

WITHIN = 5.0


async def hung(slots: Slots, entered: asyncio.Event) -> None:
    """A request to a worker that never answers."""
    async with slots.held("worker-1"):
        entered.set()
        await asyncio.Event().wait()


async def test_abort_gives_up_every_request_under_way_and_frees_their_slots() -> None:
    slots = Slots(2)
    entered = [asyncio.Event(), asyncio.Event()]
    requests = [asyncio.create_task(hung(slots, e)) for e in entered]
    async with asyncio.timeout(WITHIN):
        await asyncio.gather(*(e.wait() for e in entered))
        slots.abort()
        outcomes = await asyncio.gather(*requests, return_exceptions=True)
        assert [type(o) for o in outcomes] == [WorkerUnreachable, WorkerUnreachable]
        async with slots.held("worker-1"):
            pass  # both slots are free again at once
    assert not slots.slow(time.monotonic() + 10 * SLOW_AFTER)


async def test_abort_leaves_later_requests_alone() -> None:
    slots = Slots(1)
    slots.abort()
    async with asyncio.timeout(WITHIN), slots.held("worker-1"):
        await asyncio.sleep(0)


async def test_a_timeout_of_the_request_itself_is_not_taken_for_an_abort() -> None:
    slots = Slots(1)
    with pytest.raises(TimeoutError):
        async with slots.held("worker-1"), asyncio.timeout(0.01):
            await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def one_hung_request(slots: Slots) -> AsyncIterator[None]:
    """While inside: one request holds a slot of ``slots`` and never ends."""
    entered = asyncio.Event()
    request = asyncio.create_task(hung(slots, entered))
    try:
        async with asyncio.timeout(WITHIN):
            await entered.wait()
        yield
    finally:
        request.cancel()


async def test_a_request_that_finds_every_slot_held_gives_up_as_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "SLOW_AFTER", 0.05)
    slots = Slots(1)
    async with one_hung_request(slots):
        with pytest.raises(WorkerBusy):
            async with asyncio.timeout(WITHIN), slots.held("worker-1"):
                pass
        assert slots.slow(time.monotonic()), "every slot is held by a request older than SLOW_AFTER"


async def test_a_worker_with_a_free_slot_is_not_slow() -> None:
    slots = Slots(2)
    async with one_hung_request(slots):
        assert not slots.slow(time.monotonic() + 10 * SLOW_AFTER)
