"""The reconcile loop every controller shares: requeue when the sync asks, back off when it fails, forget on
success, stop on shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from multiqueue.kube.errors import Conflict
from multiqueue.loop.reconcile import reconcile
from multiqueue.loop.tasks import cancel_and_wait
from multiqueue.loop.workqueue import WorkQueue


async def _run_until_idle(queue: WorkQueue[str], task: asyncio.Task[None]) -> None:
    async with asyncio.timeout(5):
        await queue.join()
    queue.shut_down()
    async with asyncio.timeout(5):
        await task


@pytest.mark.parametrize("delays", [[0.0, None], [0.01, None], [0.01, 0.0, 0.01, None]])
async def test_a_returned_delay_brings_the_key_back(delays: list[float | None]) -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    answers = iter(delays)
    calls: list[str] = []

    async def sync(key: str) -> float | None:
        calls.append(key)
        return next(answers)

    task = asyncio.create_task(reconcile(queue, sync, workers=2))
    queue.add("a")
    await _run_until_idle(queue, task)
    assert calls == ["a"] * len(delays), "one sync per number returned, and none after None"


async def test_a_failing_sync_is_retried_with_back_off_and_success_forgets() -> None:
    queue: WorkQueue[str] = WorkQueue("t", base_delay=0.001)
    failures_seen: list[int] = []

    async def sync(key: str) -> float | None:
        failures_seen.append(queue.requeues(key))
        if len(failures_seen) < 3:
            raise RuntimeError("transient")
        return None

    task = asyncio.create_task(reconcile(queue, sync, workers=1))
    queue.add("a")
    await _run_until_idle(queue, task)
    assert failures_seen == [0, 1, 2], "each failure counts towards the back-off"
    assert queue.requeues("a") == 0, "success forgets the failures"


async def test_a_requeue_after_failures_forgets_them_too() -> None:
    queue: WorkQueue[str] = WorkQueue("t", base_delay=0.001)
    answers: list[float | Exception | None] = [Conflict({"reason": "Conflict"}), 0.01, None]
    seen: list[int] = []

    async def sync(key: str) -> float | None:
        seen.append(queue.requeues(key))
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    task = asyncio.create_task(reconcile(queue, sync, workers=1))
    queue.add("a")
    await _run_until_idle(queue, task)
    assert seen == [0, 1, 0]


async def test_failures_are_logged_once_api_errors_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue: WorkQueue[str] = WorkQueue("t", base_delay=0.001)
    answers: list[Exception | None] = [
        Conflict({"reason": "Conflict", "message": "changed"}),
        KeyError("x"),
        None,
    ]

    async def sync(key: str) -> float | None:
        answer = answers.pop(0)
        if answer is not None:
            raise answer
        return None

    caplog.set_level(logging.INFO, logger="multiqueue.loop.reconcile")
    task = asyncio.create_task(reconcile(queue, sync, workers=1))
    queue.add("job/a")
    await _run_until_idle(queue, task)
    records = [r for r in caplog.records if r.name == "multiqueue.loop.reconcile"]
    assert [(r.levelname, r.exc_info is not None) for r in records] == [("WARNING", False), ("ERROR", True)]
    assert "'job/a'" in records[0].getMessage() and "409 Conflict: changed" in records[0].getMessage()
    assert "'job/a'" in records[1].getMessage() and "KeyError" in records[1].getMessage()


async def test_api_error_traceback_at_debug_level(caplog: pytest.LogCaptureFixture) -> None:
    queue: WorkQueue[str] = WorkQueue("t", base_delay=0.001)
    failed = False

    async def sync(key: str) -> float | None:
        nonlocal failed
        if not failed:
            failed = True
            raise Conflict({"reason": "Conflict"})
        return None

    caplog.set_level(logging.DEBUG, logger="multiqueue.loop.reconcile")
    task = asyncio.create_task(reconcile(queue, sync, workers=1))
    queue.add("a")
    await _run_until_idle(queue, task)
    records = [r for r in caplog.records if r.name == "multiqueue.loop.reconcile"]
    assert len(records) == 1 and records[0].exc_info is not None


async def test_shut_down_ends_every_worker() -> None:
    queue: WorkQueue[str] = WorkQueue("t")

    async def sync(key: str) -> float | None:
        return None

    task = asyncio.create_task(reconcile(queue, sync, workers=4))
    queue.add("a")
    async with asyncio.timeout(5):
        await queue.join()
    queue.shut_down()
    async with asyncio.timeout(5):
        await task  # returns: every worker saw ShutDown


async def test_cancelling_mid_sync_releases_the_key() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    started = asyncio.Event()

    async def sync(key: str) -> float | None:
        started.set()
        await asyncio.Event().wait()  # until cancelled
        return None

    task = asyncio.create_task(reconcile(queue, sync, workers=1))
    queue.add("a")
    async with asyncio.timeout(5):
        await started.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert not queue.busy, "the key in progress is done, not stuck"


async def test_cancelling_while_a_sync_stops_a_task_of_its_own_ends_the_loop() -> None:
    """A sync that stops a task of its own (the kubelet stopping a pod's watcher) may be cancelled while it waits
    for that task: the cancellation is the loop's, and the loop ends. Once, the wait swallowed it and the
    worker ran on, so stopping a cluster hung."""
    queue: WorkQueue[str] = WorkQueue("t")
    started, waiting = asyncio.Event(), asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            waiting.set()
            await asyncio.shield(asyncio.sleep(0.05))  # cleanup that outlasts the cancel

    async def sync(key: str) -> float | None:
        own = asyncio.create_task(slow_to_stop())
        await started.wait()
        await cancel_and_wait([own])
        return None

    loop = asyncio.create_task(reconcile(queue, sync, workers=1))
    queue.add("a")
    async with asyncio.timeout(5):
        await waiting.wait()
    loop.cancel()
    await asyncio.wait({loop}, timeout=5)  # waits without cancelling it again
    assert loop.cancelled(), "the worker ran on after the loop was cancelled"


async def test_cancel_and_wait_raises_what_a_task_failed_with() -> None:
    async def fails() -> None:
        raise ValueError("broken")

    failing = asyncio.create_task(fails())
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="broken"):
        await cancel_and_wait([failing, None])
