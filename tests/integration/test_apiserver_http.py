"""The local API server over HTTP: errors as Status objects, dry runs, collections, CRDs, pods/log."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from multiqueue.apiserver.protowire import len_field, string_field, varint_field
from multiqueue.apiserver.server import ApiServer
from tests.support.servers import server_config, tls_config

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "j"},
    "spec": {
        "suspend": True,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}},
    },
}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


async def _call(session: aiohttp.ClientSession, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
    async with session.request(method, path, **kwargs) as response:
        text = await response.text()
        return response.status, json.loads(text) if text.startswith("{") else text


async def test_errors_are_status_objects(http: aiohttp.ClientSession, apiserver: ApiServer) -> None:
    async with aiohttp.ClientSession(apiserver.url) as anonymous:
        code, body = await _call(anonymous, "GET", "/api/v1/namespaces")
    assert (code, body["reason"]) == (401, "Unauthorized")
    # Under a group version the server serves, a Status; under one it does not, Go's plain-text 404, as upstream.
    code, body = await _call(http, "GET", "/apis/batch/v1/things")
    assert (code, body["kind"], body["reason"]) == (404, "Status", "NotFound")
    code, body = await _call(http, "GET", "/apis/nope.example.com/v1/things")
    assert (code, body) == (404, "404 page not found\n")
    code, body = await _call(
        http,
        "POST",
        "/apis/batch/v1/namespaces/default/jobs",
        data=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert (code, body["reason"]) == (400, "BadRequest")
    code, body = await _call(
        http, "POST", "/api/v1/namespaces/default/configmaps", json={"data": {"x": "y" * (3 * 1024 * 1024)}}
    )
    assert code == 413 and body["kind"] == "Status"
    code, body = await _call(http, "POST", "/apis/batch/v1/namespaces/nowhere/jobs", json=JOB)
    assert (code, body["message"]) == (404, 'namespaces "nowhere" not found')
    assert apiserver.store.get("batch/jobs", "nowhere", "j") is None


async def test_dry_run_writes_nothing(http: aiohttp.ClientSession, apiserver: ApiServer) -> None:
    before = apiserver.store.resource_version
    code, body = await _call(http, "POST", "/apis/batch/v1/namespaces/default/jobs?dryRun=All", json=JOB)
    assert code == 201 and body["spec"]["backoffLimit"] == 6
    watcher, written = apiserver.store.watch("batch/jobs", None, before)
    watcher.close()
    assert written == []
    code, _ = await _call(http, "GET", "/apis/batch/v1/namespaces/default/jobs/j")
    assert code == 404


async def test_generate_name_and_delete_collection(http: aiohttp.ClientSession) -> None:
    names = []
    for _ in range(3):
        code, body = await _call(
            http,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            json={"metadata": {"generateName": "gen-", "labels": {"g": "1"}}},
        )
        assert code == 201
        names.append(body["metadata"]["name"])
    assert len(set(names)) == 3 and all(n.startswith("gen-") and len(n) == 9 for n in names)
    code, _ = await _call(http, "DELETE", "/api/v1/namespaces/default/configmaps?labelSelector=g%3D1")
    assert code == 200
    code, body = await _call(http, "GET", "/api/v1/namespaces/default/configmaps?labelSelector=g%3D1")
    assert body["items"] == []


async def test_status_subresource_ignores_spec_and_main_ignores_status(http: aiohttp.ClientSession) -> None:
    await _call(http, "POST", "/apis/batch/v1/namespaces/default/jobs", json=JOB)
    code, body = await _call(
        http,
        "PATCH",
        "/apis/batch/v1/namespaces/default/jobs/j/status",
        json={"spec": {"parallelism": 9}, "status": {"active": 1}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert code == 200 and body["spec"]["parallelism"] == 1 and body["status"]["active"] == 1
    code, body = await _call(
        http,
        "PATCH",
        "/apis/batch/v1/namespaces/default/jobs/j",
        data=json.dumps({"spec": {"parallelism": 2}, "status": {"active": 5}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert code == 200 and body["spec"]["parallelism"] == 2 and body["status"]["active"] == 1
    assert body["metadata"]["generation"] == 2


async def test_custom_resources_are_served(http: aiohttp.ClientSession) -> None:
    code, _ = await _call(http, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=CRD)
    assert code == 201
    path = "/apis/example.com/v1/namespaces/default/widgets"
    established = False
    async with http.get(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=1&timeoutSeconds=30"
    ) as stream:
        async for line in stream.content:
            event = json.loads(line)
            conditions = event["object"].get("status", {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                established = True
                break
    assert established, "the CRD never became Established"
    code, body = await _call(http, "GET", "/apis/example.com/v1")
    assert code == 200, body
    assert [r["name"] for r in body["resources"]] == ["widgets", "widgets/status"]
    code, body = await _call(
        http,
        "POST",
        path,
        json={
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 3},
        },
    )
    assert code == 201 and body["metadata"]["generation"] == 1
    code, body = await _call(
        http, "PUT", f"{path}/w/status", json={**body, "status": {"ready": True}, "spec": {"size": 99}}
    )
    assert code == 200 and body["spec"] == {"size": 3} and body["status"] == {"ready": True}
    code, body = await _call(
        http,
        "PATCH",
        f"{path}/w",
        data=b'{"spec":{"size":4}}',
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert code == 415
    code, body = await _call(
        http, "POST", path, data=protobuf_body("example.com/v1", "Widget", b""), headers=PROTOBUF
    )
    assert (code, body["reason"]) == (415, "UnsupportedMediaType"), "custom resources have no protobuf"
    code, _ = await _call(
        http, "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com"
    )
    assert code == 200


async def test_discovery_follows_the_accept_header(http: aiohttp.ClientSession) -> None:
    aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    async with http.get("/apis", headers={"Accept": f"{aggregated},application/json;q=0.9"}) as response:
        assert response.headers["Content-Type"] == aggregated
        assert response.headers["Vary"] == "Accept"
        body = await response.json(content_type=None)
    assert body["kind"] == "APIGroupDiscoveryList"
    assert "batch" in [g["metadata"]["name"] for g in body["items"]]
    status, legacy = await _call(http, "GET", "/apis", headers={"Accept": "application/json"})
    assert (status, legacy["kind"]) == (200, "APIGroupList")
    status, group = await _call(http, "GET", "/apis/batch")
    assert (status, group["kind"], group["preferredVersion"]["groupVersion"]) == (200, "APIGroup", "batch/v1")
    status, _ = await _call(http, "GET", "/apis/policy")
    assert status == 404


async def test_openapi_documents_carry_etags_and_honour_if_none_match(http: aiohttp.ClientSession) -> None:
    status, index = await _call(http, "GET", "/openapi/v3")
    assert status == 200
    url = index["paths"]["apis/batch/v1"]["serverRelativeURL"]
    async with http.get(url) as response:
        assert response.status == 200
        etag = response.headers["ETag"]
        assert "immutable" in response.headers["Cache-Control"]
        document = await response.json()
    assert "io.k8s.api.batch.v1.Job" in document["components"]["schemas"]
    async with http.get(url, headers={"If-None-Match": etag}) as response:
        assert response.status == 304
    async with http.get("/openapi/v3/apis/batch/v1?hash=stale", allow_redirects=False) as response:
        assert (response.status, response.headers["Location"]) == (301, url)


async def test_openapi_v2_is_served_in_json_and_protobuf(http: aiohttp.ClientSession) -> None:
    async with http.get("/openapi/v2", headers={"Accept": "application/json"}) as response:
        assert (response.status, response.headers["Content-Type"]) == (200, "application/json")
        etag = response.headers["ETag"]
        document = await response.json()
    assert document["swagger"] == "2.0" and "io.k8s.api.batch.v1.Job" in document["definitions"]
    protobuf = {"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}
    async with http.get("/openapi/v2", headers=protobuf) as response:
        assert response.status == 200, await response.text()
        assert (
            response.headers["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        )
        assert (response.headers["ETag"], (await response.read())[:5]) == (etag, b"\x0a\x032.0")  # swagger 1
    async with http.get("/openapi/v2", headers={**protobuf, "If-None-Match": etag}) as response:
        assert response.status == 304
    async with http.get("/openapi/v2", headers={"Accept": "text/html"}) as response:
        assert response.status == 406


async def test_a_bad_include_object_is_a_bad_request(http: aiohttp.ClientSession) -> None:
    table = "application/json;as=Table;v=v1;g=meta.k8s.io"
    for path in (
        "/apis/batch/v1/namespaces/default/jobs",
        "/apis/batch/v1/namespaces/default/jobs?watch=true",
    ):
        sep = "&" if "?" in path else "?"
        status, body = await _call(
            http, "GET", f"{path}{sep}includeObject=Everything", headers={"Accept": table}
        )
        assert (status, body["reason"]) == (400, "BadRequest")
        assert 'includeObject: Unsupported value: "Everything"' in body["message"]


async def test_reviews_are_answered_and_only_created(
    http: aiohttp.ClientSession, apiserver: ApiServer
) -> None:
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "delete", "resource": "pods"}},
    }
    code, body = await _call(http, "POST", path, json=review)
    assert (code, body["status"]) == (201, {"allowed": True})
    for method, where in (("GET", path), ("GET", f"{path}/x"), ("DELETE", f"{path}/x"), ("PUT", f"{path}/x")):
        code, body = await _call(http, method, where, json=review)
        assert (code, body["reason"]) == (405, "MethodNotAllowed"), (method, where)
    for not_an_object in ("str", []):
        code, body = await _call(http, "POST", path, json=not_an_object)
        assert (code, body["reason"]) == (400, "BadRequest")
    assert apiserver.store.list_objects("authorization.k8s.io/selfsubjectaccessreviews") == []


async def test_job_status_times_are_stored_to_the_second_and_judged_as_stored(
    http: aiohttp.ClientSession,
) -> None:
    """As kube-apiserver: a write is validated with the time as written, then stored in whole seconds, so the
    next write that says the stored time again is not a change of startTime."""
    job = json.loads(json.dumps(JOB))
    job["metadata"]["name"] = "timed"
    job["spec"]["managedBy"] = "example.com/other"
    path = "/apis/batch/v1/namespaces/default/jobs"
    code, created = await _call(http, "POST", path, json=job)
    assert code == 201, created
    written = {**created, "status": {"startTime": "2026-01-01T12:00:00.5Z", "active": 1}}
    code, stored = await _call(http, "PUT", f"{path}/timed/status", json=written)
    assert (code, stored["status"]["startTime"]) == (200, "2026-01-01T12:00:00Z"), stored
    again = {**stored, "status": {"startTime": "2026-01-01T12:00:00Z", "active": 1}}
    code, body = await _call(http, "PUT", f"{path}/timed/status", json=again)
    assert code == 200, body


async def test_defaults_apply_to_updates_too(http: aiohttp.ClientSession) -> None:
    """Go defaults every body it decodes: a CronJob replaced from a manifest that leaves out concurrencyPolicy
    (kubectl replace -f) is defaulted again, not refused for missing it."""
    cronjob: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": JOB["spec"]}},
    }
    path = "/apis/batch/v1/namespaces/default/cronjobs"
    code, created = await _call(http, "POST", path, json=cronjob)
    assert code == 201, created
    replaced = json.loads(json.dumps(cronjob))
    replaced["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    replaced["spec"]["schedule"] = "0 4 * * *"
    code, body = await _call(http, "PUT", f"{path}/nightly", json=replaced)
    assert code == 200, body
    assert (body["spec"]["schedule"], body["spec"]["concurrencyPolicy"]) == ("0 4 * * *", "Allow")
    assert body["metadata"]["generation"] == 2


PROTOBUF = {"Content-Type": "application/vnd.kubernetes.protobuf"}


def protobuf_body(api_version: str, kind: str, raw: bytes) -> bytes:
    """The magic and a runtime.Unknown: typeMeta (apiVersion 1, kind 2) 1, raw 2."""
    type_meta = string_field(1, api_version) + string_field(2, kind)
    return b"k8s\x00" + len_field(1, type_meta) + len_field(2, raw)


def configmap(name: str, value: str) -> bytes:
    """metadata 1 (name 1), data 2 (a map entry: key 1, value 2)."""
    entry = string_field(1, "greeting") + string_field(2, value)
    return protobuf_body("v1", "ConfigMap", len_field(1, string_field(1, name)) + len_field(2, entry))


async def test_protobuf_bodies_are_served_as_their_json(http: aiohttp.ClientSession) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    strict = {"fieldValidation": "Strict"}  # unknown field numbers are skipped whatever it says, as upstream
    code, created = await _call(
        http, "POST", path, params=strict, data=configmap("pb", "hi") + varint_field(99, 1), headers=PROTOBUF
    )
    assert code == 201, created
    assert (created["kind"], created["metadata"]["name"], created["data"]) == (
        "ConfigMap",
        "pb",
        {"greeting": "hi"},
    )
    code, updated = await _call(http, "PUT", f"{path}/pb", data=configmap("pb", "again"), headers=PROTOBUF)
    assert (code, updated["data"]) == (200, {"greeting": "again"})
    code, refused = await _call(http, "POST", path, data=b"k8s\x00\x0a", headers=PROTOBUF)
    assert (code, refused["reason"]) == (400, "BadRequest")
    assert refused["message"] == (
        "the object provided is unrecognized (must be of type ConfigMap): unexpected EOF (6b3873000a)"
    )
    code, refused = await _call(
        http, "POST", path, params={"fieldValidation": "strict"}, data=configmap("x", "y"), headers=PROTOBUF
    )
    assert (code, refused["reason"]) == (422, "Invalid")
    code, refused = await _call(http, "PATCH", f"{path}/pb", data=configmap("pb", "z"), headers=PROTOBUF)
    assert (code, refused["message"]) == (415, "415: Unsupported Media Type")
    dry_run = protobuf_body("v1", "DeleteOptions", len_field(5, b"All"))  # dryRun 5
    code, _ = await _call(http, "DELETE", f"{path}/pb", data=dry_run, headers=PROTOBUF)
    assert code == 200
    code, kept = await _call(http, "GET", f"{path}/pb")
    assert (code, kept["data"]) == (200, {"greeting": "again"}), "a dry-run delete leaves it"


async def test_yaml_bodies_create_and_update(http: aiohttp.ClientSession) -> None:
    """kubectl and other clients may send YAML to create and replace; a patch in plain YAML is still refused."""
    path = "/api/v1/namespaces/default/configmaps"
    yaml_type = {"Content-Type": "application/yaml"}
    manifest = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  when: 2024-01-01T00:00:00Z\n"
    )
    code, created = await _call(http, "POST", path, data=manifest, headers=yaml_type)
    assert (code, created["data"]) == (201, {"when": "2024-01-01T00:00:00Z"}), created
    code, updated = await _call(
        http, "PUT", f"{path}/from-yaml", data=manifest.replace("2024", "2025"), headers=yaml_type
    )
    assert (code, updated["data"]) == (200, {"when": "2025-01-01T00:00:00Z"}), updated
    code, warned = await _call(
        http,
        "POST",
        path,
        params={"fieldValidation": "Strict"},
        data=manifest + "extra: 1\n",
        headers=yaml_type,
    )
    assert (code, warned["message"]) == (
        400,
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "extra"',
    )
    code, refused = await _call(http, "POST", path, data="a: b: c", headers=yaml_type)
    assert (code, refused["reason"]) == (400, "BadRequest")
    assert refused["message"].startswith(
        "the object provided is unrecognized (must be of type ConfigMap): yaml:"
    )
    code, refused = await _call(http, "PATCH", f"{path}/from-yaml", data="data: {}", headers=yaml_type)
    assert (code, refused["reason"]) == (415, "UnsupportedMediaType")
    dry_run = "kind: DeleteOptions\napiVersion: v1\ndryRun: [All]\n"
    code, _ = await _call(http, "DELETE", f"{path}/from-yaml", data=dry_run, headers=yaml_type)
    assert code == 200
    code, _ = await _call(http, "GET", f"{path}/from-yaml")
    assert code == 200, "DeleteOptions in YAML are read too: a dry run leaves the object"


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public"])
async def test_the_namespaces_kubernetes_keeps_cannot_be_deleted(
    http: aiohttp.ClientSession, name: str
) -> None:
    code, body = await _call(http, "DELETE", f"/api/v1/namespaces/{name}")
    assert (code, body["reason"], body["message"]) == (
        403,
        "Forbidden",
        f'namespaces "{name}" is forbidden: this namespace may not be deleted',
    )
    assert body["details"] == {"name": name, "kind": "namespaces"}
    code, _ = await _call(http, "GET", "/api/v1/namespaces/default")
    assert code == 200


async def _raw(server: ApiServer, request: bytes) -> bytes:
    """One request sent byte for byte as given (no client tidies its path); the whole answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(request)
    answer = await reader.read()
    writer.close()
    return answer


