"""Every namespace of a local cluster holds what kube-controller-manager puts in it on a real one: the ``default``
ServiceAccount and the ``kube-root-ca.crt`` ConfigMap with the cluster's CA; deleted, they come back; a namespace
that is going gets nothing new."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from multiqueue.apiserver.server import ApiServer
from tests.support.servers import server_config, tls_config
from tests.support.waiting import until_stored


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    running = ApiServer(server_config(tmp_path / "state", **tls_config(tmp_path, "test")))
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


def published(server: ApiServer, namespace: str) -> tuple[bool, str | None]:
    account = server.store.get("serviceaccounts", namespace, "default")
    configmap = server.store.get("configmaps", namespace, "kube-root-ca.crt")
    return account is not None, (configmap or {}).get("data", {}).get("ca.crt")


async def test_a_new_namespace_gets_the_default_service_account_and_the_ca(
    server: ApiServer, tmp_path: Path
) -> None:
    namespaces = server.registry.lookup("", "v1", "namespaces")
    assert namespaces is not None
    await server.rest.create(namespaces, "", {"metadata": {"name": "team-a"}})
    ca = (tmp_path / "ca.crt").read_text()
    await until_stored(server, lambda: published(server, "team-a") == (True, ca))
    assert published(server, "default") == (True, ca), "the namespaces a cluster starts with have them too"


async def test_deleted_they_come_back_but_not_in_a_namespace_that_is_going(server: ApiServer) -> None:
    namespaces = server.registry.lookup("", "v1", "namespaces")
    accounts = server.registry.lookup("", "v1", "serviceaccounts")
    assert namespaces is not None and accounts is not None
    await server.rest.create(namespaces, "", {"metadata": {"name": "team-b"}})
    await until_stored(server, lambda: published(server, "team-b")[0])
    first = server.store.get("serviceaccounts", "team-b", "default")
    await server.rest.delete(accounts, "team-b", "default", {}, False)
    await until_stored(
        server, lambda: server.store.get("serviceaccounts", "team-b", "default") not in (None, first)
    )

    await server.rest.delete(namespaces, "", "team-b", {}, False)
    await until_stored(server, lambda: server.store.get("namespaces", "", "team-b") is None)
    assert published(server, "team-b") == (False, None)
