"""kubectl's columns and cells, computed server-side; upstream's HumanDuration."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from multiqueue.local.apiserver.resources import BUILTIN
from multiqueue.local.apiserver.tables import human_duration, pod_status, table

NOW = datetime(2026, 1, 10, tzinfo=UTC)
TYPES = {t.key: t for t in BUILTIN}


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (130, "2m10s"), (600, "10m"),
        (179 * 60, "179m"), (3 * 3600, "3h"), (3 * 3600 + 60, "3h1m"), (8 * 3600, "8h"), (47 * 3600, "47h"),
        (48 * 3600, "2d"), (50 * 3600, "2d2h"), (8 * 86400, "8d"), (800 * 86400, "2y70d"), (3 * 365 * 86400, "3y"),
        (9 * 365 * 86400, "9y"),
    ],
)  # fmt: skip
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def _job(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "pi", "creationTimestamp": "2026-01-09T23:00:00Z"},
        "spec": {
            "completions": 5,
            "parallelism": 2,
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
        "status": status,
    }


@pytest.mark.parametrize(
    ("status", "cells"),
    [
        pytest.param({}, ["pi", "Running", "0/5", "", "60m"], id="new"),
        pytest.param(
            {"succeeded": 5, "startTime": "2026-01-09T23:00:00Z", "completionTime": "2026-01-09T23:03:10Z",
             "conditions": [{"type": "Complete", "status": "True"}]},
            ["pi", "Complete", "5/5", "3m10s", "60m"],
            id="complete",
        ),
        pytest.param({"conditions": [{"type": "Suspended", "status": "True"}]}, ["pi", "Suspended", "0/5", "", "60m"], id="suspended"),
        pytest.param(
            {"startTime": "2026-01-09T23:30:00Z", "conditions": [{"type": "FailureTarget", "status": "True"}]},
            ["pi", "FailureTarget", "0/5", "30m", "60m"],
            id="failure-target",
        ),
    ],
)  # fmt: skip
def test_job_rows(status: dict[str, Any], cells: list[str]) -> None:
    result = table(TYPES["batch/jobs"], [_job(**status)], NOW)
    assert [c["name"] for c in result["columnDefinitions"] if c["priority"] == 0] == [
        "Name", "Status", "Completions", "Duration", "Age",
    ]  # fmt: skip
    assert result["rows"][0]["cells"][:5] == cells
    assert result["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def _pod(phase: str, containers: list[dict[str, Any]], deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-10T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": phase, "containerStatuses": containers},
    }


@pytest.mark.parametrize(
    ("pod", "status"),
    [
        pytest.param(_pod("Pending", []), "Pending", id="pending"),
        pytest.param(
            _pod("Pending", [{"state": {"waiting": {"reason": "ContainerCreating"}}}]),
            "ContainerCreating",
            id="creating",
        ),
        pytest.param(_pod("Running", [{"ready": True, "state": {"running": {}}}]), "Running", id="running"),
        pytest.param(
            _pod("Succeeded", [{"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]),
            "Completed",
            id="completed",
        ),
        pytest.param(
            _pod("Failed", [{"state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]),
            "Error",
            id="error",
        ),
        pytest.param(
            _pod("Failed", [{"state": {"terminated": {"exitCode": 3}}}]), "ExitCode:3", id="exit-code"
        ),
        pytest.param(
            _pod("Running", [{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]),
            "CrashLoopBackOff",
            id="crash-loop",
        ),
        pytest.param(
            _pod("Running", [{"ready": True, "state": {"running": {}}}], deleting=True),
            "Terminating",
            id="terminating",
        ),
    ],
)
def test_pod_status_column(pod: dict[str, Any], status: str) -> None:
    assert pod_status(pod) == status


def test_cronjob_and_default_columns() -> None:
    cronjob = {
        "metadata": {"name": "nightly", "creationTimestamp": "2026-01-09T00:00:00Z"},
        "spec": {"schedule": "0 2 * * *", "timeZone": "Europe/Berlin", "suspend": False},
        "status": {
            "active": [{"name": "x"}],
            "lastScheduleTime": (NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }
    result = table(TYPES["batch/cronjobs"], [cronjob], NOW)
    assert result["rows"][0]["cells"][:7] == [
        "nightly",
        "0 2 * * *",
        "Europe/Berlin",
        "False",
        1,
        "60m",
        "24h",
    ]
    plain = table(TYPES["configmaps"], [{"metadata": {"name": "c"}}], NOW, include_object="None")
    assert [c["name"] for c in plain["columnDefinitions"]] == ["Name", "Age"]
    assert "object" not in plain["rows"][0]
