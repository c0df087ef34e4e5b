"""The decide step of the embedded Job controller: from a Job, its pods and the clock to the actions to take.

Pure: no I/O, no hidden state, so each upstream behaviour is a table test. The executor in ``job.py`` performs
the actions in upstream's order: write the status first, then remove the tracking finalizers of the pods that
status now records as uncounted, then create or delete pods, then record events.

Pod accounting follows upstream's finalizer protocol: a finished pod that still has
``batch.kubernetes.io/job-tracking`` is first written into ``status.uncountedTerminatedPods``; once its finalizer
is gone (or the pod is) it is counted into ``succeeded``/``failed`` and leaves the uncounted list. A pod is
therefore counted exactly once, even across controller restarts.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import datetime, timedelta
from typing import Final

from multiqueue.api import indexes, jobs, pods
from multiqueue.api.meta import (
    annotations_of,
    as_dict,
    as_list,
    controller_ref,
    format_time,
    is_deleting,
    labels_of,
    metadata,
    owner_reference,
    parse_time,
    set_condition,
    uid_of,
)
from multiqueue.api.types import Event, Obj

JOB_API_VERSION: Final = "batch/v1"
MAX_POD_CHANGES_PER_SYNC: Final = 500
MAX_UNCOUNTED_PER_SYNC: Final = 500
BACKOFF_BASE: Final = timedelta(seconds=10)
BACKOFF_MAX: Final = timedelta(minutes=10)
MAX_GENERATE_NAME_PREFIX: Final = 58
COMPLETIONS_REACHED_MESSAGE: Final = "Reached expected number of succeeded pods"
BACKOFF_LIMIT_MESSAGE: Final = "Job has reached the specified backoff limit"
DEADLINE_MESSAGE: Final = "Job was active longer than specified deadline"
MAX_FAILED_INDEXES_MESSAGE: Final = "Job has exceeded the specified maximal number of failed indexes"
FAILED_INDEXES_MESSAGE: Final = "Job has failed indexes"


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


# --- small facts about pods ---------------------------------------------------------------------------------


def has_tracking_finalizer(pod: Obj) -> bool:
    return jobs.TRACKING_FINALIZER in as_list(metadata(pod).get("finalizers"))


def owning_job_name(pod: Obj) -> str | None:
    """The name of the batch/v1 Job that controls ``pod``, if one does."""
    ref = controller_ref(pod)
    if ref is None or ref.get("kind") != "Job" or ref.get("apiVersion", JOB_API_VERSION) != JOB_API_VERSION:
        return None
    return str(ref.get("name") or "") or None


def job_of(pod: Obj, named: Obj | None) -> Obj | None:
    """``named`` (the Job with the name the pod's controller reference gives) if it is the pod's controller:
    a Job deleted and made again under the same name is another Job, with another UID."""
    ref = controller_ref(pod)
    if named is None or ref is None or owning_job_name(pod) is None or ref.get("uid") != uid_of(named):
        return None
    return named


def releases_orphan(pod: Obj, named: Obj | None) -> bool:
    """Whether the tracking finalizer comes off ``pod`` outside any Job's sync, as upstream's orphan-pod
    handling does: no Job controls the pod any more (the GC orphaned it, or its Job is gone or was replaced),
    or its Job has finished. ``named`` is the Job with the name in the pod's controller reference, if cached.

    A pod controlled by something other than a Job, or by a Job another controller manages, is left alone.
    """
    if not has_tracking_finalizer(pod):
        return False
    if controller_ref(pod) is None:
        return True
    if owning_job_name(pod) is None:
        return False
    job = job_of(pod, named)
    if job is None:
        return True
    return jobs.is_managed_by_builtin_controller(job) and jobs.is_finished(job)


def _counts_as_failed(pod: Obj, job: Obj) -> bool:
    if pods.phase(pod) == pods.FAILED:
        return True
    if pods.phase(pod) == pods.SUCCEEDED or not pods.is_deleting(pod):
        return False
    # A deleted pod that never finished fails once it is gone, unless only failed pods are replaced: then it
    # counts when its phase says so.
    return jobs.spec_of(job).get("podReplacementPolicy") != jobs.FAILED_ONLY


def _finished(pod: Obj, job: Obj) -> bool:
    return pods.phase(pod) == pods.SUCCEEDED or _counts_as_failed(pod, job)


def _index(pod: Obj, job: Obj) -> int | None:
    index = pods.completion_index(pod)
    total = jobs.completions(job)
    if index is None or total is None or index >= total:
        return None
    return index


# --- pod failure policy -------------------------------------------------------------------------------------


def _match_failure_policy(job: Obj, pod: Obj) -> tuple[str, str] | None:
    """(action, message) of the first podFailurePolicy rule the failed pod matches, or None."""
    rules = as_list(as_dict(jobs.spec_of(job).get("podFailurePolicy")).get("rules"))
    key = f"{metadata(pod).get('namespace')}/{metadata(pod).get('name')}"
    for i, raw in enumerate(rules):
        rule = as_dict(raw)
        action = str(rule.get("action", ""))
        on_exit = rule.get("onExitCodes")
        if isinstance(on_exit, dict):
            container = on_exit.get("containerName")
            values = set(as_list(on_exit.get("values")))
            for name, code in pods.exit_codes(pod):
                if code == 0 or (container is not None and container != name):
                    continue
                if (on_exit.get("operator") == "In") == (code in values):
                    message = f"Container {name} for pod {key} failed with exit code {code} matching {action} rule at index {i}"
                    return action, message
        for pattern in as_list(rule.get("onPodConditions")):
            pattern = as_dict(pattern)
            for cond in as_list(as_dict(pod.get("status")).get("conditions")):
                cond = as_dict(cond)
                if cond.get("type") == pattern.get("type") and cond.get("status") == pattern.get(
                    "status", "True"
                ):
                    message = (
                        f"Pod {key} has condition {cond.get('type')} matching {action} rule at index {i}"
                    )
                    return action, message
    return None


# --- the decision -------------------------------------------------------------------------------------------

_STATUS_COUNTERS: Final = ("active", "succeeded", "failed", "ready", "terminating")


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


def decide(job: Obj, owned_pods: list[Obj], now: datetime, can_manage_pods: bool = True) -> Actions:
    """Everything one sync of ``job`` should do, given the pods it owns (terminating and finished ones too).

    ``can_manage_pods`` is False while earlier creates or deletes have not been observed yet (expectations):
    the status is still kept current, but no pod is created or deleted, so none is ever made twice.
    """
    actions = Actions()
    if not jobs.is_managed_by_builtin_controller(job):
        actions.skipped = f"managed by {jobs.managed_by(job)}"
        return actions
    if problem := malformed(job):
        actions.skipped = actions.malformed = problem
        return actions
    if jobs.completion_mode(job) not in (jobs.NON_INDEXED, jobs.INDEXED):
        actions.events.append(
            Event("Warning", "UnknownCompletionMode", f"Unknown completion mode {jobs.completion_mode(job)}")
        )
        actions.skipped = "unknown completion mode"
        return actions
    deleting = is_deleting(job)
    if jobs.is_finished(job):
        actions.remove_finalizers = [p for p in owned_pods if has_tracking_finalizer(p)]
        if not deleting:
            _ttl(job, now, actions)
        return actions
    # A Job being deleted (foreground, or orphaning its pods) gets no new pods and holds none back: upstream
    # releases every pod's tracking finalizer once the Job has a deletionTimestamp.
    can_manage_pods = can_manage_pods and not deleting

    spec = jobs.spec_of(job)
    old_status = jobs.status_of(job)
    status = copy.deepcopy(old_status)
    conditions: list[Obj] = [c for c in as_list(status.get("conditions")) if isinstance(c, dict)]
    status["conditions"] = conditions
    stamp = format_time(now)
    suspended = jobs.is_suspended(job)
    indexed = jobs.is_indexed(job)
    total = jobs.completions(job)

    if not suspended and not status.get("startTime"):
        status["startTime"] = stamp

    # 1. Accounting through the finalizer protocol.
    uncounted = as_dict(status.get("uncountedTerminatedPods"))
    uncounted_ok = [str(u) for u in as_list(uncounted.get("succeeded"))]
    uncounted_failed = [str(u) for u in as_list(uncounted.get("failed"))]
    by_uid = {uid_of(p): p for p in owned_pods}
    still_tracked = {u for u, p in by_uid.items() if has_tracking_finalizer(p)}
    succeeded = int(status.get("succeeded") or 0)
    failed = int(status.get("failed") or 0)
    completed = (
        set(indexes.parse_indexes(str(status.get("completedIndexes") or ""), total or 0))
        if indexed
        else set()
    )
    failed_indexes = set(indexes.parse_indexes(str(status.get("failedIndexes") or ""), total or 0))
    # Flush: uncounted pods whose finalizer is gone are counted now.
    flushed_ok = [u for u in uncounted_ok if u not in still_tracked]
    flushed_failed = [u for u in uncounted_failed if u not in still_tracked]
    if not indexed:
        succeeded += len(flushed_ok)
    failed += len(flushed_failed)
    uncounted_ok = [u for u in uncounted_ok if u in still_tracked]
    uncounted_failed = [u for u in uncounted_failed if u in still_tracked]
    already = set(uncounted_ok) | set(uncounted_failed)

    failure_target: tuple[str, str] | None = None
    newly_failed_indexes: set[int] = set()
    ending_in_success = (_interim(conditions) or {}).get("type") == jobs.SUCCESS_CRITERIA_MET
    added = 0
    for pod in sorted(owned_pods, key=lambda p: (pods.finish_time(p) or now, str(metadata(p).get("name")))):
        uid = uid_of(pod)
        if not has_tracking_finalizer(pod) or uid in already or not _finished(pod, job):
            continue
        if added >= MAX_UNCOUNTED_PER_SYNC:
            actions.requeue(0)
            break
        added += 1
        index = _index(pod, job)
        if pods.phase(pod) == pods.SUCCEEDED:
            uncounted_ok.append(uid)
            if indexed and index is not None and index not in failed_indexes:
                completed.add(index)
            continue
        stopped_by_us = suspended and pods.phase(pod) != pods.FAILED
        if ending_in_success or stopped_by_us:
            # Pods removed because the Job succeeded, or because it was suspended, are not failures.
            actions.remove_finalizers.append(pod)
            continue
        matched = _match_failure_policy(job, pod) if pods.phase(pod) == pods.FAILED else None
        action = matched[0] if matched else "Count"
        if action == "Ignore":
            actions.remove_finalizers.append(pod)  # not a failure: nothing to count
            continue
        uncounted_failed.append(uid)
        if action == "FailJob" and failure_target is None and matched is not None:
            failure_target = (jobs.POD_FAILURE_POLICY, matched[1])
        per_index = spec.get("backoffLimitPerIndex")
        if indexed and index is not None and isinstance(per_index, int):
            failures = _index_failure_count(pod) + 1
            if action == "FailIndex" or failures > per_index:
                newly_failed_indexes.add(index)
    if indexed:
        failed_indexes |= newly_failed_indexes
        completed -= failed_indexes
        succeeded = len(completed)
        status["completedIndexes"] = indexes.format_indexes(completed)
        if spec.get("backoffLimitPerIndex") is not None:
            status["failedIndexes"] = indexes.format_indexes(failed_indexes)
    status["succeeded"] = succeeded
    status["failed"] = failed
    status["uncountedTerminatedPods"] = (
        {"succeeded": uncounted_ok, "failed": uncounted_failed} if uncounted_ok or uncounted_failed else {}
    )
    # Finalizers come off only for pods the status we are about to write records.
    recorded = set(uncounted_ok) | set(uncounted_failed)
    actions.remove_finalizers += [by_uid[u] for u in recorded if u in by_uid]

    active = [p for p in owned_pods if pods.is_active(p)]
    terminating = [p for p in owned_pods if pods.is_deleting(p) and not pods.is_terminal(p)]
    total_failed = failed + len(uncounted_failed)
    total_succeeded = succeeded if indexed else succeeded + len(uncounted_ok)

    # 2. Has the Job reached an end? Interim conditions first.
    interim = _interim(conditions)
    if interim is None:
        if failure_target is None:
            failure_target = _failure_reason(job, spec, total_failed, active, failed_indexes, completed, now)
        if failure_target is not None:
            set_condition(conditions, jobs.FAILURE_TARGET, "True", failure_target[0], failure_target[1], now)
        else:
            success = _success_reason(job, spec, total_succeeded, active, completed)
            if success is not None:
                set_condition(conditions, jobs.SUCCESS_CRITERIA_MET, "True", success[0], success[1], now)
        interim = _interim(conditions)

    if interim is not None:
        # Ending: remove what still runs; finish once nothing runs and everything is counted.
        if can_manage_pods:
            actions.delete = active[:MAX_POD_CHANGES_PER_SYNC]
        running = len(active) + len(terminating)
        nothing_uncounted = not uncounted_ok and not uncounted_failed
        if running == 0 and nothing_uncounted:
            _finish(conditions, interim, now, status, actions)
    else:
        _suspend_or_resume(job, conditions, status, now, actions)
        if suspended:
            if can_manage_pods:
                actions.delete = active[:MAX_POD_CHANGES_PER_SYNC]
                actions.release_before_delete = True
        elif can_manage_pods:
            _manage_pods(
                job, owned_pods, active, terminating, completed, failed_indexes, total_succeeded, now, actions
            )
        deadline = spec.get("activeDeadlineSeconds")
        started = parse_time(status.get("startTime"))
        if not suspended and isinstance(deadline, int) and started is not None:
            actions.requeue((started + timedelta(seconds=deadline) - now).total_seconds())
    # Pods deleted in this sync count as terminating at once, as upstream reports them.
    removing = [p for p in actions.delete if p in active]
    status["active"] = len(active) - len(removing)
    status["ready"] = sum(1 for p in active if pods.is_ready(p) and p not in removing)
    status["terminating"] = len(terminating) + len(removing)

    if deleting:
        releasing = {uid_of(p) for p in actions.remove_finalizers}
        # Finished pods are released once the status above records them; the others count for nothing now.
        actions.remove_finalizers += [
            p
            for p in owned_pods
            if has_tracking_finalizer(p) and uid_of(p) not in releasing and not _finished(p, job)
        ]

    _omit_empty(status)
    if status != old_status:
        actions.status = status
    return actions


def _omit_empty(status: Obj) -> None:
    """Drop the fields Go leaves out when empty (int32 and string and list fields with omitempty); ``ready``,
    ``terminating``, ``failedIndexes`` and ``uncountedTerminatedPods`` are pointers and stay, even at zero."""
    for field in ("active", "succeeded", "failed", "completedIndexes", "conditions"):
        if not status.get(field):
            status.pop(field, None)


def _index_failure_count(pod: Obj) -> int:
    value = annotations_of(pod).get(jobs.INDEX_FAILURE_COUNT, "0")
    return int(value) if str(value).isdigit() else 0


def _interim(conditions: list[Obj]) -> Obj | None:
    for cond in conditions:
        if (
            cond.get("type") in (jobs.FAILURE_TARGET, jobs.SUCCESS_CRITERIA_MET)
            and cond.get("status") == "True"
        ):
            return cond
    return None


def _failure_reason(
    job: Obj,
    spec: Obj,
    total_failed: int,
    active: list[Obj],
    failed_indexes: set[int],
    completed: set[int],
    now: datetime,
) -> tuple[str, str] | None:
    total = jobs.completions(job)
    if spec.get("backoffLimitPerIndex") is not None and total is not None:
        limit = spec.get("maxFailedIndexes")
        if isinstance(limit, int) and len(failed_indexes) > limit:
            return jobs.MAX_FAILED_INDEXES_EXCEEDED, MAX_FAILED_INDEXES_MESSAGE
        if failed_indexes and len(failed_indexes) + len(completed) >= total:
            return jobs.FAILED_INDEXES, FAILED_INDEXES_MESSAGE
    else:
        limit = spec.get("backoffLimit")
        limit = 6 if not isinstance(limit, int) else limit
        if total_failed > limit:
            return jobs.BACKOFF_LIMIT_EXCEEDED, BACKOFF_LIMIT_MESSAGE
        if as_dict(as_dict(spec.get("template")).get("spec")).get("restartPolicy") == "OnFailure":
            restarts = sum(pods.restart_count(p) for p in active)
            if (limit == 0 and restarts > 0) or (limit > 0 and restarts >= limit):
                return jobs.BACKOFF_LIMIT_EXCEEDED, BACKOFF_LIMIT_MESSAGE
    deadline = spec.get("activeDeadlineSeconds")
    started = parse_time(jobs.status_of(job).get("startTime"))
    if jobs.is_suspended(job) or not isinstance(deadline, int) or started is None:
        return None
    if now - started >= timedelta(seconds=deadline):
        return jobs.DEADLINE_EXCEEDED, DEADLINE_MESSAGE
    return None


def _success_reason(
    job: Obj, spec: Obj, succeeded: int, active: list[Obj], completed: set[int]
) -> tuple[str, str] | None:
    total = jobs.completions(job)
    if jobs.is_indexed(job):
        for i, raw in enumerate(as_list(as_dict(spec.get("successPolicy")).get("rules"))):
            rule = as_dict(raw)
            listed = rule.get("succeededIndexes")
            wanted = set(indexes.parse_indexes(str(listed), total or 0)) if listed is not None else None
            count = rule.get("succeededCount")
            done = len(completed & wanted) if wanted is not None else len(completed)
            satisfied = (wanted is None or wanted <= completed) if count is None else done >= int(count)
            if satisfied:
                return jobs.SUCCESS_POLICY, f"Matched rules at index {i}"
        if total is not None and len(completed) >= total:
            return jobs.COMPLETIONS_REACHED, COMPLETIONS_REACHED_MESSAGE
        return None
    if total is None:
        return (
            (jobs.COMPLETIONS_REACHED, COMPLETIONS_REACHED_MESSAGE) if succeeded > 0 and not active else None
        )
    return (jobs.COMPLETIONS_REACHED, COMPLETIONS_REACHED_MESSAGE) if succeeded >= total else None


def _finish(conditions: list[Obj], interim: Obj, now: datetime, status: Obj, actions: Actions) -> None:
    reason, message = str(interim.get("reason", "")), str(interim.get("message", ""))
    if interim.get("type") == jobs.SUCCESS_CRITERIA_MET:
        set_condition(conditions, jobs.COMPLETE, "True", reason, message, now)
        status["completionTime"] = format_time(now)
        actions.events.append(Event("Normal", "Completed", "Job completed"))
    else:
        set_condition(conditions, jobs.FAILED, "True", reason, message, now)
        actions.events.append(Event("Warning", reason, message))


def _suspend_or_resume(job: Obj, conditions: list[Obj], status: Obj, now: datetime, actions: Actions) -> None:
    was_suspended = jobs.has_condition(job, jobs.SUSPENDED)
    if jobs.is_suspended(job):
        if set_condition(conditions, jobs.SUSPENDED, "True", jobs.JOB_SUSPENDED, "Job suspended", now):
            actions.events.append(Event("Normal", "Suspended", "Job suspended"))
            # Mutable scheduling directives of suspended Jobs (beta, on in 1.37): the clock starts again on resume.
            status.pop("startTime", None)
    elif was_suspended:
        set_condition(conditions, jobs.SUSPENDED, "False", jobs.JOB_RESUMED, "Job resumed", now)
        status["startTime"] = format_time(now)  # restarts activeDeadlineSeconds
        actions.events.append(Event("Normal", "Resumed", "Job resumed"))


def _ttl(job: Obj, now: datetime, actions: Actions) -> None:
    ttl = jobs.spec_of(job).get("ttlSecondsAfterFinished")
    finished = jobs.finished_condition(job)
    if not isinstance(ttl, int) or finished is None or finished[1] is None:
        return
    expires = finished[1] + timedelta(seconds=ttl)
    if now >= expires:
        actions.delete_job = True
    else:
        actions.requeue((expires - now).total_seconds())


# --- creating and deleting pods -----------------------------------------------------------------------------


def _backoff_until(owned_pods: list[Obj]) -> datetime | None:
    """When the next pod may be created: 10 s x 2^(n-1) after the last of n failures since the last success."""
    finished = [(pods.finish_time(p), pods.phase(p)) for p in owned_pods if pods.is_terminal(p)]
    last_success = max(
        (t for t, phase in finished if phase == pods.SUCCEEDED and t is not None), default=None
    )
    failures: list[datetime] = [
        t
        for t, phase in finished
        if phase == pods.FAILED and t is not None and (last_success is None or t > last_success)
    ]
    if not failures:
        return None
    delay = min(BACKOFF_BASE * (1 << min(len(failures) - 1, 16)), BACKOFF_MAX)
    return max(failures) + delay


def _manage_pods(
    job: Obj,
    owned_pods: list[Obj],
    active: list[Obj],
    terminating: list[Obj],
    completed: set[int],
    failed_indexes: set[int],
    succeeded: int,
    now: datetime,
    actions: Actions,
) -> None:
    spec = jobs.spec_of(job)
    parallelism = max(jobs.parallelism(job), 0)
    total = jobs.completions(job)
    indexed = jobs.is_indexed(job)
    if indexed and total is not None:
        remaining = [i for i in range(total) if i not in completed and i not in failed_indexes]
        want = min(parallelism, len(remaining))
        excess = _excess_indexed(job, active, completed | failed_indexes)
    elif total is not None:
        want = max(0, min(parallelism, total - succeeded))
        excess = []
    else:
        # No completions: once one pod has succeeded, what runs goes on running and nothing new starts.
        want = len(active) if succeeded > 0 else parallelism
        excess = []
    keep = [p for p in active if p not in excess]
    if len(keep) > want:
        excess += _deletion_order(keep)[: len(keep) - want]
    if excess:
        actions.delete = excess[:MAX_POD_CHANGES_PER_SYNC]
        actions.release_before_delete = True
        return
    missing = want - len(keep)
    if spec.get("podReplacementPolicy") == jobs.FAILED_ONLY:
        missing -= len(terminating)
    if missing <= 0:
        return
    not_before = _backoff_until(owned_pods)
    if not_before is not None and now < not_before:
        actions.requeue((not_before - now).total_seconds())
        return
    missing = min(missing, MAX_POD_CHANGES_PER_SYNC)
    if indexed and total is not None:
        busy = {_index(p, job) for p in keep + terminating}
        free = [i for i in range(total) if i not in completed and i not in failed_indexes and i not in busy]
        failure_counts = _failure_counts(owned_pods, job)
        actions.create = [pod_for(job, i, failure_counts.get(i, 0)) for i in free[:missing]]
    else:
        actions.create = [pod_for(job, None) for _ in range(missing)]


def _failure_counts(owned_pods: list[Obj], job: Obj) -> dict[int, int]:
    """Per index, failures so far (for the per-index back-off annotation of the next pod)."""
    counts: dict[int, int] = {}
    for pod in owned_pods:
        index = _index(pod, job)
        if index is not None and pods.phase(pod) == pods.FAILED:
            counts[index] = max(counts.get(index, 0), _index_failure_count(pod) + 1)
    return counts


def _excess_indexed(job: Obj, active: list[Obj], done: set[int]) -> list[Obj]:
    """Pods with no valid index, a finished index, or a duplicate of another active pod's index."""
    seen: set[int] = set()
    excess = []
    for pod in sorted(
        active, key=lambda p: (not pods.is_ready(p), str(metadata(p).get("creationTimestamp")))
    ):
        index = _index(pod, job)
        if index is None or index in done or index in seen:
            excess.append(pod)
        else:
            seen.add(index)
    return excess


def _deletion_order(active: list[Obj]) -> list[Obj]:
    """Upstream's ranking of pods to remove first: not ready, unscheduled, pending, newest."""

    def rank(pod: Obj) -> tuple[bool, bool, bool, str]:
        return (
            pods.is_ready(pod),
            pods.is_scheduled(pod),
            pods.phase(pod) == pods.RUNNING,
            "~" + str(metadata(pod).get("creationTimestamp") or ""),
        )

    return sorted(active, key=rank)


def pod_for(job: Obj, index: int | None, failure_count: int = 0) -> Obj:
    """A pod to create for ``job``: its template with the controller reference, finalizer and index."""
    template = as_dict(jobs.spec_of(job).get("template"))
    meta = copy.deepcopy(as_dict(template.get("metadata")))
    spec = copy.deepcopy(as_dict(template.get("spec")))
    name = str(metadata(job).get("name", ""))
    labels = dict(labels_of({"metadata": meta}))
    annotations = dict(annotations_of({"metadata": meta}))
    prefix = f"{name}-"
    if index is not None:
        labels[jobs.COMPLETION_INDEX] = str(index)
        annotations[jobs.COMPLETION_INDEX] = str(index)
        if jobs.spec_of(job).get("backoffLimitPerIndex") is not None:
            annotations[jobs.INDEX_FAILURE_COUNT] = str(failure_count)
        spec["hostname"] = f"{name}-{index}"
        suffix = f"-{index}-"
        prefix = name[: MAX_GENERATE_NAME_PREFIX - len(suffix)] + suffix
        for field in ("containers", "initContainers"):
            for container in as_list(spec.get(field)):
                env = as_list(container.get("env")) if isinstance(container, dict) else []
                if isinstance(container, dict) and not any(
                    as_dict(e).get("name") == "JOB_COMPLETION_INDEX" for e in env
                ):
                    container["env"] = [
                        *env,
                        {
                            "name": "JOB_COMPLETION_INDEX",
                            "valueFrom": {
                                "fieldRef": {"fieldPath": f"metadata.labels['{jobs.COMPLETION_INDEX}']"}
                            },
                        },
                    ]
    else:
        prefix = name[:MAX_GENERATE_NAME_PREFIX] + "-"
    pod_meta: Obj = {
        "generateName": prefix,
        "namespace": metadata(job).get("namespace"),
        "labels": labels,
        "finalizers": [jobs.TRACKING_FINALIZER],
        # LIST items of a real API server carry no kind or apiVersion.
        "ownerReferences": [owner_reference({**job, "apiVersion": "batch/v1", "kind": "Job"})],
    }
    if annotations:
        pod_meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}
