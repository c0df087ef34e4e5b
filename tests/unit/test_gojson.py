"""Objects of built-in kinds keep only what Go's encoding/json would write back after decoding them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from multiqueue.apiserver.gojson import omit_empty

POD_SPEC: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}


@pytest.mark.parametrize(
    ("api_version", "kind", "sent", "kept"),
    [
        pytest.param("v1", "ConfigMap", {"data": {}}, {}, id="empty-map-omitempty"),
        pytest.param("v1", "ConfigMap", {"data": None, "binaryData": None}, {}, id="null-map"),
        pytest.param("v1", "ConfigMap", {"data": {"a": ""}}, {"data": {"a": ""}}, id="map-entries-stay"),
        pytest.param(
            "v1",
            "Pod",
            {"spec": {**POD_SPEC, "hostNetwork": False, "volumes": []}},
            {"spec": POD_SPEC},
            id="false-and-empty-list-in-a-struct",
        ),
        pytest.param(
            "v1",
            "Pod",
            {"spec": {"containers": [{"name": "c", "env": [], "args": []}]}},
            {"spec": {"containers": [{"name": "c"}]}},
            id="list-items-are-trimmed",
        ),
        pytest.param(
            "batch/v1",
            "Job",
            {"spec": {"suspend": False, "parallelism": 0}, "status": {"active": 0}},
            {"spec": {"suspend": False, "parallelism": 0}, "status": {}},
            id="pointers-keep-zero-and-structs-stay",
        ),
        pytest.param(
            "v1",
            "ConfigMap",
            {"metadata": {"name": "x", "labels": {}, "annotations": None}},
            {"metadata": {"name": "x"}},
            id="inlined-and-nested-metadata",
        ),
        pytest.param(
            "v1",
            "Event",
            {"eventTime": None, "firstTimestamp": None, "series": None},
            {"eventTime": None, "firstTimestamp": None},
            id="null-times-are-structs-a-null-pointer-goes",
        ),
        pytest.param(
            "example.com/v1",
            "Widget",
            {"spec": {"list": []}},
            {"spec": {"list": []}},
            id="custom-kinds-untouched",
        ),
    ],
)
def test_omitempty_fields_go_as_go_writes_them(
    api_version: str, kind: str, sent: dict[str, Any], kept: dict[str, Any]
) -> None:
    obj = copy.deepcopy(sent)
    omit_empty(api_version, kind, obj)
    assert obj == kept
