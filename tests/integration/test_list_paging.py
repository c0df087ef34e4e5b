"""A paged LIST is one snapshot: every page shows the objects as they were at the first page's resourceVersion,
whatever was written in between; once that snapshot left the watch window, the next page is upstream's 410 with
a token that lists the rest as of now."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from multiqueue.apiserver.resources import ResourceType
from multiqueue.apiserver.rest import ApiError
from multiqueue.apiserver.rules import continuation
from multiqueue.apiserver.server import ApiServer
from tests.support.servers import server_config

LABELS = "app=paging"


async def _started(tmp_path: Path, window: int) -> tuple[ApiServer, ResourceType]:
    server = ApiServer(server_config(tmp_path / "state", watch_window=window))
    await server.start()
    rtype = server.registry.lookup("", "v1", "configmaps")
    assert rtype is not None
    for name in ("a", "b", "c", "d"):
        await _create(server, rtype, name)
    return server, rtype


async def _create(server: ApiServer, rtype: ResourceType, name: str) -> None:
    body = {"metadata": {"name": name, "labels": {"app": "paging"}}, "data": {"v": "1"}}
    await server.rest.create(rtype, "default", body)


async def _write_between_pages(server: ApiServer, rtype: ResourceType) -> None:
    await _create(server, rtype, "e")
    await server.rest.delete(rtype, "default", "c", {})
    await server.rest.patch(rtype, "default", "d", "application/merge-patch+json", {"data": {"v": "2"}})


def _shown(listing: dict[str, Any]) -> list[tuple[str, str]]:
    return [(item["metadata"]["name"], item["data"]["v"]) for item in listing["items"]]


async def test_every_page_lists_the_first_pages_snapshot(tmp_path: Path) -> None:
    server, rtype = await _started(tmp_path, window=100)
    try:
        first = server.rest.list_collection(rtype, "default", LABELS, limit=2)
        assert _shown(first) == [("a", "1"), ("b", "1")]
        await _write_between_pages(server, rtype)
        second = server.rest.list_collection(
            rtype, "default", LABELS, limit=2, continue_token=first["metadata"]["continue"]
        )
        assert _shown(second) == [("c", "1"), ("d", "1")]
        assert second["metadata"] == {"resourceVersion": first["metadata"]["resourceVersion"]}
    finally:
        await server.stop()


@pytest.mark.parametrize("limit", [0, -1])
async def test_a_limit_of_zero_or_less_pages_nothing(tmp_path: Path, limit: int) -> None:
    server, rtype = await _started(tmp_path, window=100)
    try:
        listing = server.rest.list_collection(rtype, "default", limit=limit)
        assert [name for name, _ in _shown(listing)] == ["a", "b", "c", "d"]
        assert "continue" not in listing["metadata"] and "remainingItemCount" not in listing["metadata"]
    finally:
        await server.stop()


async def test_a_snapshot_older_than_the_window_is_gone_with_a_token_to_go_on_as_of_now(
    tmp_path: Path,
) -> None:
    server, rtype = await _started(tmp_path, window=2)
    try:
        first = server.rest.list_collection(rtype, "default", LABELS, limit=2)
        await _write_between_pages(server, rtype)
        with pytest.raises(ApiError) as expired:
            server.rest.list_collection(
                rtype, "default", LABELS, limit=2, continue_token=first["metadata"]["continue"]
            )
        status = expired.value.status
        assert (status["code"], status["reason"], status["message"]) == (410, "Expired", continuation.TOO_OLD)
        rest = server.rest.list_collection(
            rtype, "default", LABELS, limit=2, continue_token=status["metadata"]["continue"]
        )
        assert _shown(rest) == [("d", "2"), ("e", "1")]
        assert rest["metadata"]["resourceVersion"] == str(server.store.resource_version)
    finally:
        await server.stop()
