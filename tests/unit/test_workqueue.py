"""The work queue: no key runs twice at once, no add is lost while a key is in flight, back-off grows, and a key
scheduled for later waits there once (client-go's delaying queue)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from multiqueue.loop.reconcile import reconcile
from multiqueue.loop.workqueue import ShutDown, WorkQueue

SOON = 0.02
LATER = 60.0  # never reached in a test: a key handed out within the timeout was not delayed by it


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


@pytest.mark.parametrize(
    ("adds", "handed_out"),
    [
        pytest.param([("a", False), ("b", False), ("c", True)], ["c", "a", "b"], id="first-goes-ahead"),
        pytest.param([("a", True), ("b", False), ("c", True)], ["a", "c", "b"], id="firsts-keep-their-order"),
        pytest.param([("a", False), ("b", False), ("b", True)], ["b", "a"], id="queued-key-moves-ahead-once"),
        pytest.param([("a", True), ("a", True), ("a", False)], ["a"], id="one-entry-however-added"),
    ],
)
async def test_keys_added_first_are_handed_out_first_and_once(
    adds: list[tuple[str, bool]], handed_out: list[str]
) -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    for key, first in adds:
        queue.add(key, first=first)
    assert len(queue) == len(handed_out)
    got = [await queue.get() for _ in handed_out]
    assert got == handed_out
    assert len(queue) == 0
    for key in got:
        queue.done(key)
    assert not queue.busy, "entries left behind are not work"


async def test_a_key_in_flight_added_first_waits_for_its_worker() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    queue.add("a")
    queue.add("b")
    assert await queue.get() == "a"
    queue.add("a", first=True)
    assert await queue.get() == "b", "not handed to a second worker while the first has it"
    queue.done("a")
    assert await queue.get() == "a"
    queue.done("a")
    queue.done("b")
    assert not queue.busy


@pytest.mark.parametrize("added_before", [False, True], ids=["added-first-only", "added-then-added-first"])
async def test_a_key_added_first_while_in_flight_goes_ahead_of_the_backlog_when_done(
    added_before: bool,
) -> None:
    """A Job that finishes while its own sync runs must not wait behind a burst of new Jobs."""
    queue: WorkQueue[str] = WorkQueue("t")
    queue.add("a")
    assert await queue.get() == "a"
    for key in ("b", "c"):
        queue.add(key)
    if added_before:
        queue.add("a")
    queue.add("a", first=True)
    queue.done("a")
    assert [await queue.get() for _ in range(3)] == ["a", "b", "c"]
    for key in "abc":
        queue.done(key)
    assert not queue.busy
    queue.add("d")
    queue.add("a")
    assert await queue.get() == "d", "the wish to go first ends with the sync it was made for"


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

    workers = asyncio.create_task(reconcile(queue, handler, workers=8))
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


# --- add_after: one waiting entry per key, the earliest due wins ------------------------------------------------


@dataclass
class Case:
    name: str
    ops: list[
        tuple[str, str] | tuple[str, str, float]
    ]  # ("add", k) | ("after", k, s) | ("get", k) | ("done", k)
    handed_out: list[str]  # what the queue hands out after the ops, in order, until nothing is left


CASES = [
    Case(
        "the same key added after a delay 100 times over a window is handed out once",
        [("after", "a", SOON + i / 1000) for i in range(100)],  # as 100 changes 1 ms apart, each delayed SOON
        ["a"],
    ),
    Case("an earlier add_after moves the key earlier", [("after", "a", LATER), ("after", "a", SOON)], ["a"]),
    Case("a later add_after does not delay the key", [("after", "a", SOON), ("after", "a", LATER)], ["a"]),
    Case("a key queued and not in progress ignores add_after", [("add", "a"), ("after", "a", LATER)], ["a"]),
    Case("add_after of 0 adds at once", [("after", "a", 0)], ["a"]),
    Case("keys come out by due time", [("after", "a", 2 * SOON), ("after", "b", SOON)], ["b", "a"]),
    Case(
        "a key in progress comes back once after a burst of add_after",
        [("add", "a"), ("get", "a"), *[("after", "a", SOON)] * 100, ("done", "a")],
        ["a"],
    ),
    Case(
        "a key in progress and added again: add_after while in progress changes nothing",
        [("add", "a"), ("get", "a"), ("add", "a"), ("after", "a", LATER), ("done", "a")],
        ["a"],
    ),
    Case(
        "a key in progress and added again: add_after after done changes nothing",
        [("add", "a"), ("get", "a"), ("add", "a"), ("done", "a"), ("after", "a", LATER)],
        ["a"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_add_after(case: Case) -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    for op in case.ops:
        match op:
            case ("add", key):
                queue.add(key)
            case ("after", key, delay):
                queue.add_after(key, delay)
            case ("get", key):
                assert await queue.get() == key
            case ("done", key):
                queue.done(key)
    handed_out = []
    async with asyncio.timeout(5):
        while queue.busy:
            key = await queue.get()
            handed_out.append(key)
            queue.done(key)
    assert handed_out == case.handed_out


async def test_add_after_keeps_one_entry_at_the_earliest_due() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    queue.add_after("a", LATER)
    first = queue.waiting("a")
    assert first is not None and LATER - 1 < first <= LATER
    queue.add_after("a", 2 * LATER)
    assert queue.waiting("a") == pytest.approx(first, abs=0.5), "a later add_after does not delay it"
    queue.add_after("a", 1.0)
    moved = queue.waiting("a")
    assert moved is not None and moved <= 1.0, "an earlier one moves it earlier"
    queue.shut_down()
    assert queue.waiting("a") is None and not queue.busy
