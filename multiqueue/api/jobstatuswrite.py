"""One write to a batch/v1 Job's status subresource: the Job before and after, and what moved between them, read
as upstream reads it (absent counters are zero, times compare as instants, every condition entry counts).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Final

from multiqueue.api import jobs
from multiqueue.api.meta import as_dict, as_list, parse_time
from multiqueue.api.types import Obj

# Fields that are not pointers upstream read as their zero value when absent, so absent -> 0 is no change.
_STATUS_ZERO_VALUES: Final[Obj] = {"active": 0, "succeeded": 0, "failed": 0, "completedIndexes": ""}


@dataclasses.dataclass(frozen=True)
class StatusWrite:
    """One write to the status subresource: the Job before and after, and what moved between them."""

    new: Obj
    old: Obj

    @functools.cached_property
    def status(self) -> Obj:
        return jobs.status_of(self.new)

    @functools.cached_property
    def old_status(self) -> Obj:
        return jobs.status_of(self.old)

    @functools.cached_property
    def _conditions(self) -> frozenset[tuple[str, str]]:
        return _conditions(self.new)

    @functools.cached_property
    def _old_conditions(self) -> frozenset[tuple[str, str]]:
        return _conditions(self.old)

    @property
    def spec(self) -> Obj:
        return jobs.spec_of(self.new)

    def changed(self, field: str) -> bool:
        zero = _STATUS_ZERO_VALUES.get(field)
        return bool(self.status.get(field, zero) != self.old_status.get(field, zero))

    def has(self, type_: str) -> bool:
        return (type_, "True") in self._conditions

    def had(self, type_: str) -> bool:
        return (type_, "True") in self._old_conditions

    def time_changed(self, field: str) -> bool:
        """Times compare as instants (upstream decodes them), so a different spelling is no change."""
        new, old = self.status.get(field), self.old_status.get(field)
        return parse_time(new) != parse_time(old) if new is not None and old is not None else new != old

    @property
    def resuming(self) -> bool:
        """Suspended was True and is now False (present with that status, not merely gone)."""
        return self.had(jobs.SUSPENDED) and (jobs.SUSPENDED, "False") in self._conditions

    def flipped(self, *types: str) -> bool:
        return any(self.has(t) != self.had(t) for t in types)

    @property
    def finished(self) -> bool:
        return self.has(jobs.COMPLETE) or self.has(jobs.FAILED)

    @property
    def finished_changed(self) -> bool:
        return self.finished != (self.had(jobs.COMPLETE) or self.had(jobs.FAILED))

    @property
    def uncounted_changed(self) -> bool:
        """An absent list equals an empty one, but an absent uncountedTerminatedPods differs from ``{}``."""
        new, old = self.status.get("uncountedTerminatedPods"), self.old_status.get("uncountedTerminatedPods")
        if new is None or old is None:
            return (new is None) != (old is None)
        return any(
            as_list(as_dict(new).get(k)) != as_list(as_dict(old).get(k)) for k in ("succeeded", "failed")
        )


def _conditions(job: Obj) -> frozenset[tuple[str, str]]:
    """Each (type, status) that a condition entry of the Job holds: upstream looks at every entry, not only the
    first of a type. Read once per write, as the rules ask about them dozens of times."""
    found = set()
    for condition in jobs.conditions_of(job):
        type_, status = as_dict(condition).get("type"), as_dict(condition).get("status")
        if isinstance(type_, str) and isinstance(status, str):
            found.add((type_, status))
    return frozenset(found)
