"""The GenericJob adapter of the example JobGroup kind (examples/jobgroup-crd.yaml).

All the dispatcher needs to dispatch a kind it has never seen: where it lives, how to read its state, how to make
and suspend its mirror, and when a mirror's status may become the user's. Of the extras it has a PriorityClass and
a status to show once its mirror is lost; it has no progress to go on from, so a new mirror starts over.
"""

from __future__ import annotations

import copy
from typing import Any

from multiqueue.api.meta import as_dict, as_list, condition_is_true
from multiqueue.api.types import Obj, Resource
from multiqueue.dispatch.generic import Finish, PodSet, StatusRefused, finish_of, pod_requests
from multiqueue.dispatch.mirror import strip_for_mirror

TERMINAL = ("Completed", "Failed")


def _conditions(obj: Obj) -> list[Any]:
    return as_list(as_dict(obj.get("status")).get("conditions"))


class JobGroupAdapter:
    resource = Resource("example.multiqueue.dev", "v1", "jobgroups", "JobGroup")

    def managed_by(self, obj: Obj) -> str | None:
        value = as_dict(obj.get("spec")).get("managedBy")
        return value if isinstance(value, str) and value else None

    def is_suspended(self, obj: Obj) -> bool:
        return as_dict(obj.get("spec")).get("suspend") is True

    def is_finished(self, obj: Obj) -> bool:
        return any(condition_is_true(_conditions(obj), c) for c in TERMINAL)

    def finish(self, obj: Obj) -> Finish | None:
        return finish_of(_conditions(obj), *TERMINAL)

    def build_mirror(self, obj: Obj, origin: str) -> Obj:
        mirror = strip_for_mirror(obj, origin)
        spec = as_dict(mirror.get("spec"))
        spec.pop("managedBy", None)
        spec["suspend"] = False
        return mirror

    def suspend_patch(self, suspend: bool) -> Obj:
        return {"spec": {"suspend": suspend}}

    def synced_status(self, user: Obj, mirror: Obj) -> Obj | None:
        status = copy.deepcopy(as_dict(mirror.get("status")))
        if status == as_dict(user.get("status")):
            return None
        for terminal in TERMINAL:
            if condition_is_true(_conditions(user), terminal) and not condition_is_true(
                status.get("conditions"), terminal
            ):
                raise StatusRefused(f"cannot disable the terminal {terminal}=True condition")
        return status

    def pod_sets(self, obj: Obj) -> list[PodSet]:
        sets = []
        for replicated in as_list(as_dict(obj.get("spec")).get("replicatedJobs")):
            entry = as_dict(replicated)
            job_spec = as_dict(as_dict(entry.get("template")).get("spec"))
            parallelism = job_spec.get("parallelism", 1)
            replicas = entry.get("replicas", 1)
            count = (replicas if isinstance(replicas, int) else 1) * (
                parallelism if isinstance(parallelism, int) else 1
            )
            sets.append(PodSet(str(entry.get("name", "")), count, pod_requests(job_spec.get("template"))))
        return sets

    def priority_class(self, obj: Obj) -> str | None:
        name = as_dict(obj.get("spec")).get("priorityClassName")
        return name if isinstance(name, str) and name else None

    def rerun_status(self, obj: Obj) -> Obj:
        status = copy.deepcopy(as_dict(obj.get("status")))
        status.pop("active", None)
        return status
