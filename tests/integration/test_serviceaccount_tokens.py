"""Service-account tokens on a local API server, over HTTPS as kubectl uses them: a token Secret gets its token from
the server's token controller, the token authenticates as the ServiceAccount (``kubectl auth whoami`` says so), and
deleting the Secret or the ServiceAccount revokes it at once."""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from multiqueue.apiserver.server import ApiServer
from multiqueue.apiserver.store import DEFAULT_WINDOW, DEFAULT_WINDOW_BYTES, Store
from tests.support.servers import server_config, tls_config
from tests.support.waiting import until_stored

Obj = dict[str, Any]
NAMESPACE = "team-a"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    running = ApiServer(server_config(tmp_path / "state", **tls_config(tmp_path, "test")))
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def session(tmp_path: Path, server: ApiServer) -> AsyncIterator[aiohttp.ClientSession]:
    ca = await asyncio.to_thread(ssl.create_default_context, cafile=str(tmp_path / "ca.crt"))
    async with aiohttp.ClientSession(server.url, connector=aiohttp.TCPConnector(ssl=ca)) as client:
        yield client


async def call(
    session: aiohttp.ClientSession, token: str, method: str, path: str, body: Obj | None = None
) -> tuple[int, Obj]:
    headers = {"Authorization": f"Bearer {token}"}
    async with session.request(method, path, json=body, headers=headers) as response:
        return response.status, await response.json()


