"""The TTL of finished Jobs (ttlSecondsAfterFinished): when a finished Job is deleted.

Upstream runs this in a controller of its own; here the Job controller's sync of a finished Job does it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from multiqueue.api import jobs
from multiqueue.api.types import Obj


class AfterFinish(NamedTuple):
    """Delete the Job now, or look at it again after ``requeue_after`` seconds (None: never)."""

    delete_job: bool = False
    requeue_after: float | None = None


def after_finish(job: Obj, now: datetime) -> AfterFinish:
    """What the TTL of the finished ``job`` asks for at ``now``; counted from when it finished."""
    ttl = jobs.spec_of(job).get("ttlSecondsAfterFinished")
    finished = jobs.finished_condition(job)
    if not isinstance(ttl, int) or finished is None or finished[1] is None:
        return AfterFinish()
    expires = finished[1] + timedelta(seconds=ttl)
    if now >= expires:
        return AfterFinish(delete_job=True)
    return AfterFinish(requeue_after=(expires - now).total_seconds())
