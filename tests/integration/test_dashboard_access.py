"""The dashboard of a real ``multiqueue local up``: the URL it prints opens it, nothing else does, its stream
follows a Job from submission to Complete on a worker, and it explains a waiting Job as ``multiqueue explain``
does.

Every answer without the token or the session cookie it trades for is 401, whatever the path: the page, its
scripts, the stream, a Job's Events, logs and placement explanation.
"""

from __future__ import annotations

import asyncio
import re
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml
from yarl import URL

from multiqueue.api.types import JOBS
from multiqueue.dashboard.server import COOKIE
from multiqueue.dispatch.config import ManagerConfig
from tests.support.docblocks import yaml_block
from tests.support.localup import LocalUp, clusters_config

DASHBOARD_LINE = r"dashboard: (?P<url>http://127\.0\.0\.1:\d+/\?token=(?P<token>[\w-]+))"
PATHS = [
    "/",
    "/static/app.js",
    "/api/snapshot",
    "/api/stream",
    "/api/events?uid=x&namespace=default",
    "/api/logs",
    "/api/explain?namespace=default&name=x",
]


@pytest.fixture
async def local_up(tmp_path: Path) -> AsyncIterator[tuple[LocalUp, re.Match[str]]]:
    config = clusters_config("management", "worker-1", manager_workers=["worker-1"])
    config["clusters"][0]["kubelet"] = "none"
    up = LocalUp(tmp_path, config)
    try:
        await up.start()
        printed = await up.process.wait_for_line(DASHBOARD_LINE, within=5)
        yield up, printed
    finally:
        await up.close()


async def stream_events(response: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, Any]]:
    """(event, data) of a server-sent event stream."""
    kind, data = "", b""
    async for raw in response.content:
        line = raw.rstrip(b"\n")
        if line.startswith(b"event: "):
            kind = line[7:].decode()
        elif line.startswith(b"data: "):
            data = line[6:]
        elif not line and kind:
            yield kind, orjson.loads(data)
            kind, data = "", b""


async def test_only_the_printed_url_opens_the_dashboard(local_up: tuple[LocalUp, re.Match[str]]) -> None:
    _, printed = local_up
    url = URL(printed["url"])
    base = url.with_query(None)
    async with aiohttp.ClientSession() as anonymous:
        for path in PATHS:
            async with anonymous.get(base.join(URL(path)), allow_redirects=False) as answer:
                assert answer.status == 401, path
                assert "the URL the manager printed" in await answer.text()
        async with anonymous.get(base.with_query(token="not-the-token"), allow_redirects=False) as answer:
            assert answer.status == 401
            assert COOKIE not in answer.cookies
        async with anonymous.get(
            base.join(URL("/api/snapshot")), headers={"Authorization": "Bearer not-the-token"}
        ) as answer:
            assert answer.status == 401

    # A cookie jar that, like a browser's, keeps cookies of an IP address (aiohttp's refuses them by default).
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as browser:
        async with browser.get(url, allow_redirects=False) as answer:
            assert answer.status == 303
            assert answer.headers["Location"] == "/"  # the token leaves the address bar
            cookie = answer.cookies[COOKIE]
            assert cookie["httponly"] and cookie["samesite"] == "Strict"
        async with browser.get(base) as answer:
            assert answer.status == 200
            assert "<title>multiqueue</title>" in await answer.text()
        async with browser.get(base.join(URL("/api/snapshot"))) as answer:
            snapshot = await answer.json()
        assert [w["name"] for w in snapshot["workers"]] == ["worker-1"]
        assert snapshot["manager"]["managedBy"] == "multiqueue.dev/dispatcher"

    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {printed['token']}"}) as script:
        async with script.get(base.join(URL("/api/snapshot"))) as answer:
            assert answer.status == 200
        # Asked about what is not there: an answer that says so, not a stream that never ends.
        async with script.get(base.join(URL("/api/logs?namespace=default&name=nothing"))) as answer:
            assert answer.status == 404
            assert await answer.text() == 'job "default/nothing" not found on the management cluster\n'
        async with script.get(base.join(URL("/api/events?namespace=default"))) as answer:
            assert answer.status == 400
            assert (await answer.json())["message"] == "uid and namespace are required"


async def test_the_stream_follows_a_job_to_complete(local_up: tuple[LocalUp, re.Match[str]]) -> None:
    up, printed = local_up
    base = URL(printed["url"]).with_query(None)
    management = await up.connect("management")
    headers = {"Authorization": f"Bearer {printed['token']}"}
    try:
        async with (
            aiohttp.ClientSession(headers=headers) as session,
            session.get(base.join(URL("/api/stream"))) as stream,
        ):
            assert stream.headers["Content-Type"] == "text/event-stream"
            events = stream_events(stream)
            kind, snapshot = await anext(events)
            assert kind == "snapshot" and snapshot["jobs"] == []
            await management.create(
                JOBS,
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {"name": "seen"},
                    "spec": {
                        "managedBy": "multiqueue.dev/dispatcher",
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
                            }
                        },
                    },
                },
                "default",
            )
            states = []
            async with asyncio.timeout(60):
                async for kind, data in events:
                    assert kind == "changes"
                    for job in data.get("jobs", []):
                        states.append((job["state"], job["worker"]))
                    if states and states[-1][0] == "Complete":
                        break
            assert states[-1] == ("Complete", "worker-1")
            # Never shown as placed before it was: every line naming a worker names worker-1.
            assert {w for _, w in states} <= {"", "worker-1"}
    finally:
        await management.close()


