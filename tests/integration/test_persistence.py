"""A restarted local API server serves the same objects and continues the resourceVersion sequence."""

from __future__ import annotations

from pathlib import Path

import pytest

from multiqueue.apiserver.resources import ResourceType
from multiqueue.apiserver.rest import ApiError
from multiqueue.apiserver.server import ApiServer
from multiqueue.apiserver.store import Expired
from tests.support.servers import server_config


def _configmaps(server: ApiServer) -> ResourceType:
    rtype = server.registry.lookup("", "v1", "configmaps")
    assert rtype is not None
    return rtype


async def test_objects_and_resource_versions_survive_a_restart(tmp_path: Path) -> None:
    config = server_config(tmp_path / "state")
    first = ApiServer(config)
    await first.start()
    rtype = _configmaps(first)
    created = [
        await first.rest.create(rtype, "default", {"metadata": {"name": f"cm-{i}"}, "data": {"i": str(i)}})
        for i in range(20)
    ]
    await first.rest.delete(rtype, "default", "cm-3", {})
    last_rv = first.store.resource_version
    await first.stop()

    second = ApiServer(config)
    await second.start()
    try:
        listing = second.rest.list_collection(rtype, "default")
        names = [item["metadata"]["name"] for item in listing["items"]]
        assert names == sorted(f"cm-{i}" for i in range(20) if i != 3)
        again = second.rest.get(rtype, "default", "cm-7")
        assert again == created[7]
        assert int(listing["metadata"]["resourceVersion"]) >= last_rv
        newer = await second.rest.create(rtype, "default", {"metadata": {"name": "after-restart"}})
        assert int(newer["metadata"]["resourceVersion"]) > last_rv
    finally:
        await second.stop()


async def test_watch_from_before_a_restart_sees_every_later_event(tmp_path: Path) -> None:
    config = server_config(tmp_path / "state")
    first = ApiServer(config)
    await first.start()
    rtype = _configmaps(first)
    old = await first.rest.create(rtype, "default", {"metadata": {"name": "old"}})
    await first.rest.create(rtype, "default", {"metadata": {"name": "newer"}})
    await first.rest.delete(rtype, "default", "old", {})
    await first.stop()
    second = ApiServer(config)
    await second.start()
    try:
        watcher, backlog = second.store.watch(rtype.key, None, int(old["metadata"]["resourceVersion"]))
        watcher.close()
        assert [(e.type, e.obj["metadata"]["name"]) for e in backlog] == [
            ("ADDED", "newer"),
            ("DELETED", "old"),
        ]
        assert backlog[1].old is not None and backlog[1].old["metadata"] == old["metadata"]
    finally:
        await second.stop()


async def test_watch_from_before_the_kept_window_is_expired_after_a_restart(tmp_path: Path) -> None:
    first = ApiServer(server_config(tmp_path / "state"))
    await first.start()
    rtype = _configmaps(first)
    old = await first.rest.create(rtype, "default", {"metadata": {"name": "old"}})
    for i in range(3):
        await first.rest.create(rtype, "default", {"metadata": {"name": f"cm-{i}"}})
    await first.stop()
    # On the same port, as a cluster comes back: the server's own kubernetes Service needs no update then.
    second = ApiServer(server_config(tmp_path / "state", watch_window=2, port=first.port))
    await second.start()
    try:
        with pytest.raises(Expired):
            second.store.watch(rtype.key, None, int(old["metadata"]["resourceVersion"]))
        watcher, backlog = second.store.watch(rtype.key, None, second.store.oldest_watchable)
        watcher.close()
        assert [e.obj["metadata"]["name"] for e in backlog] == ["cm-1", "cm-2"]
    finally:
        await second.stop()


async def test_nothing_is_written_on_an_invalid_request(apiserver: ApiServer) -> None:
    jobs = apiserver.registry.lookup("batch", "v1", "jobs")
    assert jobs is not None
    before = apiserver.store.resource_version
    try:
        await apiserver.rest.create(jobs, "default", {"metadata": {"name": "x"}, "spec": {"template": {}}})
    except ApiError as exc:
        assert exc.code == 422
    else:
        raise AssertionError("an invalid Job must be refused")
    assert apiserver.store.resource_version == before


async def test_the_database_and_its_wal_are_private(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    (state / "objects.db").touch(mode=0o644)  # as an older version left it
    server = ApiServer(server_config(state))
    await server.start()
    try:
        await server.rest.create(_configmaps(server), "default", {"metadata": {"name": "secret-ish"}})
        modes = {p.name: p.stat().st_mode & 0o777 for p in state.iterdir() if p.name.startswith("objects.db")}
        assert modes == {"objects.db": 0o600, "objects.db-wal": 0o600, "objects.db-shm": 0o600}
        assert state.stat().st_mode & 0o777 == 0o700
    finally:
        await server.stop()
