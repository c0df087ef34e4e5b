"""Watches over HTTP as kube-apiserver serves them: bookmarks on busy filtered watches and before the timeout,
the initial objects' closing bookmark, objects leaving a selector, and upstream's list-option errors."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from multiqueue.apiserver.server import ApiServer
from tests.support.servers import server_config

BOOKMARK_INTERVAL = 0.3
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    """A server whose bookmarks come every 0.3 s instead of every minute."""
    server = ApiServer(server_config(tmp_path / "state", bookmark_interval=BOOKMARK_INTERVAL))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def http(server: ApiServer) -> AsyncIterator[aiohttp.ClientSession]:
    headers = {"Authorization": f"Bearer {server.config.token}"}
    async with aiohttp.ClientSession(server.url, headers=headers) as session:
        yield session


async def create(http: aiohttp.ClientSession, name: str, labels: dict[str, str]) -> str:
    body = {"metadata": {"name": name, "labels": labels}, "data": {"n": "0"}}
    async with http.post(CONFIGMAPS, json=body) as response:
        assert response.status == 201, await response.text()
        return str((await response.json())["metadata"]["resourceVersion"])


async def patch(http: aiohttp.ClientSession, name: str, change: dict[str, Any]) -> str:
    async with http.patch(f"{CONFIGMAPS}/{name}", data=json.dumps(change), headers=MERGE) as response:
        assert response.status == 200, await response.text()
        return str((await response.json())["metadata"]["resourceVersion"])


async def events(
    http: aiohttp.ClientSession, query: dict[str, str], until: int = 0, limit: float = 10.0
) -> list[dict[str, Any]]:
    """The events of one watch until it ends, or until ``until`` of them came; fails after ``limit`` seconds."""
    found: list[dict[str, Any]] = []

    async def read() -> None:
        async with http.get(CONFIGMAPS, params={"watch": "1", **query}) as response:
            assert response.status == 200, await response.text()
            async for line in response.content:
                found.append(json.loads(line))
                if until and len(found) >= until:
                    return

    await asyncio.wait_for(read(), limit)
    return found


@contextlib.asynccontextmanager
async def busy(http: aiohttp.ClientSession, name: str) -> AsyncIterator[None]:
    """Changes one object far more often than bookmarks are due, for as long as the block runs."""
    await create(http, name, {"busy": "yes"})

    async def churn() -> None:
        n = 0
        while True:
            n += 1
            await patch(http, name, {"data": {"n": str(n)}})
            await asyncio.sleep(BOOKMARK_INTERVAL / 6)

    task = asyncio.create_task(churn())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_filtered_watch_gets_bookmarks_while_only_other_objects_change(
    http: aiohttp.ClientSession,
) -> None:
    start = await create(http, "quiet", {"app": "quiet"})
    query = {"resourceVersion": start, "labelSelector": "app=quiet", "allowWatchBookmarks": "true"}
    async with busy(http, "busy"):
        got = await events(http, {**query, "timeoutSeconds": "60"}, until=3)
    assert [e["type"] for e in got] == ["BOOKMARK"] * 3
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in got]
    assert versions == sorted(versions) and versions[0] > int(start), versions
    assert got[0]["object"]["kind"] == "ConfigMap" and got[0]["object"]["apiVersion"] == "v1"


async def test_without_allow_watch_bookmarks_no_bookmark_comes(http: aiohttp.ClientSession) -> None:
    start = await create(http, "quiet", {"app": "quiet"})
    async with busy(http, "busy"):
        got = await events(
            http, {"resourceVersion": start, "labelSelector": "app=quiet", "timeoutSeconds": "1"}
        )
    assert got == []


async def test_the_last_bookmark_comes_two_seconds_before_the_timeout(tmp_path: Path) -> None:
    server = ApiServer(server_config(tmp_path / "state"))  # bookmarks every minute, as upstream
    await server.start()
    try:
        headers = {"Authorization": f"Bearer {server.config.token}"}
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            start = await create(http, "a", {})
            query = {"resourceVersion": start, "allowWatchBookmarks": "true", "timeoutSeconds": "3"}
            watch = asyncio.create_task(events(http, query))
            changed = await patch(http, "a", {"data": {"n": "1"}})
            began = time.monotonic()
            got = await watch
            took = time.monotonic() - began
    finally:
        await server.stop()
    assert [e["type"] for e in got] == ["MODIFIED", "BOOKMARK"]
    assert int(got[1]["object"]["metadata"]["resourceVersion"]) >= int(changed)
    assert 2.5 < took < 4.5


async def test_no_bookmark_repeats_where_the_watch_started(
    http: aiohttp.ClientSession, server: ApiServer
) -> None:
    """Upstream sends a bookmark only once it can tell the client something newer than where it started."""
    await create(http, "a", {})
    now = str(server.store.resource_version)
    got = await events(http, {"resourceVersion": now, "allowWatchBookmarks": "true", "timeoutSeconds": "1"})
    assert got == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"allowWatchBookmarks": "true"}, ["ADDED a", "ADDED b", "BOOKMARK end"]),
        ({"allowWatchBookmarks": "true", "resourceVersion": "0"}, ["ADDED a", "ADDED b", "BOOKMARK end"]),
        ({}, ["ADDED a", "ADDED b"]),
        (
            {
                "allowWatchBookmarks": "true",
                "sendInitialEvents": "true",
                "resourceVersionMatch": "NotOlderThan",
            },
            ["ADDED a", "ADDED b", "BOOKMARK end"],
        ),
        (
            {
                "allowWatchBookmarks": "true",
                "sendInitialEvents": "false",
                "resourceVersionMatch": "NotOlderThan",
            },
            [],
        ),
    ],
)
async def test_a_watch_from_now_starts_with_the_objects_as_upstream_defaults_it(
    http: aiohttp.ClientSession, server: ApiServer, query: dict[str, str], expected: list[str]
) -> None:
    await create(http, "a", {})
    await create(http, "b", {})
    got = await events(http, {**query, "timeoutSeconds": "1"})
    seen = []
    for event in got:
        meta = event["object"]["metadata"]
        if event["type"] == "BOOKMARK":
            assert meta["annotations"] == {"k8s.io/initial-events-end": "true"}
            assert meta["resourceVersion"] == str(server.store.resource_version)
            seen.append("BOOKMARK end")
        elif meta["name"] != "kube-root-ca.crt":
            seen.append(f"{event['type']} {meta['name']}")
    assert seen == expected


async def test_an_object_leaving_the_selector_is_deleted_as_it_last_matched(
    http: aiohttp.ClientSession,
) -> None:
    start = await create(http, "a", {"tier": "front"})
    await patch(http, "a", {"data": {"n": "1"}})
    moved = await patch(http, "a", {"metadata": {"labels": {"tier": "back"}}, "data": {"n": "2"}})
    back = await patch(http, "a", {"metadata": {"labels": {"tier": "front"}}})
    got = await events(http, {"resourceVersion": start, "labelSelector": "tier=front", "timeoutSeconds": "1"})
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in got] == [
        ("MODIFIED", str(int(moved) - 1)),
        ("DELETED", moved),
        ("ADDED", back),
    ]
    deleted = got[1]["object"]
    assert deleted["metadata"]["labels"] == {"tier": "front"} and deleted["data"] == {"n": "1"}


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            {"watch": "1", "sendInitialEvents": "true", "timeoutSeconds": "1"},
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires '
            "setting resourceVersionMatch to NotOlderThan",
        ),
        (
            {"watch": "1", "resourceVersionMatch": "NotOlderThan", "timeoutSeconds": "1"},
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is '
            "forbidden for watch unless sendInitialEvents is provided",
        ),
        (
            {"sendInitialEvents": "true"},
            'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden '
            "for list",
        ),
    ],
)
async def test_bad_list_options_are_refused_as_upstream_refuses_them(
    http: aiohttp.ClientSession, query: dict[str, str], message: str
) -> None:
    async with http.get(CONFIGMAPS, params=query) as response:
        body = await response.json(content_type=None)
    assert response.status == 422
    assert body["reason"] == "Invalid" and body["message"] == message
    assert body["details"]["kind"] == "ListOptions" and body["details"]["group"] == "meta.k8s.io"


# --- lists at a resourceVersion --------------------------------------------------------------------------------


async def listed(http: aiohttp.ClientSession, **query: str) -> tuple[int, Any]:
    async with http.get(CONFIGMAPS, params={"labelSelector": "flow=rv", **query}) as response:
        body = await response.json()
    if response.status != 200:
        return response.status, body["message"]
    return 200, [(i["metadata"]["name"], i["data"]["n"]) for i in body["items"]] + [
        body["metadata"]["resourceVersion"]
    ]


async def test_an_exact_list_shows_the_objects_as_they_were(
    http: aiohttp.ClientSession, server: ApiServer
) -> None:
    first = await create(http, "a", {"flow": "rv"})
    await patch(http, "a", {"data": {"n": "1"}})
    await create(http, "b", {"flow": "rv"})
    async with http.delete(f"{CONFIGMAPS}/a") as response:
        assert response.status == 200
    now = str(server.store.resource_version)
    assert await listed(http, resourceVersion=first, resourceVersionMatch="Exact") == (
        200,
        [("a", "0"), first],
    )
    assert await listed(http, resourceVersion=first, resourceVersionMatch="NotOlderThan") == (
        200,
        [("b", "0"), now],
    )
    assert await listed(http, resourceVersion=now, resourceVersionMatch="Exact") == (200, [("b", "0"), now])
    too_large = str(int(now) + 10)
    assert await listed(http, resourceVersion=too_large, resourceVersionMatch="NotOlderThan") == (
        504,
        f"Timeout: Too large resource version: {too_large}, current: {now}",
    )


async def test_an_exact_list_older_than_the_window_is_gone(tmp_path: Path) -> None:
    server = ApiServer(server_config(tmp_path / "state", watch_window=2))
    await server.start()
    try:
        headers = {"Authorization": f"Bearer {server.config.token}"}
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            first = await create(http, "a", {"flow": "rv"})
            for n in range(1, 4):  # three changes; the window keeps two
                await patch(http, "a", {"data": {"n": str(n)}})
            assert await listed(http, resourceVersion=first, resourceVersionMatch="Exact") == (
                410,
                "The resourceVersion for the provided list is too old.",
            )
    finally:
        await server.stop()