def test_the_documented_config_turns_the_dashboard_on() -> None:
    required = {"management": {}, "workers": [{"name": "w", "kubeconfig": "w.kubeconfig"}]}
    loaded = yaml.safe_load(yaml_block("docs/dashboard.md", "## Opening it"))
    config = ManagerConfig.model_validate({**required, **loaded})
    assert config.dashboard.enabled and config.dashboard.address == "127.0.0.1:8081"
    assert not ManagerConfig.model_validate(required).dashboard.enabled, "off unless asked"


async def test_a_taken_dashboard_port_is_one_line_naming_the_setting_and_exit_2(
    local_up: tuple[LocalUp, re.Match[str]],
) -> None:
    up, _ = local_up
    config = yaml.safe_load((up.state_dir / "manager.yaml").read_text())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        config["dashboard"] = {"enabled": True, "address": address}
        config["name"] = "another"  # a manager of its own: the Jobs of local up's manager stay its own
        config["metricsAddress"] = "127.0.0.1:0"
        (up.workdir / "manager.yaml").write_text(yaml.safe_dump(config))
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "multiqueue", "manager", "--config", str(up.workdir / "manager.yaml"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(60):
            _, err = await process.communicate()
    assert process.returncode == 2, err.decode()
    (line,) = [x for x in err.decode().strip().splitlines() if not x.startswith("{") and " INFO " not in x]
    assert (
        f"cannot serve the dashboard on {address}" in line and "choose another dashboard.address" in line
    ), line


def job_body(name: str, managed: bool = True, pin: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"multiqueue.dev/requested-cluster": pin} if pin else {}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
                }
            },
        },
    }
    if managed:
        body["spec"]["managedBy"] = "multiqueue.dev/dispatcher"
    return body


async def test_a_waiting_job_is_explained_as_explain_prints_it(
    local_up: tuple[LocalUp, re.Match[str]],
) -> None:
    """The panel's table comes from ``/api/explain``: the document ``multiqueue explain -o json`` prints, from the
    manager's own state; what it cannot explain is a one-line answer saying why."""
    up, printed = local_up
    base = URL(printed["url"]).with_query(None)
    management = await up.connect("management")
    headers = {"Authorization": f"Bearer {printed['token']}"}

    def explain(query: str) -> URL:
        return base.join(URL(f"/api/explain?{query}"))

    try:
        async with (
            aiohttp.ClientSession(headers=headers) as session,
            session.get(base.join(URL("/api/stream"))) as stream,
        ):
            events = stream_events(stream)
            kind, _ = await anext(events)
            assert kind == "snapshot"
            await management.create(JOBS, job_body("pinned", pin="worker-9"), "default")
            await management.create(JOBS, job_body("not-ours", managed=False), "default")
            async with asyncio.timeout(60):
                async for _, data in events:
                    if any(j["name"] == "pinned" and j["reason"] for j in data.get("jobs", [])):
                        break
            async with session.get(explain("namespace=default&name=pinned")) as answer:
                assert answer.status == 200
                shown = await answer.json()
            for query, status, text in [
                (
                    "namespace=default&name=nothing",
                    404,
                    'job "default/nothing" not found on the management cluster',
                ),
                (
                    "namespace=default&name=not-ours",
                    404,
                    'job "default/not-ours" is not dispatched by this manager: its spec.managedBy is not'
                    " multiqueue.dev/dispatcher",
                ),
                ("namespace=default", 400, "name and namespace are required"),
                ("kind=nosuch&namespace=default&name=pinned", 400, 'no kind named "nosuch"'),
            ]:
                async with session.get(explain(query)) as answer:
                    assert answer.status == status, query
                    body = await answer.text()
                    assert body.startswith(text) and body.count("\n") == 1, body
    finally:
        await management.close()

    assert (shown["key"], shown["state"], shown["pinned"], shown["reason"]) == (
        "default/pinned",
        "Waiting",
        "worker-9",
        "NoWorker",
    )
    (worker,) = shown["workers"]
    assert worker["name"] == "worker-1" and not worker["passes"] and not worker["chosen"]
    assert [(v["filter"], v["reason"]) for v in worker["verdicts"] if not v["passes"]] == [
        ("Pinned", "NotPinned")
    ]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "multiqueue", "explain", "pinned", "--config", str(up.state_dir / "manager.yaml"),
        "-o", "json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert orjson.loads(out) == shown, "the dashboard serves what explain -o json prints"