async def token_secret(server: ApiServer, session: aiohttp.ClientSession, account: str = "runner") -> Obj:
    """A namespace, a ServiceAccount and its token Secret, made as the admin; the Secret once it has its token."""
    admin = server.config.token
    await call(session, admin, "POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    base = f"/api/v1/namespaces/{NAMESPACE}"
    status, _ = await call(session, admin, "POST", f"{base}/serviceaccounts", {"metadata": {"name": account}})
    assert status == 201
    secret = {
        "metadata": {
            "name": f"{account}-token",
            "annotations": {"kubernetes.io/service-account.name": account},
        },
        "type": "kubernetes.io/service-account-token",
    }
    status, _ = await call(session, admin, "POST", f"{base}/secrets", secret)
    assert status == 201

    def filled() -> bool:
        found = server.store.get("secrets", NAMESPACE, f"{account}-token")
        return bool(found and (found.get("data") or {}).get("token"))

    await until_stored(server, filled)
    found = server.store.get("secrets", NAMESPACE, f"{account}-token")
    assert found is not None
    return found


def decoded(secret: Obj, key: str) -> str:
    return base64.b64decode(secret["data"][key]).decode()


async def test_the_token_authenticates_as_the_service_account(
    server: ApiServer, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    secret = await token_secret(server, session)
    account = server.store.get("serviceaccounts", NAMESPACE, "runner")
    assert account is not None
    assert decoded(secret, "ca.crt") == (tmp_path / "ca.crt").read_text()
    assert decoded(secret, "namespace") == NAMESPACE
    assert (
        secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"] == account["metadata"]["uid"]
    )

    token = decoded(secret, "token")
    status, review = await call(session, token, "POST", WHOAMI, REVIEW)
    assert status == 201
    assert review["status"]["userInfo"] == {
        "username": f"system:serviceaccount:{NAMESPACE}:runner",
        "uid": account["metadata"]["uid"],
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"],
    }
    # No RBAC on the embedded server: the account may do what the admin may.
    status, _ = await call(session, token, "GET", f"/api/v1/namespaces/{NAMESPACE}/secrets")
    assert status == 200
    # Its first use is recorded on the Secret, as kube-apiserver does, once a day.
    used = server.store.get("secrets", NAMESPACE, "runner-token")
    assert used is not None
    today = server.clock().date().isoformat()
    assert used["metadata"]["labels"] == {"kubernetes.io/legacy-token-last-used": today}
    await call(session, token, "POST", WHOAMI, REVIEW)
    again = server.store.get("secrets", NAMESPACE, "runner-token")
    assert again is not None and again["metadata"]["resourceVersion"] == used["metadata"]["resourceVersion"]


async def test_deleting_the_secret_revokes_the_token(
    server: ApiServer, session: aiohttp.ClientSession
) -> None:
    token = decoded(await token_secret(server, session), "token")
    admin = server.config.token
    status, _ = await call(session, admin, "DELETE", f"/api/v1/namespaces/{NAMESPACE}/secrets/runner-token")
    assert status == 200
    status, refused = await call(session, token, "POST", WHOAMI, REVIEW)
    assert (status, refused["reason"]) == (401, "Unauthorized")


async def test_deleting_the_account_revokes_the_token_and_deletes_its_secret(
    server: ApiServer, session: aiohttp.ClientSession
) -> None:
    token = decoded(await token_secret(server, session), "token")
    admin = server.config.token
    path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/runner"
    status, _ = await call(session, admin, "DELETE", path)
    assert status == 200
    status, _ = await call(session, token, "POST", WHOAMI, REVIEW)
    assert status == 401
    await until_stored(server, lambda: server.store.get("secrets", NAMESPACE, "runner-token") is None)
    # Re-created under the same name, the account is another one: the old token stays refused.
    await call(
        session,
        admin,
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
        {"metadata": {"name": "runner"}},
    )
    status, _ = await call(session, token, "POST", WHOAMI, REVIEW)
    assert status == 401


async def test_a_token_secret_for_an_account_that_does_not_exist_is_deleted(
    server: ApiServer, session: aiohttp.ClientSession
) -> None:
    await token_secret(server, session)  # the namespace, and proof that the controller runs
    secret = {
        "metadata": {"name": "ghost-token", "annotations": {"kubernetes.io/service-account.name": "ghost"}},
        "type": "kubernetes.io/service-account-token",
    }
    status, _ = await call(
        session, server.config.token, "POST", f"/api/v1/namespaces/{NAMESPACE}/secrets", secret
    )
    assert status == 201
    await until_stored(server, lambda: server.store.get("secrets", NAMESPACE, "ghost-token") is None)


@pytest.mark.parametrize(
    "token",
    [
        "not-a-token",
        "dGVhbS1hL3J1bm5lci10b2tlbg.forged",  # names the Secret, but is not the token it holds
        "dGVhbS1hL25vLXN1Y2gtc2VjcmV0.x",  # names a Secret that does not exist
    ],
)
async def test_other_tokens_are_refused(
    server: ApiServer, session: aiohttp.ClientSession, token: str
) -> None:
    await token_secret(server, session)
    status, refused = await call(session, token, "POST", WHOAMI, REVIEW)
    assert (status, refused["reason"]) == (401, "Unauthorized")


async def test_a_token_secret_stored_without_a_token_gets_one_at_the_next_start(tmp_path: Path) -> None:
    """A token Secret stored while no token controller ran (by a multiqueue that had none, in the state
    directory a ``local up`` keeps) gets its token when the server starts."""
    config = server_config(tmp_path / "state", **tls_config(tmp_path, "test"))
    first = ApiServer(config)
    await first.start()
    try:
        namespaces = first.registry.lookup("", "v1", "namespaces")
        accounts = first.registry.lookup("", "v1", "serviceaccounts")
        assert namespaces is not None and accounts is not None
        await first.rest.create(namespaces, "", {"metadata": {"name": NAMESPACE}})
        await first.rest.create(accounts, NAMESPACE, {"metadata": {"name": "runner"}})
    finally:
        await first.stop()
    store = await Store.open(tmp_path / "state" / "objects.db", DEFAULT_WINDOW, DEFAULT_WINDOW_BYTES)
    try:
        meta = {
            "name": "runner-token",
            "namespace": NAMESPACE,
            "uid": "0b5f7e0e-7f4e-4d0c-9a43-2f1de1c2b001",
            "creationTimestamp": "2026-11-25T02:00:00Z",
            "annotations": {"kubernetes.io/service-account.name": "runner"},
        }
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta,
            "type": "kubernetes.io/service-account-token",
        }
        await store.put("secrets", body)
    finally:
        await store.close()
    second = ApiServer(config)
    await second.start()
    try:
        await second.idle()
        secret = second.store.get("secrets", NAMESPACE, "runner-token")
        assert secret is not None and secret["data"]["token"]
    finally:
        await second.stop()
