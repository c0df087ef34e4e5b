"""Job and CronJob scenarios, as data, for the controller differential test (test_controllers.py).

Each scenario is one object created in a namespace of its own on both clusters, steps that act on it when a
condition first holds (resume, suspend, delete a pod, take a pod's owner reference away, relabel a pod out of the selector, delete the Job), and the condition that ends it. Conditions
are small dicts whose keys must all hold (see ``test_controllers.holds``):

- ``finished``: the Job has a Complete or Failed condition that is True
- ``condition``: the Job has this condition True
- ``running``: at least this many of its pods run (not being deleted)
- ``settled``: no pod of the Job is left that is not terminal, and status counts none active or terminating
- ``deleting``: the object has a deletionTimestamp
- ``released`` / ``orphaned``: no pod carries the Job's tracking finalizer / an owner reference
- ``job_gone`` / ``pods``: the Job no longer exists / exactly this many pods are left in the namespace
- ``event``: an Event with this reason names the scenario's object
- ``jobs_finished`` / ``jobs_active`` / ``jobs`` / ``jobs_ready``: a CronJob's finished Jobs (at least),
  ``status.active`` entries (at least), live Jobs in the namespace (exactly), Jobs whose status counts a ready
  pod (at least; so a new Job's status has caught up with its pod before the comparison)
- ``after_tick``: this many seconds have passed since the first whole minute after the run began
- ``barrier``: every other scenario of this side whose deadline is not later than its own has ended (for
  scenarios where nothing is meant to happen)

Containers run on this machine through the local kubelet, so scripts are real shell; ``{marker}`` becomes a file
path of the scenario and side, for scripts that behave differently on a second run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

Obj = dict[str, Any]

# Every pod goes quickly once deleted: the scenarios measure controllers, not grace periods.
GRACE = 1
# Fails the first run with exit 3, succeeds on the next (the marker file remembers the first).
FAIL_ONCE = "if [ -e {marker} ]; then exit 0; fi; touch {marker}; exit 3"
# Runs long the first time (until deleted), succeeds at once the next.
LONG_ONCE = "if [ -e {marker} ]; then exit 0; fi; touch {marker}; exec sleep 60"
INDEX_1_FAILS = '[ "$JOB_COMPLETION_INDEX" = 1 ] && exit 1; exit 0'
# For Jobs that fail at their first failure: the other indexes have ended by then on either side, so which pods
# were still running when it failed is not a matter of timing.
INDEX_1_FAILS_LAST = '[ "$JOB_COMPLETION_INDEX" = 1 ] && { sleep 5; exit 1; }; exit 0'
# Index 0 fails once; its next pod succeeds only if it starts 9 s or more after that failure (the back-off is 10 s,
# timestamps are whole seconds), else it fails the index. Index 1 succeeds as soon as index 0 has failed.
INDEX_0_BACKS_OFF_WHILE_1_SUCCEEDS = (
    'if [ "$JOB_COMPLETION_INDEX" = 1 ]; then while [ ! -e {marker} ]; do sleep 0.2; done; exit 0; fi; '
    "if [ -e {marker} ]; then [ $(( $(date +%s) - $(stat -c %Y {marker}) )) -ge 9 ] && exit 0; exit 4; fi; "
    "touch {marker}; exit 3"
)


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # "Job" or "CronJob"
    spec: Obj
    until: Obj
    steps: tuple[Obj, ...] = ()  # each {"when": condition, "do": operation}
    intent: str = ""
    # Event reasons one side may emit and the other not, each for a reason of timing, not of behaviour.
    racy_events: tuple[str, ...] = ()
    finalizers: tuple[str, ...] = ()  # on the object itself; the test removes them before cleaning up


def template(script: str, restart: str = "Never") -> Obj:
    return {
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": GRACE,
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script]}],
        }
    }


def job_spec(script: str, restart: str = "Never", **fields: Any) -> Obj:
    return {"template": template(script, restart), **fields}


def _job(name: str, intent: str, spec: Obj, until: Obj | None = None, *steps: Obj) -> Scenario:
    return Scenario(name, "Job", spec, until or {"finished": True}, tuple(steps), intent)


def _cron(name: str, intent: str, spec: Obj, until: Obj, *steps: Obj, racy: tuple[str, ...] = ()) -> Scenario:
    full = {"schedule": "* * * * *", **spec}
    return Scenario(name, "CronJob", full, until, tuple(steps), intent, racy)


def _cron_job(script: str, **fields: Any) -> Obj:
    return {"jobTemplate": {"spec": job_spec(script, **fields)}}


JOBS: tuple[Scenario, ...] = (
    _job("success", "one pod succeeds", job_spec("exit 0")),
    _job(
        "success-parallel", "completions 3, parallelism 3", job_spec("exit 0", completions=3, parallelism=3)
    ),
    _job(
        "completions-over-parallelism",
        "completions 4, parallelism 2: two waves",
        job_spec("exit 0", completions=4, parallelism=2),
    ),
    _job(
        "work-queue",
        "no completions: the first success ends it once none runs",
        job_spec("exit 0", parallelism=2),
    ),
    _job("fail-backoff-0", "backoffLimit 0: one failure fails it", job_spec("exit 1", backoffLimit=0)),
    _job(
        "fail-backoff-1",
        "backoffLimit 1: a retry after the back-off, then BackoffLimitExceeded",
        job_spec("exit 1", backoffLimit=1),
    ),
    _job(
        "retry-then-succeed",
        "one failure within the limit, then success",
        job_spec(FAIL_ONCE, backoffLimit=2),
    ),
    _job(
        "indexed-success",
        "Indexed, completions 3",
        job_spec("exit 0", completionMode="Indexed", completions=3, parallelism=3),
    ),
    _job(
        "indexed-over-parallelism",
        "Indexed, completions 4, parallelism 2",
        job_spec("exit 0", completionMode="Indexed", completions=4, parallelism=2),
    ),
    _job(
        "indexed-fail",
        "Indexed, index 1 fails, backoffLimit 0",
        job_spec(INDEX_1_FAILS_LAST, completionMode="Indexed", completions=3, parallelism=3, backoffLimit=0),
    ),
    _job(
        "per-index-backoff",
        "backoffLimitPerIndex 1: index 1 fails twice, the others complete: FailedIndexes",
        job_spec(
            INDEX_1_FAILS, completionMode="Indexed", completions=3, parallelism=3, backoffLimitPerIndex=1
        ),
    ),
    _job(
        "per-index-backoff-independent",
        "backoffLimitPerIndex 1: index 0 fails once and comes back only after its own 10 s back-off (sooner fails it), "
        "though index 1 succeeds meanwhile",
        job_spec(
            INDEX_0_BACKS_OFF_WHILE_1_SUCCEEDS,
            completionMode="Indexed",
            completions=2,
            parallelism=2,
            backoffLimitPerIndex=1,
        ),
    ),
    _job(
        "per-index-max-failed",
        "backoffLimitPerIndex 0, maxFailedIndexes 0: the first failed index fails the Job",
        job_spec(
            INDEX_1_FAILS_LAST,
            completionMode="Indexed",
            completions=3,
            parallelism=3,
            backoffLimitPerIndex=0,
            maxFailedIndexes=0,
        ),
    ),
    _job(
        "pod-failure-failjob",
        "podFailurePolicy onExitCodes In [3] FailJob",
        job_spec(
            "exit 3",
            backoffLimit=6,
            podFailurePolicy={
                "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}}]
            },
        ),
    ),
    _job(
        "pod-failure-ignore",
        "podFailurePolicy Ignore on exit 3: the failure is not counted, the retry succeeds",
        job_spec(
            FAIL_ONCE,
            backoffLimit=0,
            podFailurePolicy={
                "rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}}]
            },
        ),
    ),
    _job(
        "pod-failure-count",
        "podFailurePolicy Count on exit codes NotIn [0, 3]: counted against backoffLimit 0",
        job_spec(
            "exit 5",
            backoffLimit=0,
            podFailurePolicy={
                "rules": [
                    {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}},
                    {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0, 3]}},
                ]
            },
        ),
    ),
    _job(
        "pod-failure-conditions",
        "podFailurePolicy onPodConditions Ready=False FailJob (a failed pod is not ready)",
        job_spec(
            "exit 1",
            backoffLimit=6,
            podFailurePolicy={
                "rules": [{"action": "FailJob", "onPodConditions": [{"type": "Ready", "status": "False"}]}]
            },
        ),
    ),
    _job(
        "pod-failure-fail-index",
        "podFailurePolicy FailIndex on exit 1 with backoffLimitPerIndex",
        job_spec(
            INDEX_1_FAILS,
            completionMode="Indexed",
            completions=3,
            parallelism=3,
            backoffLimitPerIndex=2,
            podFailurePolicy={
                "rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}]
            },
        ),
    ),
    _job(
        "success-policy-indexes",
        "successPolicy succeededIndexes 0: the others are removed once index 0 succeeds",
        job_spec(
            '[ "$JOB_COMPLETION_INDEX" = 0 ] && exit 0; exec sleep 60',
            completionMode="Indexed",
            completions=3,
            parallelism=3,
            successPolicy={"rules": [{"succeededIndexes": "0"}]},
        ),
    ),
    _job(
        "success-policy-count",
        "successPolicy succeededCount 2 of indexes 0-1",
        job_spec(
            '[ "$JOB_COMPLETION_INDEX" -lt 2 ] && exit 0; exec sleep 60',
            completionMode="Indexed",
            completions=4,
            parallelism=4,
            successPolicy={"rules": [{"succeededIndexes": "0-2", "succeededCount": 2}]},
        ),
    ),
    _job(
        "active-deadline",
        "activeDeadlineSeconds 3 on a pod that sleeps: DeadlineExceeded",
        job_spec("exec sleep 60", activeDeadlineSeconds=3),
    ),
    _job(
        "suspend-then-resume",
        "created suspended, resumed once the Suspended condition shows",
        job_spec("exit 0", suspend=True),
        {"finished": True},
        {"when": {"condition": "Suspended"}, "do": {"patch": {"spec": {"suspend": False}}}},
    ),
    _job(
        "suspend-part-way",
        "suspended while its pod runs: the pod goes, the Job waits suspended",
        job_spec("exec sleep 60", parallelism=1),
        {"condition": "Suspended", "settled": True},
        {"when": {"running": 1}, "do": {"patch": {"spec": {"suspend": True}}}},
    ),
    _job(
        "replacement-failed",
        "podReplacementPolicy Failed: the replacement waits until the deleted pod has ended",
        job_spec(LONG_ONCE, podReplacementPolicy="Failed"),
        {"finished": True},
        {"when": {"running": 1}, "do": {"delete_pod": True}},
    ),
    _job(
        "replacement-terminating",
        "podReplacementPolicy TerminatingOrFailed: replaced as soon as it is deleted",
        job_spec(LONG_ONCE, podReplacementPolicy="TerminatingOrFailed"),
        {"finished": True},
        {"when": {"running": 1}, "do": {"delete_pod": True}},
    ),
    _job(
        "orphan-adopted",
        "a running pod loses its ownerReference: the Job adopts it back and makes no replacement",
        job_spec("sleep 5; exit 0"),
        {"finished": True},
        {"when": {"running": 1}, "do": {"unown_pod": True}},
    ),
    _job(
        "relabelled-released",
        "a running pod relabelled out of the selector: released (no owner reference, no finalizer) and replaced",
        job_spec("sleep 3; exit 0"),
        {"finished": True, "pods": 2, "settled": True},
        {"when": {"running": 1}, "do": {"relabel_pod": {"batch.kubernetes.io/controller-uid": "elsewhere"}}},
    ),
    _job(
        "ttl-after-finished",
        "ttlSecondsAfterFinished 0: the finished Job and its pods are deleted",
        job_spec("exit 0", ttlSecondsAfterFinished=0),
        {"job_gone": True, "pods": 0},
    ),
    _job(
        "delete-background",
        "a running Job deleted with propagationPolicy Background",
        job_spec("exec sleep 60"),
        {"job_gone": True, "pods": 0},
        {"when": {"running": 1}, "do": {"delete": "Background"}},
    ),
    _job(
        "delete-foreground",
        "a running Job deleted with propagationPolicy Foreground",
        job_spec("exec sleep 60"),
        {"job_gone": True, "pods": 0},
        {"when": {"running": 1}, "do": {"delete": "Foreground"}},
    ),
    _job(
        "delete-orphan",
        "a running Job deleted with propagationPolicy Orphan: its pod stays, released",
        job_spec("exec sleep 60"),
        {"job_gone": True, "pods": 1, "released": True, "orphaned": True},
        {"when": {"running": 1}, "do": {"delete": "Orphan"}},
    ),
    Scenario(
        "delete-held-by-finalizer",
        "Job",
        job_spec("exec sleep 60"),
        {"deleting": True, "running": 1, "released": True},
        ({"when": {"running": 1}, "do": {"delete": "Background"}},),
        "a running Job deleted while a finalizer of its own holds it: its pods run on, released",
        finalizers=("example.com/hold",),
    ),
    _job(
        "managed-by-foreign",
        "spec.managedBy names another controller: no pods, status {} as written at create",
        job_spec("exit 0", managedBy="example.com/other"),
        {"barrier": True},
    ),
    _job(
        "parallelism-zero",
        "parallelism 0: no pods",
        job_spec("exit 0", parallelism=0),
        {"barrier": True},
    ),
    _job(
        "restart-on-failure",
        "restartPolicy OnFailure: the failure is retried in place, then the Job succeeds",
        job_spec(FAIL_ONCE, restart="OnFailure", backoffLimit=2),
    ),
)

CRONJOBS: tuple[Scenario, ...] = (
    _cron(
        "cron-allow",
        "a scheduled Job that succeeds, seen finished by the CronJob",
        _cron_job("exit 0"),
        {"jobs_finished": 1, "event": "SawCompletedJob"},
    ),
    _cron(
        "cron-allow-overlap",
        "Allow: a second Job starts while the first runs",
        _cron_job("exec sleep 100"),
        {"jobs_active": 2, "running": 2, "jobs_ready": 2},
    ),
    _cron(
        "cron-forbid",
        "Forbid: no second Job while the first runs",
        {**_cron_job("exec sleep 100"), "concurrencyPolicy": "Forbid"},
        {"event": "JobAlreadyActive"},
    ),
    _cron(
        "cron-replace",
        "Replace: the running Job is deleted for the next",
        {**_cron_job("exec sleep 100"), "concurrencyPolicy": "Replace"},
        {"event": "SuccessfulDelete", "jobs": 1, "jobs_active": 1, "pods": 1, "running": 1, "jobs_ready": 1},
    ),
    _cron(
        "cron-suspend",
        "suspended: no Job",
        {**_cron_job("exit 0"), "suspend": True},
        {"barrier": True},
    ),
    _cron(
        "cron-history-limits",
        "successfulJobsHistoryLimit 0: the finished Job is deleted",
        {**_cron_job("exit 0"), "successfulJobsHistoryLimit": 0},
        {"event": "SuccessfulDelete", "jobs": 0},
        # kube-controller-manager syncs the CronJob again on the deleted Job's watch event, usually before its
        # cache holds its own status write that dropped the Job from status.active; it then finds the Job gone
        # and says MissingJob. The embedded controller's cache holds its write by then.
        racy=("MissingJob",),
    ),
    _cron(
        "cron-job-fails",
        "the scheduled Job fails; failedJobsHistoryLimit 1 keeps it",
        {**_cron_job("exit 1", backoffLimit=0), "failedJobsHistoryLimit": 1},
        {"jobs_finished": 1, "event": "SawCompletedJob"},
    ),
    _cron(
        "cron-time-zone",
        "timeZone Asia/Kolkata: the scheduled-time annotation carries its offset",
        {**_cron_job("exit 0"), "timeZone": "Asia/Kolkata"},
        {"jobs_finished": 1, "event": "SawCompletedJob"},
    ),
    _cron(
        "cron-resume-missed",
        "suspended over a schedule time, resumed after it: the missed Job starts at once",
        {**_cron_job("exit 0"), "suspend": True},
        {"jobs_finished": 1, "event": "SawCompletedJob"},
        {"when": {"after_tick": 5}, "do": {"patch": {"spec": {"suspend": False}}}},
    ),
    _cron(
        "cron-starting-deadline",
        "startingDeadlineSeconds 3: resumed too late for the missed time, the next one runs",
        {**_cron_job("exit 0"), "suspend": True, "startingDeadlineSeconds": 3},
        {"jobs_finished": 1, "event": "SawCompletedJob"},
        {"when": {"after_tick": 8}, "do": {"patch": {"spec": {"suspend": False}}}},
    ),
)

SCENARIOS: tuple[Scenario, ...] = JOBS + CRONJOBS