async def test_root_and_bad_paths_are_answered_as_upstream_answers_them(
    http: aiohttp.ClientSession, apiserver: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    code, body = await _call(http, "GET", "/")
    assert code == 200
    assert {"/api", "/api/v1", "/apis", "/apis/batch", "/apis/batch/v1", "/version"} <= set(body["paths"])
    assert body["paths"] == sorted(body["paths"])
    token = apiserver.config.token
    cases = {
        # path -> (status line, what the body holds)
        "/api/v1/namespaces/default%0a": (b"404 Not Found", b'namespaces \\"default\\\\n\\" not found'),
        "/api/v1/namespaces/a%00b": (b"404 Not Found", b'"reason":"NotFound"'),
        "/foo%0a": (b"404 Not Found", b"404 page not found"),
        "/api/v1/namespaces/%zz": (b"400 Bad Request", b"400 Bad Request"),
        "/api/v1/namespaces/default/configmaps/..": (b"400 Bad Request", b"may not be '..'"),
        "/api/v1/namespaces/default/configmaps/a%25b": (b"400 Bad Request", b"may not contain '%'"),
        "/api/v1/namespaces/" + "a" * 20000: (b"404 Not Found", b'"reason":"NotFound"'),
    }
    for path, (status, expected) in cases.items():
        request = (
            f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        )
        answer = await _raw(apiserver, request.encode())
        assert answer.startswith(b"HTTP/1.1 " + status) and expected in answer, (path[:60], answer[:300])
    assert "Traceback" not in caplog.text and "failed" not in caplog.text


async def test_bodies_over_the_limit_are_refused_as_they_arrive(http: aiohttp.ClientSession) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    message = "Request entity too large: limit is 3145728"
    big = json.dumps({"metadata": {"name": "big"}, "data": {"x": "y" * (3 * 1024 * 1024)}}).encode()
    code, body = await _call(http, "POST", path, data=big, headers={"Content-Type": "application/json"})
    assert (code, body["reason"], body["message"]) == (413, "RequestEntityTooLarge", message)

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted while read
        for start in range(0, len(big), 65536):
            yield big[start : start + 65536]

    code, body = await _call(http, "POST", path, data=chunked(), headers={"Content-Type": "application/json"})
    assert (code, body["message"]) == (413, message)
    code, _ = await _call(http, "GET", f"{path}/big")
    assert code == 404


async def test_slow_requests_time_out_and_kept_alive_connections_stay(tmp_path: Path) -> None:
    """A body that does not arrive within the request's timeout is upstream's 504; a kept-alive connection idle for
    longer than the header timeout still serves its next request; a watch without timeoutSeconds ends between
    --min-request-timeout and twice that."""
    config = server_config(tmp_path / "state", request_header_timeout=0.5, min_request_timeout=1)
    server = ApiServer(config)
    await server.start()
    try:
        headers = {"Authorization": f"Bearer {config.token}"}
        connector = aiohttp.TCPConnector(limit=1)
        async with aiohttp.ClientSession(server.url, headers=headers, connector=connector) as session:

            async def trickle() -> AsyncIterator[bytes]:
                for byte in b'{"metadata":{"name":"late"}}':
                    await asyncio.sleep(0.1)  # the client's own pace
                    yield bytes([byte])

            path = "/api/v1/namespaces/default/configmaps"
            code, body = await _call(session, "GET", path, params={"timeout": "soon"})
            assert (code, body["message"]) == (
                400,
                'invalid timeout specified in the request URL - time: invalid duration "soon"',
            )
            # The request's own, shorter timeout (a Go duration) stands in for --request-timeout.
            code, body = await _call(session, "POST", path, params={"timeout": "500ms"}, data=trickle())
            assert (code, body["reason"], body["message"]) == (
                504,
                "Timeout",
                "Timeout: request did not complete within the allotted timeout",
            )
            code, _ = await _call(session, "GET", "/api/v1/namespaces/default")
            first = connector._conns  # the one connection, kept alive
            await asyncio.sleep(1.0)  # idle for twice the header timeout
            code, _ = await _call(session, "GET", "/api/v1/namespaces/default")
            assert code == 200 and connector._conns.keys() == first.keys()
            started = time.monotonic()
            async with session.get("/api/v1/namespaces?watch=1") as response:
                await response.read()
            assert 1.0 <= time.monotonic() - started <= 3.0
    finally:
        await server.stop()


async def test_a_list_valued_finalizer_on_an_object_being_deleted_is_refused_not_a_crash(
    http: aiohttp.ClientSession,
) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    code, _ = await _call(
        http, "POST", path, json={"metadata": {"name": "held", "finalizers": ["example.com/x"]}}
    )
    assert code == 201
    code, _ = await _call(http, "DELETE", f"{path}/held")
    assert code == 200
    merge = {"Content-Type": "application/merge-patch+json"}
    code, body = await _call(
        http, "PATCH", f"{path}/held", data=json.dumps({"metadata": {"finalizers": [["x"]]}}), headers=merge
    )
    assert 400 <= code < 500, body
    code, _ = await _call(
        http, "PATCH", f"{path}/held", data=json.dumps({"metadata": {"finalizers": None}}), headers=merge
    )
    assert code == 200
    code, _ = await _call(http, "GET", f"{path}/held")
    assert code == 404


async def test_over_tls_a_handshake_or_headers_that_never_end_are_cut_off(tmp_path: Path) -> None:
    """The header deadline holds over HTTPS: for the TLS handshake, and for the headers after it."""
    state = tmp_path / "state"
    config = server_config(state, request_header_timeout=0.5, **tls_config(state, "tls"))
    server = ApiServer(config)
    await server.start()
    try:
        context = ssl.create_default_context(cafile=str(state / "ca.crt"))
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)  # never says hello
        started = time.monotonic()
        async with asyncio.timeout(5):
            assert await reader.read() == b""
        no_handshake = time.monotonic() - started
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=context)
        started = time.monotonic()
        writer.write(b"GET /version HTTP/1.1\r\nHost: localhost\r\n")
        async with asyncio.timeout(5):
            assert await reader.read() == b""
        no_blank_line = time.monotonic() - started
        writer.close()
        assert 0.5 <= no_handshake < 2.0 and no_blank_line < 2.0
    finally:
        await server.stop()


