"""GenericJob: what the dispatcher needs to know about a job-like kind, and nothing more.

A new kind is dispatched by writing one small adapter: where it lives in the API, how to read its managedBy,
suspended and finished state, how to build its mirror, how to suspend a mirror, how the user's status follows
the mirror's (or why it must not), and what pods it asks for. The dispatcher never looks inside objects itself.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Final, Protocol

from multiqueue.api import jobs
from multiqueue.api.meta import annotations_of, as_dict, as_list, condition_is_true, labels_of, metadata
from multiqueue.api.quantities import parse_quantity
from multiqueue.api.types import JOBS, Obj, Resource

ORIGIN_LABEL: Final = "multiqueue.dev/origin"
ORIGIN_UID_ANNOTATION: Final = "multiqueue.dev/origin-uid"
CLUSTER_LABEL: Final = "multiqueue.dev/cluster"
CLUSTER_SELECTOR_ANNOTATION: Final = "multiqueue.dev/cluster-selector"
MIRROR_FINALIZER: Final = "multiqueue.dev/mirror"


@dataclasses.dataclass(frozen=True)
class PodSet:
    """A group of identical pods: how many run at once and what each requests."""

    name: str
    count: int
    requests: dict[str, str]


class StatusRefused(Exception):
    """The mirror's status cannot become the user's: the message says why."""


class GenericJob(Protocol):
    resource: Resource

    def managed_by(self, obj: Obj) -> str | None: ...

    def is_suspended(self, obj: Obj) -> bool: ...

    def is_finished(self, obj: Obj) -> bool: ...

    def build_mirror(self, obj: Obj, origin: str) -> Obj: ...

    def suspend_patch(self, suspend: bool) -> Obj: ...

    def synced_status(self, user: Obj, mirror: Obj) -> Obj | None: ...

    def pod_sets(self, obj: Obj) -> list[PodSet]: ...

    def priority_class(self, obj: Obj) -> str | None:
        """The PriorityClass that orders this Job among those waiting for capacity."""
        ...

    def progress(self, obj: Obj) -> Obj | None:
        """The status a new mirror must start from so that finished work is not run again (None: none)."""
        ...

    def rerun_status(self, obj: Obj) -> Obj:
        """The user's status once the mirror that ran it is lost: nothing runs until the next mirror starts."""
        ...


def strip_for_mirror(obj: Obj, origin: str) -> Obj:
    """The user's object as a fresh object for another cluster: same name and namespace, our origin marks."""
    mirror = copy.deepcopy(obj)
    mirror.pop("status", None)
    meta = as_dict(mirror.get("metadata"))
    kept = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    labels = {k: v for k, v in labels_of(obj).items() if k != CLUSTER_LABEL}
    labels[ORIGIN_LABEL] = origin
    kept["labels"] = labels
    annotations = {
        k: v
        for k, v in annotations_of(obj).items()
        if k != "kubectl.kubernetes.io/last-applied-configuration"
    }
    annotations[ORIGIN_UID_ANNOTATION] = str(meta.get("uid", ""))
    kept["annotations"] = annotations
    mirror["metadata"] = kept
    return mirror


