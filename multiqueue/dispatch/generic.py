"""GenericJob: what the dispatcher needs to know about a job-like kind, and nothing more.

A new kind is dispatched by writing one small adapter. Its core (:class:`GenericJob`) says where the kind lives in
the API, how to read its managedBy, suspended and finished state, how to build its mirror, how to suspend a mirror,
how the user's status follows the mirror's (or why it must not), and what pods it asks for. What a simple kind may
not have is an extra, found by type: a PriorityClass that ranks it among waiting Jobs, progress a new mirror goes
on from, a status to show while it waits to run again. Without an extra the dispatcher takes the default its
``*_of`` function names. The dispatcher never looks inside objects itself.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Protocol, cast, runtime_checkable

from multiqueue.api.compaction import compacted, without_nested_spec
from multiqueue.api.meta import as_dict, as_list, find_condition, parse_time
from multiqueue.api.quantities import parse_quantity
from multiqueue.api.types import Obj, Resource


@dataclasses.dataclass(frozen=True)
class PodSet:
    """A group of identical pods: how many run at once and what each requests."""

    name: str
    count: int
    requests: dict[str, float]  # one pod's, in base units (cpu in cores, memory in bytes)


@dataclasses.dataclass(frozen=True)
class Finish:
    """How a finished Job ended, from the condition that says so: its Events and how long its mirror is kept
    (``at``, seconds since the epoch; None when the condition carries no time)."""

    succeeded: bool
    reason: str
    message: str
    at: float | None


def finish_of(conditions: object, succeeded: str, failed: str) -> Finish | None:
    """The Finish a kind's ``succeeded`` or ``failed`` condition type records, once one of them is True."""
    for type_ in (succeeded, failed):
        found = find_condition(conditions, type_)
        if found is not None and found.get("status") == "True":
            when = parse_time(found.get("lastTransitionTime"))
            return Finish(
                type_ == succeeded,
                str(found.get("reason") or type_),
                str(found.get("message") or ""),
                when.timestamp() if when is not None else None,
            )
    return None


class StatusRefused(Exception):
    """The mirror's status cannot become the user's: the message says why."""


class GenericJob(Protocol):
    """What every kind must offer to be dispatched."""

    resource: Resource

    def managed_by(self, obj: Obj) -> str | None: ...

    def is_suspended(self, obj: Obj) -> bool: ...

    def is_finished(self, obj: Obj) -> bool: ...

    def finish(self, obj: Obj) -> Finish | None:
        """How it ended, once finished (None before)."""
        ...

    def build_mirror(self, obj: Obj, origin: str) -> Obj: ...

    def suspend_patch(self, suspend: bool) -> Obj: ...

    def synced_status(self, user: Obj, mirror: Obj) -> Obj | None: ...

    def pod_sets(self, obj: Obj) -> list[PodSet]: ...


@runtime_checkable
class JobWithPriorityClass(Protocol):
    """A kind whose Jobs name a PriorityClass."""

    def priority_class(self, obj: Obj) -> str | None:
        """The PriorityClass that orders this Job among those waiting for capacity."""
        ...


@runtime_checkable
class JobWithProgress(Protocol):
    """A kind whose Job can go on, on a new worker, from the work its lost mirror finished."""

    def progress(self, obj: Obj) -> Obj | None:
        """The status a new mirror must start from so that finished work is not run again (None: none)."""
        ...


@runtime_checkable
class JobWithRerunStatus(Protocol):
    """A kind whose status says what runs, so that a lost mirror's running pods must leave it."""

    def rerun_status(self, obj: Obj) -> Obj:
        """The user's status once the mirror that ran it is lost: nothing runs until the next mirror starts."""
        ...


def cached_user(adapter: GenericJob, job: Obj, previous: Obj | None) -> Obj:
    """What the manager keeps of a user's Job: all of it, compact, while it may still run; once finished, only the
    scalar fields of its spec (as of a mirror), as long as the adapter reads the same managedBy and suspend from
    them. Only making a mirror and counting the Job against a worker's capacity read the template and the rest,
    and a finished Job has neither again, while a manager may track a great many of them."""
    kept = compacted(job, previous)
    if not adapter.is_finished(kept):
        return kept
    slim = without_nested_spec(kept)
    if adapter.managed_by(slim) != adapter.managed_by(kept):
        return kept
    return slim if adapter.is_suspended(slim) == adapter.is_suspended(kept) else kept


@functools.cache
def _implements(cls: type, protocol: type) -> bool:
    """``isinstance(adapter, protocol)`` for an adapter of ``cls``, answered once per class: a check against a
    Protocol looks up each of its members, and every sync asks."""
    return issubclass(cls, protocol)


def priority_class_of(adapter: GenericJob, obj: Obj) -> str | None:
    """The Job's PriorityClass; None for a kind without them (it ranks as one without a PriorityClass)."""
    if not _implements(type(adapter), JobWithPriorityClass):
        return None
    return cast(JobWithPriorityClass, adapter).priority_class(obj)


def progress_of(adapter: GenericJob, obj: Obj) -> Obj | None:
    """The progress a new mirror starts from; None for a kind without it (the new mirror starts over)."""
    if not _implements(type(adapter), JobWithProgress):
        return None
    return cast(JobWithProgress, adapter).progress(obj)


def rerun_status_of(adapter: GenericJob, obj: Obj) -> Obj | None:
    """The user's status once its mirror is lost; None for a kind without it (the status stays until the next
    mirror's follows)."""
    if not _implements(type(adapter), JobWithRerunStatus):
        return None
    return cast(JobWithRerunStatus, adapter).rerun_status(obj)


def pod_requests(pod_template: object) -> dict[str, float]:
    """What one pod of ``pod_template`` (a PodTemplateSpec) requests, in base units: its containers' requests
    added up."""
    totals: dict[str, float] = {}
    for container in as_list(as_dict(as_dict(pod_template).get("spec")).get("containers")):
        for name, value in as_dict(as_dict(as_dict(container).get("resources")).get("requests")).items():
            amount = parse_quantity(str(value))
            if amount is not None:
                totals[str(name)] = totals.get(str(name), 0.0) + amount
    return totals


def demand(pod_sets: list[PodSet]) -> dict[str, float]:
    """What a Job asks of a worker's capacity: each resource's request times the pods that run at once."""
    total: dict[str, float] = {}
    for pod_set in pod_sets:
        for name, amount in pod_set.requests.items():
            total[name] = total.get(name, 0.0) + amount * pod_set.count
    return total
