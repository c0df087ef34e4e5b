"""Server-side apply and managedFields over HTTP, as clients meet them: status codes, bodies, what gets stored."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from multiqueue.apiserver.server import ApiServer

APPLY = {"Content-Type": "application/apply-patch+yaml"}
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
MANIFEST = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: applied
  annotations: {when: 2026-01-01T00:00:00Z}
data:
  greeting: hello
"""


@pytest.fixture
async def http(apiserver: ApiServer) -> AsyncIterator[aiohttp.ClientSession]:
    headers = {"Authorization": f"Bearer {apiserver.config.token}", "User-Agent": "tester/1.0 (linux)"}
    async with aiohttp.ClientSession(apiserver.url, headers=headers) as session:
        yield session


async def _call(session: aiohttp.ClientSession, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
    async with session.request(method, path, **kwargs) as response:
        return response.status, json.loads(await response.text())


def _managers(body: Any) -> list[tuple[str, str]]:
    return [(e["manager"], e["operation"]) for e in body["metadata"].get("managedFields", [])]


async def test_apply_creates_then_conflicts_then_forces(http: aiohttp.ClientSession) -> None:
    code, body = await _call(
        http, "PATCH", f"{CONFIGMAPS}/applied?fieldManager=me", data=MANIFEST, headers=APPLY
    )
    assert code == 201
    assert body["metadata"]["annotations"] == {"when": "2026-01-01T00:00:00Z"}, "YAML timestamps stay strings"
    assert _managers(body) == [("me", "Apply")]
    changed = MANIFEST.replace("hello", "hi")
    code, body = await _call(
        http, "PATCH", f"{CONFIGMAPS}/applied?fieldManager=other", data=changed, headers=APPLY
    )
    assert (code, body["reason"]) == (409, "Conflict")
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "me": .data.greeting'
    path = f"{CONFIGMAPS}/applied?fieldManager=other&force=true"
    code, body = await _call(http, "PATCH", path, data=changed, headers=APPLY)
    assert (code, body["data"]) == (200, {"greeting": "hi"})
    assert sorted(_managers(body)) == [("me", "Apply"), ("other", "Apply")]


async def test_applying_the_same_again_writes_nothing(http: aiohttp.ClientSession) -> None:
    _, first = await _call(
        http, "PATCH", f"{CONFIGMAPS}/applied?fieldManager=me", data=MANIFEST, headers=APPLY
    )
    _, again = await _call(
        http, "PATCH", f"{CONFIGMAPS}/applied?fieldManager=me", data=MANIFEST, headers=APPLY
    )
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


async def test_dry_run_apply_creates_nothing(http: aiohttp.ClientSession) -> None:
    path = f"{CONFIGMAPS}/applied?fieldManager=me&dryRun=All"
    code, body = await _call(http, "PATCH", path, data=MANIFEST, headers=APPLY)
    assert code == 201 and "resourceVersion" not in body["metadata"]
    code, _ = await _call(http, "GET", f"{CONFIGMAPS}/applied")
    assert code == 404


@pytest.mark.parametrize(
    ("path", "body", "code", "message"),
    [
        pytest.param(f"{CONFIGMAPS}/applied", MANIFEST, 422,
                     'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
                     id="no-field-manager"),
        pytest.param(f"{CONFIGMAPS}/other?fieldManager=me", MANIFEST, 400,
                     "the name of the object (applied) does not match the name on the URL (other)", id="other-name"),
        pytest.param("/apis/batch/v1/namespaces/default/jobs/none/status?fieldManager=me",
                     "apiVersion: batch/v1\nkind: Job\nmetadata: {name: none}\nstatus: {active: 1}\n", 404,
                     'jobs.batch "none" not found', id="status-of-nothing"),
        pytest.param(f"{CONFIGMAPS}/applied?fieldManager=me", "data: [", 400, None, id="not-yaml"),
    ],
)  # fmt: skip
async def test_apply_refusals(
    http: aiohttp.ClientSession, path: str, body: str, code: int, message: str | None
) -> None:
    got, answer = await _call(http, "PATCH", path, data=body, headers=APPLY)
    assert got == code and answer["kind"] == "Status"
    if message is not None:
        assert answer["message"] == message


async def test_every_write_records_its_manager(http: aiohttp.ClientSession) -> None:
    code, body = await _call(
        http, "POST", CONFIGMAPS, json={"metadata": {"name": "written"}, "data": {"a": "b"}}
    )
    assert code == 201 and _managers(body) == [("tester", "Update")]
    path = f"{CONFIGMAPS}/written?fieldManager=editor"
    merge = {"Content-Type": "application/merge-patch+json"}
    code, body = await _call(http, "PATCH", path, data=json.dumps({"data": {"c": "d"}}), headers=merge)
    assert code == 200 and sorted(_managers(body)) == [("editor", "Update"), ("tester", "Update")]
    code, body = await _call(http, "PATCH", f"{path}&force=true", data="{}", headers=merge)
    assert code == 422 and body["details"]["causes"][0]["field"] == "force"


async def test_field_validation_on_apply(http: aiohttp.ClientSession) -> None:
    repeated = MANIFEST.replace("  greeting: hello\n", "  greeting: hello\n  greeting: again\n")
    path = f"{CONFIGMAPS}/applied?fieldManager=me&fieldValidation="
    code, body = await _call(http, "PATCH", path + "Strict", data=repeated, headers=APPLY)
    assert (code, body["reason"]) == (400, "BadRequest")
    async with http.patch(path + "Warn", data=repeated, headers=APPLY) as response:
        assert response.status == 201
        assert response.headers.getall("Warning") == ['299 - "line 8: key \\"greeting\\" already set in map"']
        assert (await response.json())["data"] == {"greeting": "again"}
    code, body = await _call(http, "PATCH", path + "Sometimes", data=repeated, headers=APPLY)
    assert (code, body["details"]["causes"][0]["field"]) == (422, "fieldValidation")
