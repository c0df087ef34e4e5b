"""What one decision of the dispatcher reads and what it asks for: the observed state of one Job, the actions to
take, why a Job waits, and the refusals recorded for the next decision. Shared by the decide steps (a Job placed
whole, a Job run as parts) and the executor that performs their actions.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from multiqueue.api.types import Event, Obj
from multiqueue.dispatch.placement import WaitReason, WorkerViews

# A worker whose request slots are all held by slow requests: act on it this much later.
WORKER_BUSY_RETRY: Final = 1.0
# Another write got there first, or the cache is behind what the server said: look again soon.
RETRY_SOON: Final = 0.05
# A mirror a worker says it has, and our cache does not show yet, is looked for again after this.
CACHE_WAIT: Final = 0.5
# A mirror the worker refused (or a status the management cluster refused) is tried again after this, doubling,
# up to REJECTED_RETRY_MAX.
REJECTED_RETRY: Final = 10.0
REJECTED_RETRY_MAX: Final = 300.0


def _retry_at(at: float, attempts: int) -> float:
    return at + min(REJECTED_RETRY_MAX, REJECTED_RETRY * 2.0 ** (attempts - 1))


@dataclasses.dataclass(frozen=True)
class Rejection:
    """A worker's answer to creating this Job's mirror there: refused, or a Job of that name already there."""

    worker: str
    reason: str  # the API Status reason (Invalid, Forbidden, AlreadyExists, ...)
    message: str
    at: float
    attempts: int = 1
    # Set when a Job of that name is already there: its origin label ("" when it carries none). None: refused.
    existing_origin: str | None = None

    def retry_at(self) -> float:
        return _retry_at(self.at, self.attempts)


@dataclasses.dataclass(frozen=True)
class StatusRejection:
    """The management cluster's refusal of a status written to the user's object (a CRD there whose schema is
    stricter than the worker's, say): that same status is not written again until its back-off has passed."""

    status: Obj
    reason: str  # the API Status reason (Invalid, Forbidden, ...)
    message: str
    at: float
    attempts: int = 1

    def retry_at(self) -> float:
        return _retry_at(self.at, self.attempts)


@dataclasses.dataclass(frozen=True)
class Observed:
    """What one sync sees of a Job: the user's object (None once it is gone), our mirrors of its name by worker,
    the workers, the worker's answers to earlier mirror creates, and the clock."""

    user: Obj | None
    mirrors: dict[str, Obj]
    workers: WorkerViews
    rejections: dict[str, Rejection]
    now: float
    turn: int = 0
    status_rejection: StatusRejection | None = None


@dataclasses.dataclass(frozen=True)
class Waiting:
    reason: WaitReason
    message: str
    candidates: frozenset[str] = frozenset()  # workers it waits for capacity on


@dataclasses.dataclass
class Actions:
    hold: dict[str, dict[str, float]] | None = None  # take this much of each worker's capacity now
    place_on: str | None = None  # add our finalizer and the cluster label: the commit point of a dispatch
    parts: str | None = None  # the parts it runs as, recorded with the placement or planned again
    redispatch: tuple[str, str] | None = None  # (lost worker, new worker): move the cluster label
    unplace: bool = False  # remove our finalizer and the cluster label: no mirror exists anywhere
    create_mirror: tuple[str, Obj] | None = None  # (worker, mirror)
    seed_progress: tuple[str, Obj] | None = None  # (worker, the mirror with the status it must start from)
    suspend_mirror: tuple[str, bool] | None = None  # resuming also drops the progress annotation
    scale_mirror: tuple[str, int] | None = (
        None  # (worker, parallelism): a part's share of a changed parallelism
    )
    status: Obj | None = None
    delete_mirrors: list[tuple[str, Obj]] = dataclasses.field(default_factory=list)
    remove_finalizer: bool = False
    events: list[Event] = dataclasses.field(default_factory=list)
    waiting: Waiting | None = None
    status_refused: bool = False
    requeue_after: float | None = None
