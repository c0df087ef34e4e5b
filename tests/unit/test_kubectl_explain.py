"""Real kubectl against discovery and OpenAPI alone: ``explain`` and ``api-resources`` need nothing more.

A minimal aiohttp app on 127.0.0.1 serves /version, discovery, /openapi/v3 and /openapi/v2 from the pure functions
(any bearer token is accepted); kubectl runs as an asyncio subprocess with its own cache directory. Every installed
kubectl 1.27-1.33 (gcloud installs them next to ``kubectl`` as ``kubectl.1.NN``) must list the resources, whichever
discovery shape it asks for; 1.27 and 1.28 explain from /openapi/v2, in protobuf.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes.client.models as models
import pytest
import yaml
from aiohttp import web

from multiqueue.apiserver import discovery, openapi, openapi_v2
from multiqueue.apiserver.resources import BUILTIN, ResourceType
from multiqueue.local.certs import serving_cert

KUBECTL = shutil.which("kubectl")
WIDGETS = ResourceType(
    "example.com",
    "v1",
    "Widget",
    "widgets",
    "widget",
    True,
    ("wd",),
    schema={
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "description": "What the widget should be.",
                "properties": {"size": {"type": "integer", "description": "How big the widget is, in cm."}},
            }
        },
    },
)
TYPES = (*BUILTIN, WIDGETS)


def _installed_kubectls() -> list[Path]:
    """``kubectl`` on PATH, then the versioned binaries installed beside its real file, oldest first."""
    if KUBECTL is None:
        return []
    beside = sorted(
        Path(KUBECTL).resolve().parent.glob("kubectl.1.*"), key=lambda p: int(p.name.rsplit(".", 1)[1])
    )
    return beside or [Path(KUBECTL)]


def _skip_without_kubectl() -> None:
    if KUBECTL is None:
        reason = "kubectl is not on PATH; the real-client checks of discovery and OpenAPI did not run"
        print(reason)
        pytest.skip(reason)


@dataclass
class Served:
    kubeconfig: Path
    cache_dir: Path
    requests: list[tuple[str, str]] = field(default_factory=list)  # (path with query, Accept)

    async def kubectl(self, *args: str, binary: Path | None = None) -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            str(binary or KUBECTL),
            "--kubeconfig",
            str(self.kubeconfig),
            "--cache-dir",
            str(self.cache_dir),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout=60)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
        return process.returncode or 0, out.decode(), err.decode()


def _app(types: tuple[ResourceType, ...], seen: list[tuple[str, str]]) -> web.Application:
    @web.middleware
    async def bearer_only(request: web.Request, handler: Any) -> web.StreamResponse:
        seen.append((request.path_qs, request.headers.get("Accept", "")))
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return web.json_response({"kind": "Status", "code": 401, "reason": "Unauthorized"}, status=401)
        response: web.StreamResponse = await handler(request)
        return response

    async def version(request: web.Request) -> web.Response:
        return web.json_response(discovery.version_info())

    async def root(request: web.Request) -> web.Response:
        legacy_core = request.path.rstrip("/") == "/api"
        content_type, body = discovery.discovery_root(types, legacy_core, request.headers.get("Accept", ""))
        response = web.json_response(body, content_type=content_type.split(";", 1)[0])
        response.headers["Content-Type"] = content_type
        response.headers["Vary"] = "Accept"
        return response

    async def resource_list(request: web.Request) -> web.Response:
        group = request.match_info.get("group", "")
        body = discovery.api_resource_list(types, group, request.match_info["version"])
        if body is None:
            raise web.HTTPNotFound()
        return web.json_response(body)

    async def document(request: web.Request) -> web.Response:
        reply = openapi.openapi_v3_reply(
            types,
            request.match_info.get("path", ""),
            now=datetime.now(UTC),
            hash_param=request.query.get("hash"),
            accept=request.headers.get("Accept", ""),
            if_none_match=request.headers.get("If-None-Match"),
        )
        if reply is None:
            raise web.HTTPNotFound()
        return web.Response(status=reply.status, headers=reply.headers, body=reply.body)

    async def document_v2(request: web.Request) -> web.Response:
        reply = openapi_v2.openapi_v2_reply(
            types, request.headers.get("Accept", ""), request.headers.get("If-None-Match")
        )
        return web.Response(status=reply.status, headers=reply.headers, body=reply.body)

    app = web.Application(middlewares=[bearer_only])
    app.router.add_get("/version", version)
    app.router.add_get("/api", root)
    app.router.add_get("/apis", root)
    app.router.add_get("/api/{version}", resource_list)
    app.router.add_get("/apis/{group}/{version}", resource_list)
    app.router.add_get("/openapi/v2", document_v2)
    app.router.add_get("/openapi/v3", document)
    app.router.add_get("/openapi/v3/{path:.+}", document)
    return app


@pytest.fixture
def tls(tmp_path: Path) -> tuple[ssl.SSLContext, Path]:
    """A serving context and its CA file: kubectl sends bearer tokens only over TLS."""
    cert = serving_cert(tmp_path / "tls", "explain", "127.0.0.1")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert.cert_file, cert.key_file)
    return context, cert.ca_file


@pytest.fixture
async def served(tls: tuple[ssl.SSLContext, Path], tmp_path: Path) -> AsyncIterator[Served]:
    _skip_without_kubectl()
    context, ca_file = tls
    requests: list[tuple[str, str]] = []
    runner = web.AppRunner(_app(TYPES, requests))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": f"https://127.0.0.1:{port}", "certificate-authority": str(ca_file)},
            }
        ],
        "users": [{"name": "u", "user": {"token": "any-token-will-do"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "default"}}],
        "current-context": "c",
    }
    kubeconfig = tmp_path / "kubeconfig"
    await asyncio.to_thread(kubeconfig.write_text, yaml.safe_dump(config))
    try:
        yield Served(kubeconfig, tmp_path / "kube-cache", requests)
    finally:
        await runner.cleanup()


async def test_explain_reads_a_field_from_the_openapi_v3_document(served: Served) -> None:
    code, out, err = await served.kubectl("explain", "jobs.spec.parallelism")
    assert code == 0, err
    assert "KIND:       Job" in out and "VERSION:    v1" in out, out
    assert "FIELD: parallelism <integer>" in out, out
    description = models.V1JobSpec.model_fields["parallelism"].description or ""
    assert " ".join(description.split()[:8]) in " ".join(out.split()), out
    batch = openapi.rendered_document(TYPES, "batch", "v1")
    assert batch is not None
    fetched = [path for path, _ in served.requests if path.startswith("/openapi/v3/apis/batch/v1?")]
    assert fetched and all(f"hash={batch.etag}" in path for path in fetched), fetched


async def test_explain_walks_references_and_custom_kinds(served: Served) -> None:
    code, out, err = await served.kubectl("explain", "jobs.spec.template.spec.containers.resources.limits")
    assert code == 0, err
    assert "FIELD: limits <map[string]Quantity>" in out, out
    code, out, err = await served.kubectl("explain", "widgets.spec.size")
    assert code == 0, err
    assert "FIELD: size <integer>" in out and "How big the widget is, in cm." in out, out


async def test_api_resources_lists_every_kind_with_its_short_names(served: Served) -> None:
    code, out, err = await served.kubectl("api-resources", "--no-headers")
    assert code == 0, err
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert rows["jobs"] == ["batch/v1", "true", "Job"]
    assert rows["cronjobs"] == ["cj", "batch/v1", "true", "CronJob"]
    assert rows["pods"] == ["po", "v1", "true", "Pod"]
    assert rows["namespaces"] == ["ns", "v1", "false", "Namespace"]
    assert rows["leases"] == ["coordination.k8s.io/v1", "true", "Lease"]
    assert rows["customresourcedefinitions"] == [
        "crd,crds",
        "apiextensions.k8s.io/v1",
        "false",
        "CustomResourceDefinition",
    ]
    assert rows["widgets"] == ["wd", "example.com/v1", "true", "Widget"]


@pytest.mark.parametrize("binary", _installed_kubectls(), ids=lambda path: path.name)
async def test_each_installed_kubectl_reads_aggregated_discovery(served: Served, binary: Path) -> None:
    code, out, err = await served.kubectl("api-resources", "--api-group=batch", "-o", "name", binary=binary)
    assert code == 0, err
    assert out.split() == ["cronjobs.batch", "jobs.batch"]
    paths = [path.split("?", 1)[0] for path, _ in served.requests]
    # One aggregated answer per root replaces the per-group-version requests of legacy discovery.
    assert "/apis/batch/v1" not in paths and "/api/v1" not in paths, paths
    accepted = {accept for path, accept in served.requests if path.startswith("/apis?")}
    assert any("as=APIGroupDiscoveryList" in accept for accept in accepted), accepted


@pytest.mark.parametrize("version", ["1.27", "1.28"])
async def test_kubectl_that_reads_openapi_v2_explains_from_it(served: Served, version: str) -> None:
    binary = next((p for p in _installed_kubectls() if p.name == f"kubectl.{version}"), None)
    if binary is None:
        reason = f"kubectl.{version} is not installed beside kubectl; its /openapi/v2 reading did not run"
        print(reason)
        pytest.skip(reason)
    code, out, err = await served.kubectl("explain", "jobs.spec.parallelism", binary=binary)
    assert code == 0, err
    assert "FIELD: parallelism <integer>" in out, out
    code, out, err = await served.kubectl("explain", "widgets.spec.size", binary=binary)
    assert code == 0, err
    assert "How big the widget is, in cm." in out, out
    asked = [accept for path, accept in served.requests if path.split("?")[0] == "/openapi/v2"]
    assert asked and all(openapi_v2.PROTOBUF_DEPRECATED in accept for accept in asked), asked
