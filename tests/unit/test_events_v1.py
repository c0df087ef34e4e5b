"""events.k8s.io/v1 Events over the core v1 Event storage: the field mapping both ways, and the stricter checks of
writes through the newer API."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.api.types import Obj
from multiqueue.apiserver.rules import eventsv1

TIME = "2026-01-02T03:04:05.123456Z"
REGARDING = {"kind": "JobSet", "name": "sweep", "namespace": "ns", "apiVersion": "jobset.x-k8s.io/v1alpha2"}


def _v1(**fields: Any) -> Obj:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e", "namespace": "ns"},
        **fields,
    }


def _core(**fields: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "ns"}, **fields}


RECORDED = _v1(
    eventTime=TIME,
    reportingController="jobset",
    reportingInstance="jobset-1",
    action="Create",
    reason="SuccessfulCreate",
    note="created Job sweep-workers-0",
    type="Normal",
    regarding=REGARDING,
    deprecatedSource={},
    deprecatedFirstTimestamp=None,
    deprecatedLastTimestamp=None,
)
RECORDED_AS_CORE = _core(
    eventTime=TIME,
    reportingComponent="jobset",
    reportingInstance="jobset-1",
    action="Create",
    reason="SuccessfulCreate",
    message="created Job sweep-workers-0",
    type="Normal",
    involvedObject=REGARDING,
    source={},
    firstTimestamp=None,
    lastTimestamp=None,
)
LEGACY = _core(
    involvedObject=REGARDING,
    reason="Started",
    message="written through the core API",
    type="Warning",
    source={"component": "kubelet", "host": "node-1"},
    count=3,
    firstTimestamp="2026-01-02T03:04:05Z",
    lastTimestamp="2026-01-02T03:14:05Z",
    eventTime=None,
    reportingComponent="",
    reportingInstance="",
)
LEGACY_AS_V1 = _v1(
    regarding=REGARDING,
    reason="Started",
    note="written through the core API",
    type="Warning",
    deprecatedSource={"component": "kubelet", "host": "node-1"},
    deprecatedCount=3,
    deprecatedFirstTimestamp="2026-01-02T03:04:05Z",
    deprecatedLastTimestamp="2026-01-02T03:14:05Z",
    eventTime=None,
)
SERIES = {"count": 2, "lastObservedTime": "2026-01-02T03:09:05.654321Z"}


@pytest.mark.parametrize(
    ("v1", "core"),
    [
        pytest.param(RECORDED, RECORDED_AS_CORE, id="recorded-through-events-k8s-io"),
        pytest.param(LEGACY_AS_V1, LEGACY, id="written-through-core"),
        pytest.param({**RECORDED, "series": SERIES}, {**RECORDED_AS_CORE, "series": SERIES}, id="series"),
        pytest.param(
            {**RECORDED, "related": {"kind": "Job", "name": "sweep-workers-0"}},
            {**RECORDED_AS_CORE, "related": {"kind": "Job", "name": "sweep-workers-0"}},
            id="related",
        ),
    ],
)
def test_one_event_reads_the_same_through_both_groups(v1: Obj, core: Obj) -> None:
    assert eventsv1.to_core(v1) == core
    assert eventsv1.from_core(core) == v1
    assert eventsv1.from_core(eventsv1.to_core(v1)) == v1


def test_each_group_writes_its_own_zero_values() -> None:
    bare_v1 = _v1()
    eventsv1.default_event(bare_v1)
    assert bare_v1 == _v1(
        eventTime=None,
        regarding={},
        deprecatedSource={},
        deprecatedFirstTimestamp=None,
        deprecatedLastTimestamp=None,
    )
    assert eventsv1.to_core(bare_v1) == _core(
        eventTime=None,
        involvedObject={},
        source={},
        firstTimestamp=None,
        lastTimestamp=None,
        reportingComponent="",
        reportingInstance="",
    )


def _messages(errs: list[Any]) -> list[str]:
    return [e.message() for e in errs]


@pytest.mark.parametrize(
    ("event", "messages"),
    [
        pytest.param(RECORDED, [], id="recorded"),
        pytest.param(
            _v1(regarding=REGARDING, note="n"),
            ["eventTime: Required value", 'type: Invalid value: "": has invalid value: '],
            id="old-style-is-not-enough",
        ),
        pytest.param(
            {**RECORDED, "reportingController": "", "action": "", "reason": ""},
            [
                "reportingController: Required value",
                'reportingController: Invalid value: "": name part must be non-empty',
                'reportingController: Invalid value: "": name part must consist of alphanumeric characters, '
                "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
                "'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "action: Required value",
                "reason: Required value",
            ],
            id="new-style-needs-who-and-what",
        ),
        pytest.param(
            {
                **RECORDED,
                "deprecatedCount": 2,
                "deprecatedSource": {"component": "x"},
                "deprecatedFirstTimestamp": TIME,
                "deprecatedLastTimestamp": TIME,
            },
            [
                'firstTimestamp: Invalid value: "": needs to be unset',
                'lastTimestamp: Invalid value: "": needs to be unset',
                'count: Invalid value: "": needs to be unset',
                'source: Invalid value: "": needs to be unset',
            ],
            id="deprecated-fields-stay-unset",
        ),
        pytest.param(
            {**RECORDED, "series": {"count": 1}},
            [
                'series.count: Invalid value: "": should be at least 2',
                "series.lastObservedTime: Required value",
            ],
            id="series",
        ),
        pytest.param(
            {**RECORDED, "note": "n" * 1025},
            ['message: Invalid value: "": can have at most 1024 characters'],
            id="long-note-named-as-core",
        ),
        pytest.param(
            {**RECORDED, "metadata": {"name": "Not_A_Name", "namespace": "ns"}},
            [
                'metadata.name: Invalid value: "Not_A_Name": a lowercase RFC 1123 subdomain must consist of lower '
                "case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
                "(e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ],
            id="names-are-dns-subdomains",
        ),
    ],
)
def test_validate_create(event: Obj, messages: list[str]) -> None:
    assert _messages(eventsv1.validate_create(event)) == messages


@pytest.mark.parametrize(
    ("change", "messages"),
    [
        pytest.param({"series": SERIES}, [], id="a-series-may-start"),
        pytest.param({"metadata": {"name": "e", "namespace": "ns", "labels": {"a": "b"}}}, [], id="labels"),
        pytest.param(
            {"note": "changed", "action": "Delete"},
            [
                'message: Invalid value: "changed": field is immutable',
                'action: Invalid value: "Delete": field is immutable',
            ],
            id="note-and-action",
        ),
        pytest.param(
            {"reason": "Other"},
            [
                'reason: Invalid value: "Other": field is immutable',
                'reason: Invalid value: "Other": field is immutable',
            ],
            id="reason-checked-twice-as-upstream",
        ),
        pytest.param(
            {"regarding": {**REGARDING, "name": "other"}},
            [
                'involvedObject: Invalid value: {"Kind":"JobSet","Namespace":"ns","Name":"other","UID":"",'
                '"APIVersion":"jobset.x-k8s.io/v1alpha2","ResourceVersion":"","FieldPath":""}: field is immutable'
            ],
            id="regarding-printed-as-gos-internal-struct",
        ),
        pytest.param({"eventTime": "2026-01-02T03:04:05.123456Z"}, [], id="same-time"),
    ],
)
def test_validate_update(change: Obj, messages: list[str]) -> None:
    assert _messages(eventsv1.validate_update({**RECORDED, **change}, RECORDED)) == messages
