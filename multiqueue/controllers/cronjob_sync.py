"""The decide step of the embedded CronJob controller: from a CronJob, its Jobs and the clock to actions.

Pure, with the clock injected, so missed schedules, deadlines, concurrency policies, history limits and time
zones are table tests. The executor in ``cronjob.py`` deletes, creates (recording the new Job in
``status.active``, or adopting it on AlreadyExists), writes the status and requeues.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from datetime import datetime

from multiqueue.api import cronjobs, cronjobtimes
from multiqueue.api.meta import as_dict, as_list, format_time, metadata, owner_reference, uid_of
from multiqueue.api.types import Event, Obj
from multiqueue.controllers.cronjob_concurrency import concurrency
from multiqueue.controllers.cronjob_history import (
    deleted_event,
    expired_history,
    last_successful_time,
    running_jobs,
)
from multiqueue.controllers.cronjob_schedule import already_started, due_time


@dataclasses.dataclass
class Actions:
    """What one sync wants done. Empty fields mean nothing to do."""

    status: Obj | None = None  # without the Job about to be created; the executor adds it
    delete: list[Obj] = dataclasses.field(default_factory=list)
    create: Obj | None = None
    scheduled_time: datetime | None = None
    events: list[Event] = dataclasses.field(default_factory=list)
    requeue_after: float | None = None


def job_for(cronjob: Obj, scheduled: datetime) -> Obj:
    """The Job to create for one scheduled time, from the CronJob's template."""
    template = as_dict(as_dict(cronjob.get("spec")).get("jobTemplate"))
    template_meta = as_dict(template.get("metadata"))
    annotations = dict(as_dict(template_meta.get("annotations")))
    annotations[cronjobs.SCHEDULED_TIMESTAMP_ANNOTATION] = cronjobtimes.scheduled_timestamp_annotation(
        cronjob, scheduled
    )
    meta: Obj = {
        "name": cronjobtimes.job_name(str(metadata(cronjob).get("name")), scheduled),
        "namespace": metadata(cronjob).get("namespace"),
        "annotations": annotations,
        "ownerReferences": [owner_reference({**cronjob, "apiVersion": "batch/v1", "kind": "CronJob"})],
    }
    labels = as_dict(template_meta.get("labels"))
    if labels:
        meta["labels"] = dict(labels)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": copy.deepcopy(as_dict(template.get("spec"))),
    }


def _start(
    cronjob: Obj, active: list[Obj], owned_jobs: Sequence[Obj], now: datetime, actions: Actions
) -> list[Obj]:
    """Start the Job that is due, if the schedule and the concurrency policy let it; the references left in
    status.active."""
    due = due_time(cronjob, now)
    actions.events += due.events
    actions.requeue_after = due.requeue_after
    if due.scheduled is None or already_started(cronjob, active, due.scheduled):
        return active
    policy = as_dict(cronjob.get("spec")).get("concurrencyPolicy", cronjobs.ALLOW)
    decided = concurrency(policy, active, owned_jobs)
    actions.events += decided.events
    if not decided.start:
        return active
    actions.delete += decided.delete
    actions.create = job_for(cronjob, due.scheduled)
    actions.scheduled_time = due.scheduled
    return decided.active


def decide(cronjob: Obj, owned_jobs: list[Obj], now: datetime) -> Actions:
    """Everything one sync of ``cronjob`` should do, given the Jobs it owns: history first, as upstream (the
    oldest finished Jobs beyond the limits are deleted and leave status.active without a SawCompletedJob event),
    then status.active against the Jobs that exist, then the Job that is due."""
    if metadata(cronjob).get("deletionTimestamp"):
        return Actions()
    old_status = as_dict(cronjob.get("status"))
    status = copy.deepcopy(old_status)
    expired = expired_history(as_dict(cronjob.get("spec")), owned_jobs)
    actions = Actions(delete=list(expired), events=[deleted_event(j) for j in expired])
    gone = {uid_of(j) for j in expired}
    listed = [r for r in (as_dict(r) for r in as_list(status.get("active"))) if str(r.get("uid")) not in gone]
    running = running_jobs(listed, owned_jobs)
    actions.events += running.events
    last_success = last_successful_time(status, owned_jobs)
    if last_success is not None:
        status["lastSuccessfulTime"] = format_time(last_success)
    active = _start(cronjob, running.active, owned_jobs, now, actions)
    if actions.scheduled_time is not None:
        status["lastScheduleTime"] = format_time(actions.scheduled_time)
    status["active"] = active
    if not active:
        status.pop("active", None)
    if status != old_status:
        actions.status = status
    return actions
