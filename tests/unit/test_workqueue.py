"""The work queue: no key runs twice at once, no add is lost while a key is in flight, back-off grows."""

from __future__ import annotations

import asyncio

from multiqueue.kube.workqueue import ShutDown, WorkQueue, run_workers


async def test_duplicate_adds_are_one_item() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    for _ in range(5):
        queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    assert await queue.get() == "a"
    assert await queue.get() == "b"


async def test_add_while_in_flight_is_requeued_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    queue.add("a")
    key = await queue.get()
    queue.add("a")
    assert len(queue) == 0, "a key in flight must not be handed to a second worker"
    queue.done(key)
    assert len(queue) == 1
    assert await queue.get() == "a"


async def test_workers_never_run_one_key_concurrently_and_lose_no_add() -> None:
    queue: WorkQueue[int] = WorkQueue("t")
    running: set[int] = set()
    overlaps = 0
    last_seen: dict[int, int] = {}
    version: dict[int, int] = {}

    async def handler(key: int) -> None:
        nonlocal overlaps
        if key in running:
            overlaps += 1
        running.add(key)
        seen = version[key]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        last_seen[key] = seen
        running.discard(key)

    workers = asyncio.create_task(run_workers(queue, handler, workers=8))
    for round_ in range(200):
        for key in range(10):
            version[key] = round_
            queue.add(key)
        await asyncio.sleep(0)
    async with asyncio.timeout(10):
        await queue.join()
    queue.shut_down()
    await workers
    assert overlaps == 0
    assert all(last_seen[key] == 199 for key in range(10)), "the final add of every key must be processed"


async def test_failures_back_off_exponentially_and_success_forgets() -> None:
    queue: WorkQueue[str] = WorkQueue("t", base_delay=0.001, max_delay=0.004)
    for expected in (1, 2, 3, 4):
        queue.add_rate_limited("a")
        assert queue.requeues("a") == expected
    async with asyncio.timeout(5):
        assert await queue.get() == "a"
    queue.done("a")
    queue.forget("a")
    assert queue.requeues("a") == 0


async def test_add_after_delivers_later() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    queue.add_after("later", 0.01)
    assert len(queue) == 0
    async with asyncio.timeout(5):
        assert await queue.get() == "later"


async def test_shut_down_releases_waiting_workers() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    waiter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.shut_down()
    try:
        await waiter
    except ShutDown:
        pass
    else:
        raise AssertionError("get() must raise ShutDown after shut_down()")


async def test_failing_handler_is_retried() -> None:
    queue: WorkQueue[str] = WorkQueue("t", base_delay=0.001)
    attempts = 0
    done = asyncio.Event()

    async def handler(key: str) -> None:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise RuntimeError("transient")
        done.set()

    workers = asyncio.create_task(run_workers(queue, handler, workers=1))
    queue.add("a")
    async with asyncio.timeout(5):
        await done.wait()
    queue.shut_down()
    await workers
    assert attempts == 3
    assert queue.requeues("a") == 0
