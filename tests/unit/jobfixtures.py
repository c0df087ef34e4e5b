"""Builders of Job dicts for the table tests."""

from __future__ import annotations

import copy
from typing import Any

from multiqueue.api.jobdefaults import default_job

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:05:00Z"
T2 = "2026-01-01T00:10:00Z"


def job(name: str = "pi", uid: str = "uid-1", **spec: Any) -> dict[str, Any]:
    """A defaulted, valid Job as the server stores it."""
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
            },
            **spec,
        },
    }
    return default_job(body)


def with_status(base: dict[str, Any], **status: Any) -> dict[str, Any]:
    result = copy.deepcopy(base)
    result["status"] = status
    return result


def cond(type_: str, status: str = "True", reason: str = "", time: str = T1) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "lastTransitionTime": time}