async def test_a_write_that_would_store_an_object_over_the_limit_is_a_413_and_stores_nothing(
    http: aiohttp.ClientSession,
) -> None:
    """Each request is under the 3 MiB body limit; the copies of the patch would make the object over 4 MB."""
    names = [f"{'n' * 60}-{i:06d}" for i in range(20_000)]  # 1.4 MB of resourceNames
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": names}
    path = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles"
    code, created = await _call(http, "POST", path, json={"metadata": {"name": "big"}, "rules": [rule]})
    assert code == 201
    grow = [{"op": "copy", "from": "/rules/0", "path": "/rules/-"}] * 2
    headers = {"Content-Type": "application/json-patch+json"}
    code, refused = await _call(http, "PATCH", f"{path}/big", data=json.dumps(grow), headers=headers)
    assert (code, refused["reason"]) == (413, "RequestEntityTooLarge"), refused
    assert "over the 3145728 this server stores" in refused["message"]
    code, stored = await _call(http, "GET", f"{path}/big")
    assert code == 200 and stored == created


async def test_a_namespace_held_by_another_finalizer_is_left_alone_until_finalize_releases_it(
    http: aiohttp.ClientSession,
) -> None:
    """Once the namespace is empty and its ``kubernetes`` finalizer gone, the cleaner writes it no more (it once
    rewrote such a namespace 1,500 times a second); a /finalize that drops the other finalizer lets it go."""
    path = "/api/v1/namespaces/held"
    assert (await _call(http, "POST", "/api/v1/namespaces", json={"metadata": {"name": "held"}}))[0] == 201
    hold = {"metadata": {"name": "held"}, "spec": {"finalizers": ["kubernetes", "example.com/hold"]}}
    assert (await _call(http, "PUT", f"{path}/finalize", json=hold))[0] == 200
    assert (await _call(http, "DELETE", path))[0] == 200
    events = await _namespace_events(http, "0", within=5, until=_only_held)
    assert events and _only_held(events[-1]), [e["object"]["spec"] for e in events]
    settled = events[-1]["object"]["metadata"]["resourceVersion"]
    later = await _namespace_events(http, settled, within=2)
    assert later == [], f"the cleaner kept writing a held namespace: {len(later)} events in 2 s"
    release = {"metadata": {"name": "held"}, "spec": {"finalizers": []}}
    assert (await _call(http, "PUT", f"{path}/finalize", json=release))[0] == 200
    gone = await _namespace_events(http, settled, within=5, until=lambda e: e["type"] == "DELETED")
    assert gone and gone[-1]["type"] == "DELETED"


