"""Named, guarded parts of a process: one that fails is logged under its name and ends alone; the others run on,
and stopping them all does not raise the old failure again."""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings

import pytest

from multiqueue.loop.tasks import cancel_and_wait, start_guarded


async def test_a_failing_part_is_logged_by_name_and_the_others_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="multiqueue.loop.tasks")
    running = asyncio.Event()

    async def broken() -> None:
        raise RuntimeError("the cache is gone")

    async def steady() -> None:
        running.set()
        await asyncio.Event().wait()

    failing = start_guarded("worker-1/kubelet", broken)
    other = start_guarded("worker-1/job-controller", steady)
    await asyncio.wait_for(running.wait(), 5)
    await asyncio.wait_for(asyncio.shield(failing), 5)
    assert not other.done()
    [record] = [r for r in caplog.records if r.name == "multiqueue.loop.tasks"]
    assert record.getMessage() == "worker-1/kubelet stopped"
    assert record.exc_info is not None and "the cache is gone" in str(record.exc_info[1])
    assert failing.get_name() == "worker-1/kubelet"
    await cancel_and_wait([failing, other])  # no error: the failure was the part's own, and is logged
    assert other.cancelled()


async def test_a_part_stopped_before_it_began_leaves_nothing_behind() -> None:
    began = []

    async def part() -> None:
        began.append(True)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        task = start_guarded("worker-2/kubelet", part)
        await cancel_and_wait([task])  # cancelled before its first step: the part is never called
        del task
        gc.collect()
    assert began == []
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
