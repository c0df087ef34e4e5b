"""Where the parts of an Indexed Job that asked to be split go: the indexes still to run, cut into consecutive
ranges, one per worker, each as long as the share of the parallelism that worker can run now.

A Job is split only when no single worker can run all of its parallelism now and at least two can run some of
it; otherwise it is placed whole, as any Job. The parts never run an index twice: an index completed, failed
for good, or held by a part that goes on is in no new range.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence, Set

from multiqueue.api import indexes, jobs
from multiqueue.api.jobparts import divide
from multiqueue.api.meta import annotations_of
from multiqueue.api.types import Obj
from multiqueue.dispatch.mirror import PARTS_ANNOTATION, SPLIT_ANNOTATION


@dataclasses.dataclass(frozen=True)
class PartPlan:
    """One part: the worker, the indexes it runs (in completedIndexes syntax) and its share of parallelism."""

    worker: str
    indexes: str
    parallelism: int


@dataclasses.dataclass(frozen=True)
class Parts:
    """The parts a Job runs as, and the failures of parts it no longer runs (their workers were lost), which its
    status keeps counting."""

    plans: tuple[PartPlan, ...]
    carried_failed: int = 0

    def worker_of(self, index: int, completions: int) -> str | None:
        """The worker whose part runs ``index``; None when no part does (it ran on a worker that was lost)."""
        return next(
            (p.worker for p in self.plans if index in indexes.parse_indexes(p.indexes, completions)), None
        )

    def described(self) -> str:
        """``indexes 0-19 on worker worker-1, indexes 20-39 on worker worker-2``."""
        return ", ".join(f"indexes {p.indexes} on worker {p.worker}" for p in self.plans)

    def short(self) -> str:
        """``worker-1[0-19],worker-2[20-39]``: where each part runs, for a table's column."""
        return ",".join(f"{p.worker}[{p.indexes}]" for p in self.plans)

    def encoded(self) -> str:
        parts = {p.worker: {"indexes": p.indexes, "parallelism": p.parallelism} for p in self.plans}
        return json.dumps({"parts": parts, "carriedFailed": self.carried_failed}, separators=(",", ":"))


def parts_of(user: Obj) -> Parts | None:
    """The parts recorded on the user's Job; None when it runs whole (or the record cannot be read)."""
    text = annotations_of(user).get(PARTS_ANNOTATION)
    if text is None:
        return None
    try:
        found = json.loads(text)
        plans = tuple(
            PartPlan(str(worker), str(part["indexes"]), int(part["parallelism"]))
            for worker, part in found["parts"].items()
        )
        return Parts(plans, int(found.get("carriedFailed", 0)))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def wants_split(user: Obj) -> bool:
    """The user asked for it, on an Indexed Job with completions that may run now."""
    return (
        annotations_of(user).get(SPLIT_ANNOTATION) == "true"
        and jobs.is_indexed(user)
        and jobs.completions(user) is not None
        and not jobs.is_suspended(user)
    )


def pending_indexes(user: Obj, taken: Set[int] = frozenset()) -> list[int]:
    """The indexes no part has finished and none that goes on holds, ascending."""
    total = jobs.completions(user) or 0
    status = jobs.status_of(user)
    done = set(indexes.parse_indexes(str(status.get("completedIndexes") or ""), total))
    done |= set(indexes.parse_indexes(str(status.get("failedIndexes") or ""), total))
    return [i for i in range(total) if i not in done and i not in taken]


def plan_parts(
    user: Obj,
    room: Sequence[tuple[str, int]],
    max_parts: int,
    taken: Set[int] = frozenset(),
    wanted: int | None = None,
) -> list[PartPlan] | None:
    """The parts for ``user``'s pending indexes on the workers of ``room`` (best first, with how many of the
    Job's pods each can run now), at most ``max_parts``, running ``wanted`` pods (its parallelism); None when it
    is placed whole. With ``taken`` (the indexes of parts that go on) the rest is planned even on one worker."""
    pending = pending_indexes(user, taken)
    wanted = min(jobs.parallelism(user) if wanted is None else wanted, len(pending))
    usable = [(worker, pods) for worker, pods in room if pods > 0]
    if wanted <= 0 or not usable or (not taken and usable[0][1] >= wanted):
        return None
    shares: list[tuple[str, int]] = []
    left = wanted
    for worker, pods in usable[:max_parts]:
        if left == 0:
            break
        shares.append((worker, min(pods, left)))
        left -= shares[-1][1]
    if len(shares) < (1 if taken else 2):
        return None
    runs = divide(pending, [share for _, share in shares])
    return [
        PartPlan(worker, indexes.format_indexes(run), min(share, len(run)))
        for (worker, share), run in zip(shares, runs, strict=True)
        if run
    ]