def _only_held(event: dict[str, Any]) -> bool:
    return bool(event["object"].get("spec", {}).get("finalizers") == ["example.com/hold"])


async def _namespace_events(
    http: aiohttp.ClientSession, since: str, within: int, until: Any = None
) -> list[dict[str, Any]]:
    """The watch events of namespace ``held`` after ``since``, for ``within`` seconds or until one satisfies
    ``until``."""
    query = {"watch": "1", "resourceVersion": since, "timeoutSeconds": str(within)}
    query["fieldSelector"] = "metadata.name=held"
    events: list[dict[str, Any]] = []
    async with http.get("/api/v1/namespaces", params=query) as response:
        async for line in response.content:
            event = json.loads(line)
            if event["type"] == "BOOKMARK":
                continue
            events.append(event)
            if until is not None and until(event):
                break
    return events


async def test_orphaning_dependents_that_change_meanwhile_keeps_every_one(
    http: aiohttp.ClientSession,
) -> None:
    """Deleting with propagationPolicy=Orphan while the dependents are being written: a conflict on one of them
    is tried again, so every dependent loses its owner reference and stays (the collector once dropped the
    finalizer after a conflict and then deleted the dependents it had promised to keep)."""
    path = "/api/v1/namespaces/default/configmaps"
    code, owner = await _call(http, "POST", path, json={"metadata": {"name": "owner"}})
    assert code == 201
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    names = [f"dependent-{i}" for i in range(20)]
    for name in names:
        body = {"metadata": {"name": name, "ownerReferences": [ref]}, "data": {"n": "0"}}
        assert (await _call(http, "POST", path, json=body))[0] == 201
    writing = True

    async def keep_writing(name: str) -> int:
        writes = 0
        while writing:
            patch = {"data": {"n": str(writes)}}
            code, _ = await _call(
                http, "PATCH", f"{path}/{name}", json=patch,
                headers={"Content-Type": "application/merge-patch+json"},
            )  # fmt: skip
            assert code == 200
            writes += 1
        return writes

    writers = [asyncio.create_task(keep_writing(name)) for name in names]
    try:
        code, _ = await _call(http, "DELETE", f"{path}/owner", json={"propagationPolicy": "Orphan"})
        assert code == 200
        gone = await _watch(http, path, "owner", within=20, until=lambda e: e["type"] == "DELETED")
        assert gone and gone[-1]["type"] == "DELETED"
    finally:
        writing = False
        written = await asyncio.gather(*writers)
    assert sum(written) > 0
    for name in names:
        code, dependent = await _call(http, "GET", f"{path}/{name}")
        assert code == 200, f"{name} was deleted though its owner was deleted with Orphan"
        assert "ownerReferences" not in dependent["metadata"], dependent["metadata"]