class BatchJobAdapter:
    """batch/v1 Job."""

    resource = JOBS

    def managed_by(self, obj: Obj) -> str | None:
        return jobs.managed_by(obj)

    def is_suspended(self, obj: Obj) -> bool:
        return jobs.is_suspended(obj)

    def is_finished(self, obj: Obj) -> bool:
        return jobs.is_finished(obj)

    def build_mirror(self, obj: Obj, origin: str) -> Obj:
        """managedBy removed so the worker's Job controller runs it; the generated selector and labels dropped so
        the worker generates its own for the mirror's new UID; the user's TTL stays on the user's Job."""
        mirror = strip_for_mirror(obj, origin)
        spec = as_dict(mirror.get("spec"))
        spec.pop("managedBy", None)
        spec.pop("ttlSecondsAfterFinished", None)
        spec["suspend"] = False
        if spec.get("manualSelector") is not True:
            spec.pop("selector", None)
            spec.pop("manualSelector", None)
            template_meta = as_dict(as_dict(spec.get("template")).get("metadata"))
            # Defaulting copied them onto the Job's own labels too; both name the user's Job, not the mirror.
            for labels in (
                as_dict(template_meta.get("labels")),
                as_dict(as_dict(mirror.get("metadata")).get("labels")),
            ):
                for generated in (
                    jobs.CONTROLLER_UID_LABEL,
                    jobs.LEGACY_CONTROLLER_UID_LABEL,
                    jobs.JOB_NAME_LABEL,
                    jobs.LEGACY_JOB_NAME_LABEL,
                ):
                    labels.pop(generated, None)
        return mirror

    def suspend_patch(self, suspend: bool) -> Obj:
        return {"spec": {"suspend": suspend}}

    def synced_status(self, user: Obj, mirror: Obj) -> Obj | None:
        """The mirror's status as the user's, or None when nothing changed; StatusRefused when it would break
        the Job status rules (the user's last valid status then stays)."""
        status = copy.deepcopy(jobs.status_of(mirror))
        # Pod UIDs of the worker mean nothing on the management cluster; counts carry the information.
        status.pop("uncountedTerminatedPods", None)
        mine = jobs.status_of(user)
        if (
            mine.get("startTime")
            and not jobs.is_suspended(user)
            and not condition_is_true(as_list(mine.get("conditions")), "Suspended")
        ):
            # A running Job keeps its start time when a later mirror (after a lost worker) takes over.
            status["startTime"] = mine["startTime"]
        if status == {k: v for k, v in jobs.status_of(user).items() if k != "uncountedTerminatedPods"}:
            return None
        new = {**user, "status": status}
        problems = jobs.validate_job_status_update(new, user)
        if problems:
            raise StatusRefused("; ".join(str(p) for p in problems))
        return status

    def pod_sets(self, obj: Obj) -> list[PodSet]:
        spec = jobs.spec_of(obj)
        pod_spec = as_dict(as_dict(spec.get("template")).get("spec"))
        requests: dict[str, str] = {}
        for container in as_list(pod_spec.get("containers")):
            for name, value in as_dict(as_dict(as_dict(container).get("resources")).get("requests")).items():
                requests[str(name)] = str(value)
        count = jobs.parallelism(obj)
        total = jobs.completions(obj)
        if total is not None:
            count = min(count, total)
        return [PodSet("main", count, requests)]

    def priority_class(self, obj: Obj) -> str | None:
        pod_spec = as_dict(as_dict(jobs.spec_of(obj).get("template")).get("spec"))
        name = pod_spec.get("priorityClassName")
        return name if isinstance(name, str) and name else None

    def progress(self, obj: Obj) -> Obj | None:
        status = jobs.status_of(obj)
        kept = {
            k: status[k]
            for k in ("succeeded", "failed", "completedIndexes", "failedIndexes")
            if status.get(k)
        }
        return kept or None

    def rerun_status(self, obj: Obj) -> Obj:
        status = copy.deepcopy(jobs.status_of(obj))
        status["active"] = 0
        for gauge in ("ready", "terminating"):
            if gauge in status:
                status[gauge] = 0
        return status


def demand(pod_sets: list[PodSet]) -> dict[str, float]:
    """What a Job asks of a worker's capacity: each resource's request times the pods that run at once."""
    total: dict[str, float] = {}
    for pod_set in pod_sets:
        for name, value in pod_set.requests.items():
            amount = parse_quantity(value)
            if amount is not None:
                total[name] = total.get(name, 0.0) + amount * pod_set.count
    return total


def mirror_identity(mirror: Obj) -> tuple[str, str]:
    """(origin manager, origin UID) a mirror carries; empty strings when it is not a mirror."""
    return labels_of(mirror).get(ORIGIN_LABEL, ""), annotations_of(mirror).get(ORIGIN_UID_ANNOTATION, "")


def is_mirror_of(mirror: Obj, user: Obj, origin: str) -> bool:
    return mirror_identity(mirror) == (origin, str(metadata(user).get("uid", "")))
