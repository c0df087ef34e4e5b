"""The async client against a local API server and against a scripted one: verbs, typed errors, retries."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from multiqueue.api.types import CONFIGMAPS, JOBS
from multiqueue.apiserver.server import ApiServer
from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.kube.config import KubeconfigError, load_credentials
from multiqueue.kube.errors import AlreadyExists, Conflict, Invalid, NotFound, ServerError, Unauthorized
from tests.support.clients import client_for


@pytest.fixture
async def kube(apiserver: ApiServer) -> AsyncIterator[KubeClient]:
    client = await client_for(apiserver)
    yield client
    await client.close()


async def test_verbs_round_trip(kube: KubeClient) -> None:
    created = await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}, "data": {"k": "v"}}, "default")
    assert created["metadata"]["uid"]
    got = await kube.get(CONFIGMAPS, "a", "default")
    got["data"]["k"] = "w"
    updated = await kube.update(CONFIGMAPS, got)
    assert updated["data"] == {"k": "w"}
    patched = await kube.patch(CONFIGMAPS, "a", {"data": {"x": "y"}}, "default")
    assert patched["data"] == {"k": "w", "x": "y"}
    json_patched = await kube.patch(
        CONFIGMAPS, "a", [{"op": "remove", "path": "/data/x"}], "default", patch_type="json"
    )
    assert json_patched["data"] == {"k": "w"}
    for i in range(7):
        await kube.create(CONFIGMAPS, {"metadata": {"name": f"page-{i}"}}, "default")
    page = await kube.list_page(CONFIGMAPS, "default", limit=3)
    assert len(page["items"]) == 3 and page["metadata"]["continue"]
    items, rv = await kube.list(CONFIGMAPS, "default", page_size=3)
    assert len(items) == 8 and int(rv) > 0
    await kube.delete(CONFIGMAPS, "a", "default")
    with pytest.raises(NotFound):
        await kube.get(CONFIGMAPS, "a", "default")


async def test_typed_errors_carry_the_status(kube: KubeClient) -> None:
    await kube.create(CONFIGMAPS, {"metadata": {"name": "dup"}}, "default")
    with pytest.raises(AlreadyExists):
        await kube.create(CONFIGMAPS, {"metadata": {"name": "dup"}}, "default")
    stale = await kube.get(CONFIGMAPS, "dup", "default")
    await kube.patch(CONFIGMAPS, "dup", {"data": {"a": "b"}}, "default")
    with pytest.raises(Conflict) as conflict:
        await kube.update(CONFIGMAPS, stale)
    assert conflict.value.reason == "Conflict"
    with pytest.raises(Invalid) as invalid:
        await kube.create(CONFIGMAPS, {"metadata": {"name": "Not_Valid"}}, "default")
    assert [c["field"] for c in invalid.value.causes] == ["metadata.name"]
    with pytest.raises(Invalid) as bad_job:
        await kube.create(JOBS, {"metadata": {"name": "j"}, "spec": {"template": {"spec": {}}}}, "default")
    assert any(c["field"].startswith("spec.template") for c in bad_job.value.causes)


async def test_wrong_token_is_unauthorized(apiserver: ApiServer) -> None:
    credentials = await load_credentials(
        config_dict={
            "clusters": [{"name": "c", "cluster": {"server": apiserver.url}}],
            "users": [{"name": "u", "user": {"token": "wrong"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    )
    async with KubeClient(credentials) as client:
        with pytest.raises(Unauthorized):
            await client.get(CONFIGMAPS, "a", "default")


async def test_insecure_skip_tls_verify_is_refused_unless_allowed() -> None:
    config = {
        "clusters": [
            {"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    with pytest.raises(KubeconfigError, match="insecure-skip-tls-verify"):
        await load_credentials(config_dict=config)
    allowed = await load_credentials(config_dict=config, allow_insecure=True)
    assert allowed.server == "https://127.0.0.1:1"


async def test_exec_plugin_credentials_are_used_and_refreshed(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    plugin = tmp_path / "plugin.sh"
    plugin.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}\n"
        'echo "{\\"apiVersion\\":\\"client.authentication.k8s.io/v1\\",\\"kind\\":\\"ExecCredential\\",'
        '\\"status\\":{\\"token\\":\\"token-$n\\"}}"\n'
    )
    plugin.chmod(0o755)
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") == "Bearer token-1":
            return web.json_response({"kind": "Status", "code": 401, "reason": "Unauthorized"}, status=401)
        return web.json_response({"metadata": {"name": "x"}})

    async with _scripted(handler) as url:
        credentials = await load_credentials(
            config_dict={
                "clusters": [{"name": "c", "cluster": {"server": url}}],
                "users": [
                    {
                        "name": "u",
                        "user": {
                            "exec": {
                                "apiVersion": "client.authentication.k8s.io/v1",
                                "command": str(plugin),
                                "interactiveMode": "Never",
                            }
                        },
                    }
                ],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
        async with KubeClient(credentials) as client:
            assert (await client.get(CONFIGMAPS, "x", "default"))["metadata"]["name"] == "x"
    assert seen == ["Bearer token-1", "Bearer token-2"]


def _scripted(handler: web.RequestHandler) -> _ScriptedServer:  # type: ignore[type-arg]
    return _ScriptedServer(handler)


class _ScriptedServer:
    """A throwaway HTTP server answering every request with ``handler``."""

    def __init__(self, handler: web.RequestHandler) -> None:  # type: ignore[type-arg]
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        self.runner = web.AppRunner(app)

    async def __aenter__(self) -> str:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()


async def _plain_client(url: str) -> KubeClient:
    credentials = await load_credentials(
        config_dict={
            "clusters": [{"name": "c", "cluster": {"server": url}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    )
    return KubeClient(credentials, options=ClientOptions(max_retry_delay=10))


async def test_503_twice_then_200_is_retried_to_success() -> None:
    calls = 0

    async def handler(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        if calls <= 2:
            return web.json_response(
                {"kind": "Status", "code": 503, "reason": "ServiceUnavailable"}, status=503
            )
        return web.json_response({"metadata": {"name": "ok"}})

    async with _scripted(handler) as url:
        client = await _plain_client(url)
        async with client:
            assert (await client.get(CONFIGMAPS, "ok", "default"))["metadata"]["name"] == "ok"
    assert calls == 3


async def test_409_is_not_retried() -> None:
    calls = 0

    async def handler(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        return web.json_response(
            {"kind": "Status", "code": 409, "reason": "Conflict", "message": "modified"}, status=409
        )

    async with _scripted(handler) as url:
        client = await _plain_client(url)
        async with client:
            with pytest.raises(Conflict):
                await client.update(CONFIGMAPS, {"metadata": {"name": "x", "namespace": "default"}})
    assert calls == 1


async def test_500_that_persists_surfaces_as_server_error() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "code": 500, "reason": "InternalError"}, status=500)

    async with _scripted(handler) as url:
        client = await _plain_client(url)
        client.options.max_attempts = 3
        async with client:
            with pytest.raises(ServerError):
                await client.get(CONFIGMAPS, "x", "default")
