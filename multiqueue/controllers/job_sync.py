"""The decide step of the embedded Job controller: from a Job, its pods and the clock to the actions to take.

Pure: no I/O, no hidden state, so each upstream behaviour is a table test. ``decide`` runs the steps of
upstream's syncJob, each a module of its own: pod accounting (``job_accounting``), finish detection
(``job_finish``), suspend and resume (``job_suspend``), pod management (``job_pods``) and, once the Job has
finished, its TTL (``job_ttl``). The executor in ``job.py`` performs the actions in upstream's order: write the
status first, then remove the tracking finalizers of the pods that status now records as uncounted, then create
or delete pods, then record events.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Final

from multiqueue.api import jobs
from multiqueue.api.jobverdicts import interim_condition
from multiqueue.api.meta import as_dict, as_list, format_time, is_deleting, parse_time, set_condition, uid_of
from multiqueue.api.types import Event, Obj
from multiqueue.controllers.job_accounting import account, counted_status, pod_counts
from multiqueue.controllers.job_finish import (
    ending,
    interim_verdict,
    may_end,
    until_deadline,
)
from multiqueue.controllers.job_pod_facts import has_finished, has_tracking_finalizer
from multiqueue.controllers.job_pods import PodChanges, manage_pods, remove_active
from multiqueue.controllers.job_suspend import suspension
from multiqueue.controllers.job_ttl import after_finish

_STATUS_COUNTERS: Final = ("active", "succeeded", "failed", "ready", "terminating")


@dataclasses.dataclass
class Actions:
    """What one sync wants done. Empty fields mean nothing to do."""

    status: Obj | None = None  # the new status to write, when it changed
    remove_finalizers: list[Obj] = dataclasses.field(default_factory=list)
    create: list[Obj] = dataclasses.field(default_factory=list)
    delete: list[Obj] = dataclasses.field(default_factory=list)
    # Pods removed to suspend the Job or to trim extra ones lose the tracking finalizer before the delete, so
    # they never count as failed; pods removed because the Job ends keep it and are counted.
    release_before_delete: bool = False
    events: list[Event] = dataclasses.field(default_factory=list)
    requeue_after: float | None = None
    delete_job: bool = False
    skipped: str = ""  # why the Job was left alone
    malformed: str = ""  # a field the API server should have refused, which leaves the Job alone

    def requeue(self, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)

    def change_pods(self, changes: PodChanges) -> None:
        self.create = changes.create
        self.delete = changes.delete
        self.release_before_delete = changes.release_before_delete
        if changes.requeue_after is not None:
            self.requeue(changes.requeue_after)


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def malformed(job: Obj) -> str:
    """The first field of ``job`` the controller cannot read ("" if none): a type kube-apiserver refuses on input,
    so kube-controller-manager never meets it. (A status that is not an object at all reads as no status.)"""
    status = jobs.status_of(job)
    for key in _STATUS_COUNTERS:
        if status.get(key) is not None and not _is_integer(status[key]):
            return f"status.{key} must be an integer"
    rules = as_list(as_dict(jobs.spec_of(job).get("podFailurePolicy")).get("rules"))
    for i, rule in enumerate(rules):
        values = as_dict(as_dict(rule).get("onExitCodes")).get("values")
        if not all(_is_integer(v) for v in as_list(values)):
            return f"spec.podFailurePolicy.rules[{i}].onExitCodes.values must be integers"
    return ""


def _left_alone(job: Obj) -> Actions | None:
    """The actions of a Job this controller does not sync: another controller's, malformed, or of a completion
    mode it does not know."""
    if not jobs.is_managed_by_builtin_controller(job):
        return Actions(skipped=f"managed by {jobs.managed_by(job)}")
    if problem := malformed(job):
        return Actions(skipped=problem, malformed=problem)
    if jobs.completion_mode(job) not in (jobs.NON_INDEXED, jobs.INDEXED):
        event = Event(
            "Warning", "UnknownCompletionMode", f"Unknown completion mode {jobs.completion_mode(job)}"
        )
        return Actions(events=[event], skipped="unknown completion mode")
    return None


def _finished(job: Obj, owned_pods: Sequence[Obj], now: datetime) -> Actions:
    """A finished Job releases every pod it still tracks and, unless it is being deleted, waits for its TTL."""
    actions = Actions(remove_finalizers=[p for p in owned_pods if has_tracking_finalizer(p)])
    if not is_deleting(job):
        ttl = after_finish(job, now)
        actions.delete_job = ttl.delete_job
        if ttl.requeue_after is not None:
            actions.requeue(ttl.requeue_after)
    return actions


def _working_status(job: Obj, now: datetime) -> tuple[Obj, list[Obj]]:
    """A copy of the status to change, and its conditions (the ones that are objects); a running Job that has
    no start time starts now."""
    status = copy.deepcopy(jobs.status_of(job))
    conditions: list[Obj] = [c for c in as_list(status.get("conditions")) if isinstance(c, dict)]
    status["conditions"] = conditions
    if not jobs.is_suspended(job) and not status.get("startTime"):
        status["startTime"] = format_time(now)
    return status, conditions


def _end(interim: Obj, status: Obj, conditions: list[Obj], now: datetime, actions: Actions) -> None:
    """Give a Job whose interim condition came true, and whose pods are all gone and counted, its final one."""
    final = ending(interim)
    set_condition(
        conditions, final.condition.type, "True", final.condition.reason, final.condition.message, now
    )
    if final.completed:
        status["completionTime"] = format_time(now)
    actions.events.append(final.event)


def _suspend_or_resume(job: Obj, status: Obj, conditions: list[Obj], now: datetime, actions: Actions) -> None:
    """Show a suspension or a resume in the status, with its event, when it changes the Suspended condition."""
    change = suspension(job)
    if change is None or not set_condition(
        conditions, jobs.SUSPENDED, change.status, change.reason, change.message, now
    ):
        return
    actions.events.append(change.event)
    if change.restarts_clock:
        status["startTime"] = format_time(now)  # restarts activeDeadlineSeconds
    else:
        status.pop("startTime", None)


def _released_by_deletion(job: Obj, owned_pods: Sequence[Obj], releasing: Sequence[Obj]) -> list[Obj]:
    """The pods a Job being deleted lets go besides ``releasing``: finished pods are released once the status
    records them, the others count for nothing now."""
    released = {uid_of(p) for p in releasing}
    return [
        p
        for p in owned_pods
        if has_tracking_finalizer(p) and uid_of(p) not in released and not has_finished(p, job)
    ]


def _omit_empty(status: Obj) -> None:
    """Drop the fields Go leaves out when empty (int32 and string and list fields with omitempty); ``ready``,
    ``terminating``, ``failedIndexes`` and ``uncountedTerminatedPods`` are pointers and stay, even at zero."""
    for field in ("active", "succeeded", "failed", "completedIndexes", "conditions"):
        if not status.get(field):
            status.pop(field, None)


def _sync(job: Obj, owned_pods: Sequence[Obj], now: datetime, can_manage_pods: bool) -> Actions:
    """One sync of a Job that has not finished: count, look for its end, then suspend, resume or keep pods."""
    deleting = is_deleting(job)
    # A Job being deleted (foreground, or orphaning its pods) gets no new pods and holds none back: upstream
    # releases every pod's tracking finalizer once the Job has a deletionTimestamp.
    can_manage_pods = can_manage_pods and not deleting
    status, conditions = _working_status(job, now)

    interim = interim_condition(conditions)
    ending_in_success = (interim or {}).get("type") == jobs.SUCCESS_CRITERIA_MET
    # Failed pods held back for their replacement (per-index limits) are recorded once the Job ends after all.
    counted = account(
        job, owned_pods, now, ending_in_success=ending_in_success, holding=interim is None and not deleting
    )
    if interim is None and (target := interim_verdict(job, counted, now)) is not None:
        set_condition(conditions, target.type, "True", target.reason, target.message, now)
        interim = interim_condition(conditions)
        counted = account(job, owned_pods, now, ending_in_success=ending_in_success)
    status.update(counted_status(job, counted))
    actions = Actions(remove_finalizers=list(counted.release))
    if counted.recount:
        actions.requeue(0)

    if interim is not None:
        if can_manage_pods:
            actions.change_pods(remove_active(counted, release=False))
        if may_end(counted):
            _end(interim, status, conditions, now, actions)
    else:
        _suspend_or_resume(job, status, conditions, now, actions)
        if can_manage_pods and jobs.is_suspended(job):
            actions.change_pods(remove_active(counted, release=True))
        elif can_manage_pods:
            actions.change_pods(manage_pods(job, owned_pods, counted, now))
        left = until_deadline(job, parse_time(status.get("startTime")), now)
        if left is not None:
            actions.requeue(left)

    status.update(pod_counts(counted, actions.delete))
    if deleting:
        actions.remove_finalizers += _released_by_deletion(job, owned_pods, actions.remove_finalizers)
    _omit_empty(status)
    if status != jobs.status_of(job):
        actions.status = status
    return actions


def decide(job: Obj, owned_pods: list[Obj], now: datetime, can_manage_pods: bool = True) -> Actions:
    """Everything one sync of ``job`` should do, given the pods it owns (terminating and finished ones too).

    ``can_manage_pods`` is False while earlier creates or deletes have not been observed yet (expectations):
    the status is still kept current, but no pod is created or deleted, so none is ever made twice.
    """
    if (alone := _left_alone(job)) is not None:
        return alone
    if jobs.is_finished(job):
        return _finished(job, owned_pods, now)
    return _sync(job, owned_pods, now, can_manage_pods)
