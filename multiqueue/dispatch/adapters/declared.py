"""One GenericJob adapter for any job-like kind whose controller honours ``spec.managedBy``, told by a declaration
where the kind keeps what the dispatcher reads, instead of by code.

The defaults are JobSet's (``jobset.x-k8s.io/v1alpha2``): ``spec.managedBy`` and ``spec.suspend``, finished by a
``Completed`` or ``Failed`` condition, pods in ``spec.replicatedJobs`` (each entry's replicas times its Job template's
parallelism pods of the Job template's pod template), ``status.restarts`` carried to a new mirror after a worker
loss. A kind that differs names its own paths. The mirror is the user's object with managedBy removed and suspend
false; the user's status follows the mirror's whole, except that a terminal condition once True never goes back.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from multiqueue.api import fastjson
from multiqueue.api.meta import as_dict, as_list, condition_is_true
from multiqueue.api.types import Obj, Resource
from multiqueue.dispatch.config import DeclaredKind as KindConfig
from multiqueue.dispatch.generic import Finish, PodSet, StatusRefused, finish_of, pod_requests
from multiqueue.dispatch.mirror import strip_for_mirror

Path = tuple[str, ...]  # keys from the object's root; EACH steps into every item of a list
EACH: Final = "*"


@dataclasses.dataclass(frozen=True)
class DeclaredKind:
    """Where a job-like kind keeps what the dispatcher reads."""

    resource: Resource
    managed_by: Path = ("spec", "managedBy")
    suspend: Path = ("spec", "suspend")
    succeeded: str = "Completed"  # the condition type that says it succeeded
    failed: str = "Failed"
    # The groups of pods: a list whose entries have ``replicas`` and a batch/v1 JobTemplateSpec ``template``.
    replicated_jobs: Path = ("spec", "replicatedJobs")
    # Where its PriorityClass is named; None: the first pod template's spec.priorityClassName.
    priority_class: Path | None = None
    # Status fields that count what runs: 0 once the mirror that ran them is lost.
    running: tuple[Path, ...] = (
        ("status", "replicatedJobsStatus", EACH, "active"),
        ("status", "replicatedJobsStatus", EACH, "ready"),
    )
    # Status fields a mirror made after a worker loss starts from (its controller counts on from them).
    progress: tuple[str, ...] = ("restarts", "restartsCountTowardsMax")


def read(obj: object, path: Path) -> list[Any]:
    """Every value at ``path`` (several where it steps through lists; none where it is missing)."""
    found: list[Any] = [obj]
    for key in path:
        step: list[Any] = []
        for value in found:
            if key == EACH:
                step.extend(as_list(value))
            elif isinstance(value, dict) and key in value:
                step.append(value[key])
        found = step
    return found


def holders(obj: object, path: Path) -> tuple[list[dict[str, Any]], str]:
    """The objects that hold the last key of ``path`` (or would), and that key: where a field is set or removed."""
    *parent, last = path
    return [h for h in read(obj, tuple(parent)) if isinstance(h, dict)], last


class DeclaredAdapter:
    """The adapter of a :class:`DeclaredKind`: the GenericJob core, a PriorityClass and a status for a rerun."""

    def __init__(self, kind: DeclaredKind) -> None:
        self.kind = kind
        self.resource = kind.resource

    def managed_by(self, obj: Obj) -> str | None:
        value = next(iter(read(obj, self.kind.managed_by)), None)
        return value if isinstance(value, str) and value else None

    def is_suspended(self, obj: Obj) -> bool:
        return next(iter(read(obj, self.kind.suspend)), None) is True

    def is_finished(self, obj: Obj) -> bool:
        conditions = _conditions(obj)
        return any(condition_is_true(conditions, c) for c in (self.kind.succeeded, self.kind.failed))

    def finish(self, obj: Obj) -> Finish | None:
        return finish_of(_conditions(obj), self.kind.succeeded, self.kind.failed)

    def build_mirror(self, obj: Obj, origin: str) -> Obj:
        mirror = strip_for_mirror(obj, origin)
        found, key = holders(mirror, self.kind.managed_by)
        for holder in found:
            holder.pop(key, None)
        found, key = holders(mirror, self.kind.suspend)
        for holder in found:
            holder[key] = False
        return mirror

    def suspend_patch(self, suspend: bool) -> Obj:
        patch: Obj = {}
        *parent, last = self.kind.suspend
        holder = patch
        for key in parent:
            holder = holder.setdefault(key, {})
        holder[last] = suspend
        return patch

    def synced_status(self, user: Obj, mirror: Obj) -> Obj | None:
        status: Obj = fastjson.copied(as_dict(mirror.get("status")))
        if status == as_dict(user.get("status")):
            return None
        for terminal in (self.kind.succeeded, self.kind.failed):
            if condition_is_true(_conditions(user), terminal) and not condition_is_true(
                status.get("conditions"), terminal
            ):
                raise StatusRefused(f"cannot disable the terminal {terminal}=True condition")
        return status

    def pod_sets(self, obj: Obj) -> list[PodSet]:
        sets = []
        for replicated in read(obj, (*self.kind.replicated_jobs, EACH)):
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
        path = self.kind.priority_class or (
            *self.kind.replicated_jobs,
            EACH,
            "template",
            "spec",
            "template",
            "spec",
            "priorityClassName",
        )
        name = next((n for n in read(obj, path) if isinstance(n, str) and n), None)
        return name

    def progress(self, obj: Obj) -> Obj | None:
        status = as_dict(obj.get("status"))
        kept = {k: status[k] for k in self.kind.progress if status.get(k)}
        return kept or None

    def rerun_status(self, obj: Obj) -> Obj:
        """Its status with every count of what runs at 0 where it was counted (a kind's schema may require the
        field, as JobSet's replicatedJobsStatus does): nothing runs until the next mirror starts."""
        status: Obj = fastjson.copied(as_dict(obj.get("status")))
        rerun = {"status": status}
        for path in self.kind.running:
            found, key = holders(rerun, path)
            for holder in found:
                if key in holder:
                    holder[key] = 0
        return status


def _conditions(obj: Obj) -> list[Any]:
    return as_list(as_dict(obj.get("status")).get("conditions"))


JOBSET: Final = DeclaredKind(Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet"))
# The example kind of examples/jobgroup-crd.yaml: JobSet's shape, a PriorityClass of its own and one count of what
# runs.
JOBGROUP: Final = DeclaredKind(
    Resource("example.multiqueue.dev", "v1", "jobgroups", "JobGroup"),
    priority_class=("spec", "priorityClassName"),
    running=(("status", "active"),),
)


def path_of(text: str) -> Path:
    """``status.items[].active`` as a :data:`Path`."""
    steps: list[str] = []
    for part in text.split("."):
        name, each, _ = part.partition("[]")
        steps.append(name)
        if each:
            steps.append(EACH)
    return tuple(steps)


def declared_kind(config: KindConfig) -> DeclaredKind:
    """The declaration a manager config gives of a kind."""
    return DeclaredKind(
        Resource(config.group, config.version, config.plural, config.kind),
        managed_by=path_of(config.managed_by),
        suspend=path_of(config.suspend),
        succeeded=config.succeeded_condition,
        failed=config.failed_condition,
        replicated_jobs=path_of(config.replicated_jobs),
        priority_class=path_of(config.priority_class) if config.priority_class is not None else None,
        running=tuple(path_of(p) for p in config.running),
        progress=tuple(config.progress),
    )
