"""Suspending and resuming a Job: the Suspended condition, its event, and what happens to the start time.

The pods of a suspended Job are removed by the pod management step; this step only says how the status shows it.
"""

from __future__ import annotations

from typing import NamedTuple

from multiqueue.api import jobs
from multiqueue.api.types import Event, Obj


class Suspension(NamedTuple):
    """The Suspended condition to set, the event to record if it changes anything, and the start time then:
    a resumed Job starts its activeDeadlineSeconds again, a suspended one has none (mutable scheduling
    directives of suspended Jobs, beta and on in 1.37)."""

    status: str
    reason: str
    message: str
    event: Event
    restarts_clock: bool  # True: startTime becomes now; False: startTime goes


SUSPEND = Suspension(
    "True", jobs.JOB_SUSPENDED, "Job suspended", Event("Normal", "Suspended", "Job suspended"), False
)
RESUME = Suspension("False", jobs.JOB_RESUMED, "Job resumed", Event("Normal", "Resumed", "Job resumed"), True)


def suspension(job: Obj) -> Suspension | None:
    """The change of the Suspended condition ``job`` asks for: suspended by its spec, or resumed after a
    suspension its status records; None when it has never been suspended."""
    if jobs.is_suspended(job):
        return SUSPEND
    if jobs.has_condition(job, jobs.SUSPENDED):
        return RESUME
    return None
