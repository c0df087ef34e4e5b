"""Informers stay equal to the server under churn, across a server restart and after the watch window expires."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from multiqueue.api.meta import key_of
from multiqueue.api.types import CONFIGMAPS
from multiqueue.apiserver.server import ApiServer
from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.kube.informer import COMPACT, Handlers, Informer, InformerFactory
from tests.support.clients import client_for
from tests.support.servers import server_config
from tests.support.waiting import Changes


def _versions(objects: list[dict[str, Any]]) -> dict[str, str]:
    return {key_of(o): o["metadata"]["resourceVersion"] for o in objects}


async def _churn(client: KubeClient, start: int, count: int) -> None:
    """Creates, updates and deletes, many at once."""
    names = [f"cm-{i}" for i in range(start, start + count)]
    await asyncio.gather(*(client.create(CONFIGMAPS, {"metadata": {"name": n}}, "default") for n in names))
    await asyncio.gather(*(client.patch(CONFIGMAPS, n, {"data": {"v": "1"}}, "default") for n in names[::2]))
    await asyncio.gather(*(client.delete(CONFIGMAPS, n, "default") for n in names[::3]))


async def _in_sync(informer: Informer, client: KubeClient, changes: Changes) -> None:
    fresh, _ = await client.list(CONFIGMAPS)
    await changes.until(lambda: _versions(informer.objects()) == _versions(fresh))


async def test_informer_matches_a_fresh_list_after_churn(apiserver: ApiServer) -> None:
    client = await client_for(apiserver)
    try:
        informer = Informer(client, CONFIGMAPS)
        changes = Changes(informer)
        informer.start()
        await informer.wait_for_sync()
        await _churn(client, 0, 1500)
        await _in_sync(informer, client, changes)
        assert len(informer.objects("default")) == 1000
        await informer.stop()
    finally:
        await client.close()


async def test_informer_recovers_from_a_server_restart(tmp_path: Path) -> None:
    config = server_config(tmp_path / "state")
    server = ApiServer(config)
    await server.start()
    config.port = server.port
    client = await client_for(server)
    informer = Informer(client, CONFIGMAPS)
    changes = Changes(informer)
    informer.start()
    try:
        await informer.wait_for_sync()
        await _churn(client, 0, 300)
        await server.stop()
        server = ApiServer(config)
        await server.start()
        await _churn(client, 300, 300)
        await _in_sync(informer, client, changes)
        assert informer.relists >= 2
    finally:
        await informer.stop()
        await client.close()
        await server.stop()


async def test_expired_watch_window_relists_and_reports_vanished_objects(tmp_path: Path) -> None:
    server = ApiServer(server_config(tmp_path / "state", watch_window=20))
    await server.start()
    client = await client_for(server)
    informer = Informer(client, CONFIGMAPS, "default")
    deleted: list[str] = []
    informer.add_handlers(Handlers(on_delete=lambda o: deleted.append(o["metadata"]["name"])))
    changes = Changes(informer)
    try:
        for i in range(5):
            await client.create(CONFIGMAPS, {"metadata": {"name": f"keep-{i}"}}, "default")
        informer.start()
        await informer.wait_for_sync()
        await informer.stop()
        # While it is stopped: more changes than the window holds, including deletes it must still hear about.
        await client.delete(CONFIGMAPS, "keep-0", "default")
        await _churn(client, 0, 60)
        informer.start()
        await _in_sync(informer, client, changes)
        assert informer.relists == 2, "resuming from an expired version must lead to exactly one new LIST"
        assert "keep-0" in deleted
    finally:
        await informer.stop()
        await client.close()
        await server.stop()


async def test_factory_shares_one_informer_per_resource(apiserver: ApiServer) -> None:
    client = await client_for(apiserver)
    try:
        factory = InformerFactory(client)
        first = factory.informer(CONFIGMAPS)
        assert factory.informer(CONFIGMAPS) is first
        assert factory.informer(CONFIGMAPS, "default") is not first
        first.add_index("by-data", lambda o: [str((o.get("data") or {}).get("team", ""))])
        factory.start()
        await factory.wait_for_sync()
        changes = Changes(first)
        await client.create(CONFIGMAPS, {"metadata": {"name": "t"}, "data": {"team": "a"}}, "default")
        await changes.until(lambda: len(first.by_index("by-data", "a")) == 1)
        await factory.stop()
    finally:
        await client.close()


async def test_a_cache_without_managed_fields_writes_back_without_losing_the_servers(
    apiserver: ApiServer,
) -> None:
    """The manager's caches keep no managedFields; an update made from a cached object leaves the server's entries
    as they were (here the creator's) and adds the writer's own."""
    creator = await client_for(apiserver, options=ClientOptions(user_agent="creator/1"))
    client = await client_for(apiserver, options=ClientOptions(user_agent="updater/1"))
    factory = InformerFactory(client, COMPACT)
    informer = factory.informer(CONFIGMAPS, "default")
    changes = Changes(informer)
    try:
        await creator.create(CONFIGMAPS, {"metadata": {"name": "kept"}, "data": {"a": "1"}}, "default")
        factory.start()
        await factory.wait_for_sync()
        await changes.until(lambda: informer.get("default/kept") is not None)
        cached = informer.get("default/kept")
        assert cached is not None and "managedFields" not in cached["metadata"]
        updated = await client.update(CONFIGMAPS, {**cached, "data": {"a": "1", "b": "2"}})
        owners = {e["manager"]: set(e["fieldsV1"]["f:data"]) for e in updated["metadata"]["managedFields"]}
        assert owners == {"creator": {".", "f:a"}, "updater": {"f:b"}}
    finally:
        await factory.stop()
        await client.close()
        await creator.close()
