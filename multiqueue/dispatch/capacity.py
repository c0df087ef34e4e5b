"""One capacity ledger for every kind a manager dispatches: what each worker runs, and who waits, in what order.

A Job holds its worker's capacity from the moment it is placed (before any request is sent, so concurrent syncs
never place past a limit) until it finishes or goes. Jobs that wait are kept in rank order (higher priority
first, then older); a Job waiting for capacity names the workers it would fit on, and no Job ranked after it may
take capacity on those workers. So a freed slot goes to the highest-ranked Job that wants it, whichever sync
happens to run first.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Final

from multiqueue.api.meta import labels_of, metadata
from multiqueue.api.types import Obj
from multiqueue.dispatch.generic import GenericJob, PodSet, demand
from multiqueue.dispatch.mirror import CLUSTER_LABEL, Identity
from multiqueue.dispatch.split import parts_of

Key = tuple[str, str]  # (kind, "namespace/name")
Rank = tuple[int, str, str, str]  # (-priority, creationTimestamp, kind, "namespace/name")


def rank_of(key: Key, priority: int, created: str) -> Rank:
    return (-priority, created, key[0], key[1])


def held_on(adapter: GenericJob, identity: Identity, user: Obj) -> dict[str, dict[str, float]]:
    """What the user's Job holds of each worker, by worker: while it is unfinished and not being deleted, all it
    asks of the worker it is placed on, or, run as parts, each part's share of it on the part's worker. The ledger
    of a running manager and ``multiqueue status`` both count by this rule."""
    worker = labels_of(user).get(CLUSTER_LABEL)
    if worker is None or not identity.holds(user) or adapter.is_finished(user):
        return {}
    if metadata(user).get("deletionTimestamp"):
        return {}
    parts = parts_of(user)
    if parts is None:
        return {worker: demand(adapter.pod_sets(user))}
    pod_sets = adapter.pod_sets(user)
    return {
        plan.worker: demand([PodSet(s.name, plan.parallelism, s.requests) for s in pod_sets])
        for plan in parts.plans
    }


@dataclasses.dataclass(frozen=True)
class Usage:
    """What the Jobs placed on one worker take of it."""

    jobs: int = 0
    used: dict[str, float] = dataclasses.field(default_factory=dict)


# What a worker no Job is placed on has used: one object, so that a view of that worker can be kept while the
# ledger gives the same object for it.
NOTHING_USED: Final = Usage()


class Ledger:
    def __init__(self) -> None:
        self._placed: dict[Key, dict[str, dict[str, float]]] = {}
        self._usage: dict[str, Usage] = {}
        # Waiting Jobs: key -> (rank, workers it waits for capacity on); and the ranks, sorted.
        self._waiting: dict[Key, tuple[Rank, frozenset[str]]] = {}
        self._order: list[Rank] = []

    # --- placed Jobs -------------------------------------------------------------------------------------------

    def hold(self, key: Key, holdings: Mapping[str, dict[str, float]]) -> list[str]:
        """``key`` runs on the workers of ``holdings``, asking each its demand; it no longer waits. The workers it
        held before and holds no more."""
        self.unwait(key)
        if self._placed.get(key) == holdings:
            return []
        before = self._placed.pop(key, {})
        for worker, asked in before.items():
            self._add(worker, asked, -1)
        self._placed[key] = {worker: dict(asked) for worker, asked in holdings.items()}
        for worker, asked in holdings.items():
            self._add(worker, asked, 1)
        return [worker for worker in before if worker not in holdings]

    def release(self, key: Key) -> list[str]:
        """``key`` no longer holds capacity; the workers it held."""
        found = self._placed.pop(key, {})
        for worker, asked in found.items():
            self._add(worker, asked, -1)
        return list(found)

    def usage(self, worker: str) -> Usage:
        """What the Jobs placed on ``worker`` use: a new object each time that changes, the same one until then."""
        return self._usage.get(worker, NOTHING_USED)

    def placed_on(self, worker: str) -> list[Key]:
        return [key for key, held in self._placed.items() if worker in held]

    def _add(self, worker: str, demand: dict[str, float], sign: int) -> None:
        usage = self._usage.get(worker, NOTHING_USED)
        used = dict(usage.used)
        for resource, amount in demand.items():
            used[resource] = used.get(resource, 0.0) + sign * amount
        self._usage[worker] = Usage(usage.jobs + sign, used)

    # --- waiting Jobs ------------------------------------------------------------------------------------------

    def wait(self, key: Key, rank: Rank, candidates: frozenset[str]) -> None:
        """``key`` waits; for capacity on ``candidates`` (empty: for something else, such as a matching worker)."""
        if self._waiting.get(key) == (rank, candidates):
            return
        self.unwait(key)
        self._waiting[key] = (rank, candidates)
        bisect.insort(self._order, rank)

    def unwait(self, key: Key) -> None:
        found = self._waiting.pop(key, None)
        if found is not None:
            index = bisect.bisect_left(self._order, found[0])
            if index < len(self._order) and self._order[index] == found[0]:
                del self._order[index]

    @property
    def waiting_count(self) -> int:
        return len(self._waiting)

    def is_waiting(self, key: Key) -> bool:
        return key in self._waiting

    def held_for_others(self, rank: Rank, workers: frozenset[str]) -> frozenset[str]:
        """Those of ``workers`` whose capacity a waiting Job ranked before ``rank`` asks for first."""
        held: set[str] = set()
        for other in self._order:
            if other >= rank or held >= workers:
                break
            held |= self._waiting[(other[2], other[3])][1] & workers
        return frozenset(held)

    def waiting(self, worker: str | None = None) -> Iterator[Key]:
        """Waiting Jobs in rank order: all of them, or those waiting for capacity on ``worker``."""
        for rank in list(self._order):
            key = (rank[2], rank[3])
            found = self._waiting.get(key)
            if found is not None and (worker is None or worker in found[1]):
                yield key
