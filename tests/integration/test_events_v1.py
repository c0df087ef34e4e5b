"""events.k8s.io/v1 on the local API server: what client-go's events recorder (controller-runtime's, the JobSet
controller's) sends lands in the one Event storage, and reads back through core v1, kubectl's tables and discovery."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import aiohttp

from multiqueue.apiserver.protowire import len_field, string_field, varint_field
from tests.integration.test_apiserver_http import PROTOBUF, protobuf_body

V1 = "/apis/events.k8s.io/v1/namespaces/default/events"
CORE = "/api/v1/namespaces/default/events"
NAME = "sweep.18ec3701d1769bcf"
WHEN = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}


async def _call(session: aiohttp.ClientSession, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
    async with session.request(method, path, **kwargs) as response:
        return response.status, await response.json(content_type=None)


def recorded_event() -> bytes:
    """An Event as the recorder sends it: metadata 1, eventTime 2 (seconds 1, nanos 2), reportingController 4,
    reportingInstance 5, action 6, reason 7, regarding 8 (kind 1, namespace 2, name 3), note 10, type 11."""
    meta = string_field(1, NAME) + string_field(3, "default")
    when = varint_field(1, int(WHEN.timestamp())) + varint_field(2, WHEN.microsecond * 1000)
    regarding = string_field(1, "JobSet") + string_field(2, "default") + string_field(3, "sweep")
    raw = (
        len_field(1, meta)
        + len_field(2, when)
        + string_field(4, "jobset")
        + string_field(5, "jobset-controller-1")
        + string_field(6, "Create")
        + string_field(7, "SuccessfulCreate")
        + len_field(8, regarding)
        + string_field(10, "created Job sweep-workers-0")
        + string_field(11, "Normal")
    )
    return protobuf_body("events.k8s.io/v1", "Event", raw)


async def test_a_recorded_event_reads_back_through_both_groups(http: aiohttp.ClientSession) -> None:
    code, created = await _call(http, "POST", V1, data=recorded_event(), headers=PROTOBUF)
    assert code == 201, created
    assert (created["apiVersion"], created["eventTime"], created["note"]) == (
        "events.k8s.io/v1",
        "2026-01-02T03:04:05.123456Z",
        "created Job sweep-workers-0",
    )

    code, core = await _call(http, "GET", f"{CORE}/{NAME}")
    assert code == 200, core
    assert core["apiVersion"] == "v1"
    assert (core["message"], core["reportingComponent"], core["involvedObject"]["name"]) == (
        "created Job sweep-workers-0",
        "jobset",
        "sweep",
    )
    assert core["source"] == {} and "note" not in core and "regarding" not in core

    # A repeat: the recorder patches the series (a strategic merge patch) and core readers see it.
    series = {"count": 2, "lastObservedTime": "2026-01-02T03:09:05.654321Z"}
    code, patched = await _call(
        http,
        "PATCH",
        f"{V1}/{NAME}",
        json={"series": series},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert code == 200, patched
    code, core = await _call(http, "GET", f"{CORE}/{NAME}")
    assert core["series"] == series

    code, listed = await _call(http, "GET", V1, params={"fieldSelector": "regarding.name=sweep"})
    assert [e["metadata"]["name"] for e in listed["items"]] == [NAME]
    code, listed = await _call(http, "GET", CORE, params={"fieldSelector": "source=jobset"})
    assert [e["metadata"]["name"] for e in listed["items"]] == [NAME]
    code, refused = await _call(http, "GET", V1, params={"fieldSelector": "involvedObject.name=sweep"})
    assert (code, refused["message"]) == (400, "field label not supported: involvedObject.name")


async def test_events_written_through_core_show_under_events_k8s_io(http: aiohttp.ClientSession) -> None:
    legacy = {
        "metadata": {"name": "legacy"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Started",
        "message": "started",
        "source": {"component": "kubelet"},
        "count": 3,
        "type": "Warning",
    }
    code, created = await _call(http, "POST", CORE, json=legacy)
    assert code == 201, created
    code, event = await _call(http, "GET", f"{V1}/legacy")
    assert code == 200, event
    assert (
        event["note"],
        event["regarding"]["name"],
        event["deprecatedSource"],
        event["deprecatedCount"],
    ) == (
        "started",
        "p",
        {"component": "kubelet"},
        3,
    )
    code, table = await _call(http, "GET", V1, headers=TABLE)
    assert code == 200, table
    columns = [c["name"] for c in table["columnDefinitions"]]
    row = dict(zip(columns, table["rows"][0]["cells"], strict=True))
    assert (row["Type"], row["Reason"], row["Object"], row["Message"]) == (
        "Warning",
        "Started",
        "pod/p",
        "started",
    )


async def test_the_newer_api_refuses_what_the_recorder_would_never_send(http: aiohttp.ClientSession) -> None:
    code, refused = await _call(http, "POST", V1, json={"metadata": {"name": "bare"}, "note": "n"})
    assert code == 422
    assert refused["details"]["kind"] == "Event" and "group" not in refused["details"]
    assert [c["field"] for c in refused["details"]["causes"]] == ["eventTime", "type"]


async def test_discovery_lists_the_group(http: aiohttp.ClientSession) -> None:
    code, resources = await _call(http, "GET", "/apis/events.k8s.io/v1")
    assert code == 200, resources
    (events,) = resources["resources"]
    assert (events["name"], events["kind"], events["namespaced"]) == ("events", "Event", True)
    code, groups = await _call(http, "GET", "/apis")
    assert "events.k8s.io" in [g["name"] for g in groups["groups"]]
