"""The Eviction API's rules: which bodies kube-apiserver refuses (messages as 1.37.2 answers them), the
deleteOptions the pod is deleted with, and the DisruptionTarget condition the pod gets first."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from multiqueue.api import evictions

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _eviction(name: str = "p", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}, **extra}


BODIES: dict[str, tuple[Any, str | None]] = {
    "policy-v1": (_eviction(), None),
    "policy-v1beta1": ({**_eviction(), "apiVersion": "policy/v1beta1"}, None),
    "no-type-meta": ({"metadata": {"name": "p"}}, None),
    "same-namespace": (_eviction(metadata={"name": "p", "namespace": "ns"}), None),
    "other-name": (_eviction("q"), "name in URL does not match name in Eviction object"),
    "no-name": (
        {"apiVersion": "policy/v1", "kind": "Eviction"},
        "name in URL does not match name in Eviction object",
    ),
    "other-namespace": (
        _eviction(metadata={"name": "p", "namespace": "other"}),
        "the namespace of the provided object does not match the namespace sent on the request",
    ),
    "other-kind": (
        {**_eviction(), "kind": "Pod"},
        'Pod in version "v1" cannot be handled as a Eviction: no kind "Pod" is registered for version '
        '"policy/v1" in scheme "pkg/runtime/scheme.go:111"',
    ),
    "not-an-object": ([], "the object provided is unrecognized (must be of type Eviction)"),
}


@pytest.mark.parametrize(("body", "problem"), [pytest.param(*c, id=n) for n, c in BODIES.items()])
def test_body_problem(body: Any, problem: str | None) -> None:
    assert evictions.body_problem(body, "p", "ns") == problem


OPTIONS: dict[str, tuple[dict[str, Any], bool, dict[str, Any]]] = {
    "none": (_eviction(), False, {}),
    "given": (_eviction(deleteOptions={"gracePeriodSeconds": 0}), False, {"gracePeriodSeconds": 0}),
    "request-dry-run": (_eviction(), True, {"dryRun": ["All"]}),
    "body-dry-run": (_eviction(deleteOptions={"dryRun": ["All"]}), False, {"dryRun": ["All"]}),
}


@pytest.mark.parametrize(("body", "dry_run", "options"), [pytest.param(*c, id=n) for n, c in OPTIONS.items()])
def test_delete_options(body: dict[str, Any], dry_run: bool, options: dict[str, Any]) -> None:
    assert evictions.delete_options(body, dry_run) == options
    assert evictions.is_dry_run(options) == ("dryRun" in options)


def _pod(*conditions: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "status": {"phase": "Running", "conditions": list(conditions)}}


READY = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
MARKED = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "EvictionByEvictionAPI",
    "message": "Eviction API: evicting",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}
PREEMPTED = {**MARKED, "reason": "PreemptionByScheduler", "message": "preempted"}
NOT_TARGET = {**MARKED, "status": "False"}

MARKS: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "unmarked": (_pod(READY), {**MARKED, "lastTransitionTime": "2026-01-02T03:04:05Z"}),
    "no-status": ({"metadata": {"name": "p"}}, {**MARKED, "lastTransitionTime": "2026-01-02T03:04:05Z"}),
    "already-marked": (_pod(READY, MARKED), None),
    "other-reason-keeps-its-time": (_pod(PREEMPTED), MARKED),
    "false-flips": (_pod(NOT_TARGET), {**MARKED, "lastTransitionTime": "2026-01-02T03:04:05Z"}),
}


@pytest.mark.parametrize(("pod", "condition"), [pytest.param(*c, id=n) for n, c in MARKS.items()])
def test_marked(pod: dict[str, Any], condition: dict[str, Any] | None) -> None:
    result = evictions.marked(pod, NOW)
    if condition is None:
        assert result is None
        return
    assert result is not None
    found = [c for c in result["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert found == [condition]
    assert result["status"].get("phase") == pod.get("status", {}).get("phase")
    assert pod != result  # the pod given is left as it was
