"""Facts about one pod of a Job that every step of the Job controller's decision reads.

Whether the Job still tracks the pod (its finalizer), whether the pod has finished as far as the Job is
concerned, and which completion index it holds. Pure functions of the pod and its Job.
"""

from __future__ import annotations

from typing import Final

from multiqueue.api import jobs, pods
from multiqueue.api.meta import annotations_of, as_list, metadata
from multiqueue.api.types import Obj

INDEX_IGNORED_FAILURE_COUNT: Final = "batch.kubernetes.io/job-index-ignored-failure-count"


def has_tracking_finalizer(pod: Obj) -> bool:
    """Whether the Job has yet to count ``pod``: the finalizer holds the pod until its end is recorded."""
    return jobs.TRACKING_FINALIZER in as_list(metadata(pod).get("finalizers"))


def counts_as_failed(pod: Obj, job: Obj) -> bool:
    """Whether ``pod`` is a failure of ``job``: failed, or deleted before it finished."""
    if pods.phase(pod) == pods.FAILED:
        return True
    if pods.phase(pod) == pods.SUCCEEDED or not pods.is_deleting(pod):
        return False
    # A deleted pod that never finished fails once it is gone, unless only failed pods are replaced: then it
    # counts when its phase says so.
    return jobs.spec_of(job).get("podReplacementPolicy") != jobs.FAILED_ONLY


def has_finished(pod: Obj, job: Obj) -> bool:
    """Whether ``pod`` is done as far as ``job`` is concerned: succeeded, or a failure."""
    return pods.phase(pod) == pods.SUCCEEDED or counts_as_failed(pod, job)


def index_of(pod: Obj, job: Obj) -> int | None:
    """The completion index ``pod`` holds, when it is a valid index of ``job``."""
    index = pods.completion_index(pod)
    total = jobs.completions(job)
    if index is None or total is None or index >= total:
        return None
    return index


def index_failure_count(pod: Obj) -> int:
    """The failures of its index before ``pod`` was made (backoffLimitPerIndex), from its annotation."""
    value = annotations_of(pod).get(jobs.INDEX_FAILURE_COUNT, "0")
    return int(value) if str(value).isdigit() else 0


def ignored_failure_count(pod: Obj) -> int:
    """The failures of its index the pod failure policy ignored before ``pod`` was made, from its annotation."""
    value = annotations_of(pod).get(INDEX_IGNORED_FAILURE_COUNT, "0")
    return int(value) if str(value).isdigit() else 0
