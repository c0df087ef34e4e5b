"""batch/v1 Job vocabulary and readers: the condition types, reasons, modes and labels upstream uses, and the
small questions every caller asks of a Job (its completion mode, counts, conditions, whether it has finished).

The rules live beside this module: ``jobdefaults`` (create-time defaulting), ``jobspec`` and ``jobpolicies``
(create validation), ``jobupdate`` (what an update may change) and ``jobstatus`` (writes to the status
subresource). Everything here reads plain dicts and never raises on malformed input: a value of the wrong type
counts as absent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from multiqueue.api import pods
from multiqueue.api.meta import as_dict, as_int, as_list, condition_is_true, find_condition, parse_time
from multiqueue.api.types import Obj

# Condition types.
COMPLETE: Final = "Complete"
FAILED: Final = "Failed"
SUSPENDED: Final = "Suspended"
FAILURE_TARGET: Final = "FailureTarget"
SUCCESS_CRITERIA_MET: Final = "SuccessCriteriaMet"

# Condition reasons.
BACKOFF_LIMIT_EXCEEDED: Final = "BackoffLimitExceeded"
DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
POD_FAILURE_POLICY: Final = "PodFailurePolicy"
MAX_FAILED_INDEXES_EXCEEDED: Final = "MaxFailedIndexesExceeded"
FAILED_INDEXES: Final = "FailedIndexes"
COMPLETIONS_REACHED: Final = "CompletionsReached"
SUCCESS_POLICY: Final = "SuccessPolicy"
JOB_SUSPENDED: Final = "JobSuspended"
JOB_RESUMED: Final = "JobResumed"

# Completion modes and pod replacement policies.
NON_INDEXED: Final = "NonIndexed"
INDEXED: Final = "Indexed"
TERMINATING_OR_FAILED: Final = "TerminatingOrFailed"
FAILED_ONLY: Final = "Failed"

# Well-known labels, annotations and the pod finalizer.
BUILTIN_CONTROLLER: Final = "kubernetes.io/job-controller"
COMPLETION_INDEX: Final = pods.COMPLETION_INDEX
INDEX_FAILURE_COUNT: Final = "batch.kubernetes.io/job-index-failure-count"
TRACKING_FINALIZER: Final = "batch.kubernetes.io/job-tracking"
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL: Final = "job-name"
LEGACY_CONTROLLER_UID_LABEL: Final = "controller-uid"


def spec_of(job: Any) -> Obj:
    return as_dict(as_dict(job).get("spec"))


def status_of(job: Any) -> Obj:
    return as_dict(as_dict(job).get("status"))


def conditions_of(job: Any) -> list[Any]:
    return as_list(status_of(job).get("conditions"))


def template_labels(spec: Obj) -> Obj:
    """The pod template's labels: what the selector must match and the Job's own labels are copied from."""
    return as_dict(as_dict(as_dict(spec.get("template")).get("metadata")).get("labels"))


def completion_mode(job: Any) -> str:
    """The mode as written (unknown modes included, so the controller can report them), NonIndexed if unset."""
    return str(spec_of(job).get("completionMode") or NON_INDEXED)


def is_indexed(job: Any) -> bool:
    return completion_mode(job) == INDEXED


def completions(job: Any) -> int | None:
    """None means a work-queue Job: it succeeds once any pod succeeds and the rest have ended."""
    return as_int(spec_of(job).get("completions"))


def parallelism(job: Any) -> int:
    value = as_int(spec_of(job).get("parallelism"))
    return 1 if value is None else value


def is_suspended(job: Any) -> bool:
    return spec_of(job).get("suspend") is True


def managed_by(job: Any) -> str | None:
    value = spec_of(job).get("managedBy")
    return value if isinstance(value, str) and value else None


def is_managed_by_builtin_controller(job: Any) -> bool:
    """Whether a Job controller (kube-controller-manager's or our embedded one) should sync the Job."""
    return managed_by(job) in (None, BUILTIN_CONTROLLER)


def has_condition(job: Any, type_: str) -> bool:
    """Conditions count only with status "True", as everywhere upstream."""
    return condition_is_true(conditions_of(job), type_)


def is_complete(job: Any) -> bool:
    return has_condition(job, COMPLETE)


def is_failed(job: Any) -> bool:
    return has_condition(job, FAILED)


def is_finished(job: Any) -> bool:
    """Complete or Failed is True; completionTime alone does not count (KEP-4368)."""
    return is_complete(job) or is_failed(job)


def finished_condition(job: Any) -> tuple[str, datetime | None] | None:
    """("Complete" | "Failed", when it became True) once finished, else None; TTL and history count from it."""
    for type_ in (COMPLETE, FAILED):
        cond = find_condition(conditions_of(job), type_)
        if cond is not None and cond.get("status") == "True":
            return type_, parse_time(cond.get("lastTransitionTime"))
    return None
