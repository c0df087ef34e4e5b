"""Core v1 Events: Go's zero values, and the legacy validation kube-apiserver applies to them."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.api.types import Obj
from multiqueue.apiserver.rules import events


def _event(namespace: str = "ns", name: str = "e", **fields: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": namespace}, **fields}


def test_defaults_are_gos_zero_values() -> None:
    event = _event(involvedObject={"kind": "Pod", "name": "p", "namespace": "", "uid": ""})
    events.default_event(event)
    assert event == _event(
        involvedObject={"kind": "Pod", "name": "p"},
        source={},
        eventTime=None,
        firstTimestamp=None,
        lastTimestamp=None,
        reportingComponent="",
        reportingInstance="",
    )


NEW_STYLE = {"eventTime": "2026-01-01T00:00:00.000000Z"}


@pytest.mark.parametrize(
    ("event", "messages"),
    [
        pytest.param(_event(involvedObject={"namespace": "ns"}), [], id="matching-namespace"),
        pytest.param(_event("default", involvedObject={}), [], id="default-namespace-may-omit-it"),
        pytest.param(
            _event(involvedObject={"namespace": "other"}),
            ['involvedObject.namespace: Invalid value: "other": does not match event.namespace'],
            id="other-namespace",
        ),
        pytest.param(
            _event(involvedObject={}),
            ['involvedObject.namespace: Invalid value: "": does not match event.namespace'],
            id="missing-namespace",
        ),
        pytest.param(
            _event("Not_A_Name", involvedObject={"namespace": "Not_A_Name"}),
            [
                'metadata.namespace: Invalid value: "Not_A_Name": a lowercase RFC 1123 label must consist of lower '
                "case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. "
                "'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ],
            id="metadata-checked-last",
        ),
        pytest.param(
            _event(name="Not_A_Name", involvedObject={"namespace": "ns"}), [], id="any-url-safe-name"
        ),
        pytest.param(
            _event(name="a%b", involvedObject={"namespace": "ns"}),
            ["metadata.name: Invalid value: \"a%b\": may not contain '%'"],
            id="name-is-a-url-segment",
        ),
        pytest.param(
            _event(involvedObject={}, **NEW_STYLE),
            [
                'involvedObject.namespace: Invalid value: "": does not match event.namespace',
                "reportingComponent: Required value",
                'reportingComponent: Invalid value: "": name part must be non-empty',
                "reportingComponent: Invalid value: \"\": name part must consist of alphanumeric characters, '-', "
                "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
                "or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "reportingInstance: Required value",
                "action: Required value",
                "reason: Required value",
            ],
            id="new-style-needs-reporter",
        ),
        pytest.param(
            _event(
                involvedObject={"namespace": "ns"},
                reportingComponent="c",
                reportingInstance="i",
                action="a",
                reason="r" * 129,
                **NEW_STYLE,
            ),
            ['reason: Invalid value: "": can have at most 128 characters'],
            id="new-style-limits",
        ),
    ],
)
def test_validate_event(event: Obj, messages: list[str]) -> None:
    assert [e.message() for e in events.validate_event(event)] == messages