async def _watch(
    http: aiohttp.ClientSession, path: str, name: str, within: int, until: Any
) -> list[dict[str, Any]]:
    """Watch events of one object until one satisfies ``until`` or ``within`` seconds pass."""
    query = {"watch": "1", "timeoutSeconds": str(within), "fieldSelector": f"metadata.name={name}"}
    events: list[dict[str, Any]] = []
    async with http.get(path, params=query) as response:
        async for line in response.content:
            events.append(json.loads(line))
            if until(events[-1]):
                break
    return events


async def test_a_request_that_reaches_a_stopping_server_is_not_taken_and_its_connection_closed(
    tmp_path: Path,
) -> None:
    """A server stopping takes no more requests, whichever connection they come on: the connection is closed
    unanswered, so the client tries again on a new one (which reaches whatever serves the address next), never a
    watch of the stopped store that no event will ever reach."""
    server = ApiServer(server_config(tmp_path / "state"))
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"GET /version HTTP/1.1\r\nHost: test\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        length = next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
        await reader.readexactly(int(length.split(b":")[1]))
        # The same kept-alive connection, as the server begins to stop.
        stopping = asyncio.create_task(server.stop())
        writer.write(b"GET /version HTTP/1.1\r\nHost: test\r\n\r\n")
        answer = await reader.read()  # to the end: the server closes the connection
        await stopping
    finally:
        writer.close()
    assert answer == b"", answer
