"""Which Job controls a pod, and when a pod's tracking finalizer comes off outside any Job's sync.

The decision behind the controller's orphan-pod queue: a pod still tracked after its Job is gone, replaced or
finished would otherwise never be deleted.
"""

from __future__ import annotations

from typing import Final

from multiqueue.api import jobs
from multiqueue.api.meta import controller_ref, uid_of
from multiqueue.api.types import Obj
from multiqueue.controllers.job_pod_facts import has_tracking_finalizer

JOB_API_VERSION: Final = "batch/v1"


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
