"""The watch window: bounded by a number of events and by bytes, resumable from what a restart loaded, and too
old resourceVersions refused."""

from __future__ import annotations

import asyncio

import pytest

from multiqueue.apiserver.watchcache import Event, Expired, WatchCache


def _event(rv: int, size: int, name: str = "a") -> Event:
    obj = {"metadata": {"name": name, "namespace": "n", "resourceVersion": str(rv)}}
    return Event("MODIFIED", "configmaps", obj, rv, obj, size)


@pytest.mark.parametrize(
    ("sizes", "count", "budget", "kept"),
    [
        ([10, 10, 10], 5, 100, [1, 2, 3]),
        ([10, 10, 10], 2, 100, [2, 3]),  # bounded by count
        ([10, 10, 10], 5, 25, [2, 3]),  # bounded by bytes
        ([10, 50, 10], 5, 25, [3]),
        ([10, 10, 80], 5, 25, [3]),  # the newest event stays, whatever it weighs
        ([80, 1, 1, 1], 5, 25, [2, 3, 4]),  # one large event goes, many small ones stay
    ],
)
def test_window_bounds(sizes: list[int], count: int, budget: int, kept: list[int]) -> None:
    for loaded in (False, True):
        cache = WatchCache(count, budget)
        events = [_event(rv, size) for rv, size in enumerate(sizes, start=1)]
        if loaded:
            cache.start_at(len(sizes), events)  # what a restart loads is bounded the same way
        else:
            cache.start_at(0, [])
            for event in events:
                cache.publish(event)
        assert [e.rv for e in cache.since("configmaps", None, cache.oldest_watchable)] == kept
        assert cache.oldest_watchable == kept[0] - 1
        if kept[0] > 1:
            with pytest.raises(Expired, match=f"too old resource version: {kept[0] - 2} \\({kept[0] - 1}\\)"):
                cache.since("configmaps", None, kept[0] - 2)


def test_history_loaded_at_start_resumes_watches_from_before_it() -> None:
    cache = WatchCache()
    cache.start_at(12, [_event(10, 1), _event(11, 1, "b"), _event(12, 1)])
    watcher, backlog = cache.watch("configmaps", "n", 10)
    watcher.close()
    assert [(e.rv, e.obj["metadata"]["name"]) for e in backlog] == [(11, "b"), (12, "a")]
    assert cache.oldest_watchable == 9 and cache.last_rv == 12


def test_an_empty_window_is_watchable_from_now_on() -> None:
    cache = WatchCache()
    cache.start_at(40, [])
    assert cache.oldest_watchable == 40
    assert cache.since("configmaps", None, 40) == []
    with pytest.raises(Expired):
        cache.since("configmaps", None, 39)


async def test_wait_for_returns_once_the_resource_version_is_published() -> None:
    cache = WatchCache()
    cache.start_at(3, [])
    await cache.wait_for(3)  # already there
    waiting = asyncio.ensure_future(cache.wait_for(5))
    cache.publish(_event(4, 1))
    await asyncio.sleep(0)
    assert not waiting.done()
    cache.publish(_event(5, 1))
    await asyncio.wait_for(waiting, 1)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(cache.wait_for(9), 0.01)
