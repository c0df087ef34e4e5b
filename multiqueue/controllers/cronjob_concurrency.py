"""The concurrency policy of a CronJob: whether a due Job starts while earlier ones run.

Allow starts it beside them, Forbid waits for them to finish, Replace deletes them first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from multiqueue.api import cronjobs
from multiqueue.api.meta import uid_of
from multiqueue.api.types import Event, Obj
from multiqueue.controllers.cronjob_history import deleted_event

FORBIDDEN_MESSAGE: Final = (
    "Not starting job because prior execution is running and concurrency policy is Forbid"
)


class Concurrency(NamedTuple):
    """Whether the due Job starts, the running Jobs to delete first, the references left in status.active,
    and the events."""

    start: bool
    delete: list[Obj]
    active: list[Obj]
    events: list[Event]


def concurrency(policy: object, active: Sequence[Obj], owned_jobs: Sequence[Obj]) -> Concurrency:
    """What ``policy`` says about starting a Job while the Jobs of ``active`` (status.active) run."""
    if policy == cronjobs.FORBID and active:
        return Concurrency(False, [], list(active), [Event("Normal", "JobAlreadyActive", FORBIDDEN_MESSAGE)])
    if policy != cronjobs.REPLACE:
        return Concurrency(True, [], list(active), [])
    by_uid = {uid_of(j): j for j in owned_jobs}
    replaced = [by_uid[str(r.get("uid"))] for r in active if str(r.get("uid")) in by_uid]
    return Concurrency(True, replaced, [], [deleted_event(j) for j in replaced])
