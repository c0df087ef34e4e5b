"""The runner every loop shares: events become keys, each term starts from the caches, workers wait for the
caches to sync, stopping unsubscribes and ends the workers, failing syncs come back after back-off."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from multiqueue.loop.controller import Controller
from multiqueue.loop.runner import Runner
from multiqueue.loop.source import Feed, Unsubscribe

# What a handler of the fake source is called with: an object's name and its value (None: deleted).
Handler = Callable[[str, str | None], None]


class FakeSource:
    """An in-memory cache of name -> value: handlers see each change, and what is cached when they subscribe."""

    def __init__(self, synced: bool = True) -> None:
        self.cache: dict[str, str] = {}
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        if synced:
            self.synced.set()

    def add_handlers(self, handlers: Handler, /) -> Unsubscribe:
        self.handlers.append(handlers)
        for name, value in self.cache.items():
            handlers(name, value)
        return lambda: self.handlers.remove(handlers)

    async def wait_for_sync(self) -> None:
        await self.synced.wait()

    def put(self, name: str, value: str) -> None:
        self.cache[name] = value
        for handlers in list(self.handlers):
            handlers(name, value)

    def delete(self, name: str) -> None:
        self.cache.pop(name, None)
        for handlers in list(self.handlers):
            handlers(name, None)


def key_of(name: str, value: str | None) -> str | None:
    """The mapping under test: an object named ``x`` with value ``owner=o`` stands for ``o``; ``skip`` for
    nothing; anything else (a delete too) for itself."""
    if value == "skip":
        return None
    if value is not None and value.startswith("owner="):
        return value.removeprefix("owner=")
    return name


@dataclass
class Loop:
    source: FakeSource
    runner: Runner[str]
    synced: list[str]


def _loop(source: FakeSource, sync: Callable[[str], float | None] | None = None) -> Loop:
    synced: list[str] = []

    async def record(key: str) -> float | None:
        synced.append(key)
        return sync(key) if sync is not None else None

    def changed(name: str, value: str | None) -> None:
        key = key_of(name, value)
        if key is not None:
            runner.add(key)

    def cached() -> list[str]:
        return [k for k in (key_of(n, v) for n, v in source.cache.items()) if k is not None]

    runner: Runner[str] = Runner(Controller("t", record, 2, feeds=[Feed(source, changed)], cached=cached))
    runner.open()
    return Loop(source, runner, synced)


async def _idle(runner: Runner[str]) -> None:
    async with asyncio.timeout(5):
        await runner.join()


async def _end(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.wait({task}, timeout=5)
    assert task.done()


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([("put", "a", "1"), ("put", "b", "2")], {"a", "b"}),
        ([("put", "a", "1"), ("delete", "a", "")], {"a"}),
        ([("put", "a", "skip")], set()),
        ([("put", "pod-1", "owner=job"), ("put", "pod-2", "owner=job")], {"job"}),
        ([("put", "a", "skip"), ("put", "a", "owner=b")], {"b"}),
    ],
)
async def test_events_become_keys(events: list[tuple[str, str, str]], expected: set[str]) -> None:
    loop = _loop(FakeSource())
    term = asyncio.create_task(loop.runner.run())
    await _idle(loop.runner)
    for op, name, value in events:
        if op == "put":
            loop.source.put(name, value)
        else:
            loop.source.delete(name)
    await _idle(loop.runner)
    await _end(term)
    assert set(loop.synced) == expected


@pytest.mark.parametrize(
    ("cached", "between", "expected"),
    [
        ({"a": "1"}, [], {"a"}),
        ({"a": "1", "p": "owner=j", "s": "skip"}, [], {"a", "j"}),
        ({"a": "1"}, [("b", "2")], {"a", "b"}),
        ({}, [("b", "skip")], set()),
    ],
)
async def test_a_new_term_starts_from_the_cache(
    cached: dict[str, str], between: list[tuple[str, str]], expected: set[str]
) -> None:
    loop = _loop(FakeSource())
    term = asyncio.create_task(loop.runner.run())
    await _idle(loop.runner)
    await _end(term)
    loop.source.cache.update(cached)  # in the cache, never announced: only the refill finds them
    for name, value in between:
        loop.source.put(name, value)  # announced while no term runs
    loop.synced.clear()
    term = asyncio.create_task(loop.runner.run())
    await _idle(loop.runner)
    await _end(term)
    assert set(loop.synced) == expected


async def test_workers_wait_for_the_sources_to_sync() -> None:
    loop = _loop(FakeSource(synced=False))
    loop.source.put("a", "1")
    term = asyncio.create_task(loop.runner.run())
    for _ in range(10):
        await asyncio.sleep(0)
    assert loop.synced == [], "no sync before the cache is complete"
    loop.source.synced.set()
    await _idle(loop.runner)
    await _end(term)
    assert loop.synced == ["a"]


async def test_stop_unsubscribes_and_ends_the_workers() -> None:
    loop = _loop(FakeSource())
    loop.runner.start()
    loop.source.put("a", "1")
    await _idle(loop.runner)
    async with asyncio.timeout(5):
        await loop.runner.stop()
    assert loop.source.handlers == [], "unsubscribed"
    loop.source.put("b", "2")
    await asyncio.sleep(0.01)
    assert loop.synced == ["a"], "nothing synced after stop"


async def test_a_failing_sync_comes_back_after_back_off() -> None:
    attempts: list[float] = []

    def sync(key: str) -> float | None:
        attempts.append(asyncio.get_running_loop().time())
        if len(attempts) < 3:
            raise RuntimeError("transient")
        return None

    loop = _loop(FakeSource(), sync)
    term = asyncio.create_task(loop.runner.run())
    loop.source.put("a", "1")
    await _idle(loop.runner)  # a key waiting out its back-off keeps the queue busy
    await _end(term)
    assert loop.synced == ["a", "a", "a"]
    assert attempts[2] - attempts[1] >= 0.008, "the second retry waits twice the first (5 ms, then 10 ms)"


async def test_prepare_runs_after_the_sync_and_beside_ends_with_the_term() -> None:
    source = FakeSource(synced=False)
    steps: list[str] = []
    beside_ended = asyncio.Event()

    async def prepare() -> None:
        steps.append(f"prepare, synced={source.synced.is_set()}")

    async def beside() -> None:
        steps.append("beside")
        try:
            await asyncio.Event().wait()
        finally:
            beside_ended.set()

    async def sync(key: str) -> None:
        steps.append(f"sync {key}")

    runner: Runner[str] = Runner(
        Controller(
            "t",
            sync,
            feeds=[Feed(source, lambda name, _v: runner.add(name))],
            prepare=prepare,
            beside=beside,
        )
    )
    source.put("a", "1")
    term = asyncio.create_task(runner.run())
    await asyncio.sleep(0)
    source.synced.set()
    await _idle(runner)
    await asyncio.sleep(0)
    await _end(term)
    assert steps == ["prepare, synced=True", "beside", "sync a"]
    assert beside_ended.is_set()
