"""What the page shows of a Job and of a worker, as JSON-ready dicts: pure functions of what the manager knows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from multiqueue.api.meta import metadata, namespace_of, uid_of
from multiqueue.api.types import Obj
from multiqueue.dispatch.inspect import JobRow
from multiqueue.dispatch.readmodel import WorkerState

Entry = dict[str, Any]


def job_entry(row: JobRow, job: Obj, last_event: str = "") -> Entry:
    """A Job's line: the same row ``multiqueue status`` prints, with its UID (the page's key), its creation time
    (the page counts the age itself, so a row need not be sent again as it ages) and the time of the manager's
    latest Event about it (a page showing the Job's Events reads them again when it moves)."""
    return {
        "uid": uid_of(job),
        "kind": row.kind,
        "namespace": namespace_of(job),
        "name": str(metadata(job).get("name") or ""),
        "worker": "" if row.worker == "-" else row.worker,
        "state": row.state,
        "completions": row.completions,
        "reason": "" if row.reason == "-" else row.reason,
        "message": row.message,
        "created": str(metadata(job).get("creationTimestamp") or ""),
        "lastEvent": last_event,
    }


def worker_entry(state: WorkerState) -> Entry:
    """A worker's line: health (Connected or why not, lost, draining), labels, and each configured limit's use."""
    return {
        "name": state.name,
        "healthy": state.active,
        "reason": state.reason,
        "lost": state.lost,
        "draining": state.draining,
        "labels": dict(state.labels),
        "running": state.running,
        "capacity": {r: {"used": used, "total": total} for r, (used, total) in state.capacity.items()},
        "lastContact": _timestamp(state.last_contact),
        "missingKinds": list(state.missing_kinds),
    }


def _timestamp(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
