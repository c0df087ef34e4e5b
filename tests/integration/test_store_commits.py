"""Clients see a write only once it is durable: while its SQLite commit is held back, GET, LIST and the list's
resourceVersion show the state before it, writers already see it, and a commit that fails leaves nothing of it
(nor of the writes decided on top of it)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

import aiohttp
import pytest

from multiqueue.apiserver import journal
from multiqueue.apiserver.server import ApiServer

PATH = "/api/v1/namespaces/default/configmaps"
MERGE = {"Content-Type": "application/merge-patch+json"}


class Gate:
    """Holds the writer thread inside the transaction of any batch that writes a ConfigMap named ``gated-*``,
    until released; then commits it, or fails it as a full disk would."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        self.fail = False
        self.submitted: asyncio.Queue[journal.Write] = asyncio.Queue()
        persist = journal._persist
        submit = journal.Journal.submit

        def recorded(journal_: journal.Journal, write: journal.Write) -> asyncio.Future[None]:
            self.submitted.put_nowait(write)
            return submit(journal_, write)

        def gated(db: sqlite3.Connection, writes: list[journal.Write]) -> None:
            if any(str(w.event.obj["metadata"]["name"]).startswith("gated-") for w in writes):
                self.entered.set()
                self.released.wait(30)
                if self.fail:
                    raise sqlite3.OperationalError("database or disk is full")
            persist(db, writes)

        monkeypatch.setattr(journal, "_persist", gated)
        monkeypatch.setattr(journal.Journal, "submit", recorded)

    async def wait_submitted(self, event_type: str) -> journal.Write:
        """The next write of that type handed to the writer."""
        async with asyncio.timeout(30):
            while (write := await self.submitted.get()).event.type != event_type:
                pass
        return write

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, 30), "the gated write never reached the disk"


async def _call(http: aiohttp.ClientSession, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
    async with http.request(method, path, **kwargs) as response:
        return response.status, await response.json()


async def _listed(http: aiohttp.ClientSession) -> tuple[str, dict[str, Any]]:
    code, body = await _call(http, "GET", PATH)
    assert code == 200
    return body["metadata"]["resourceVersion"], {i["metadata"]["name"]: _item(i) for i in body["items"]}


def _item(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as a list shows it: without apiVersion and kind."""
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


async def test_a_write_is_seen_only_once_it_commits(
    apiserver: ApiServer, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, before = await _call(http, "POST", PATH, json={"metadata": {"name": "gated-a"}, "data": {"v": "1"}})
    assert code == 201
    gate = Gate(monkeypatch)
    async with asyncio.timeout(10):
        await apiserver.idle()  # its own first writes would move the list's resourceVersion
    list_rv, _ = await _listed(http)
    update = asyncio.create_task(
        _call(http, "PATCH", f"{PATH}/gated-a", json={"data": {"v": "2"}}, headers=MERGE)
    )
    create = asyncio.create_task(_call(http, "POST", PATH, json={"metadata": {"name": "gated-b"}}))
    await gate.wait_entered()

    code, seen = await _call(http, "GET", f"{PATH}/gated-a")
    assert (code, seen) == (200, before)
    code, _ = await _call(http, "GET", f"{PATH}/gated-b")
    assert code == 404
    assert await _listed(http) == (list_rv, {"gated-a": _item(before)})
    assert apiserver.store.published_resource_version == int(list_rv)
    # Writers are checked against the writes in flight.
    code, taken = await _call(http, "POST", PATH, json={"metadata": {"name": "gated-b"}})
    assert (code, taken["reason"]) == (409, "AlreadyExists")

    gate.released.set()
    (code, updated), (created_code, created) = await asyncio.gather(update, create)
    assert (code, created_code) == (200, 201)
    list_rv, items = await _listed(http)
    assert items == {"gated-a": _item(updated), "gated-b": _item(created)}
    assert int(list_rv) == max(
        int(updated["metadata"]["resourceVersion"]), int(created["metadata"]["resourceVersion"])
    )


async def test_a_failed_commit_leaves_nothing_of_its_writes(
    apiserver: ApiServer, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(monkeypatch)
    gate.fail = True
    async with asyncio.timeout(10):
        await apiserver.idle()  # its own first writes would move the list's resourceVersion
    list_rv, _ = await _listed(http)
    create = asyncio.create_task(_call(http, "POST", PATH, json={"metadata": {"name": "gated-c"}}))
    await gate.wait_entered()
    # Decided on top of the create still in flight: it must fail with it.
    code, _ = await _call(http, "GET", f"{PATH}/gated-c")
    assert code == 404
    update = asyncio.create_task(
        _call(http, "PATCH", f"{PATH}/gated-c", json={"data": {"v": "2"}}, headers=MERGE)
    )
    assert (await gate.wait_submitted("MODIFIED")).event.obj["data"] == {"v": "2"}
    gate.released.set()
    (create_code, _), (update_code, _) = await asyncio.gather(create, update)
    assert (create_code, update_code) == (500, 500)
    assert apiserver.store.latest("configmaps", "default", "gated-c") is None
    assert await _listed(http) == (list_rv, {})

    gate.fail = False
    code, created = await _call(
        http, "POST", PATH, json={"metadata": {"name": "gated-c"}, "data": {"v": "3"}}
    )
    assert code == 201 and int(created["metadata"]["resourceVersion"]) > int(list_rv)
    assert (await _call(http, "GET", f"{PATH}/gated-c")) == (200, created)
