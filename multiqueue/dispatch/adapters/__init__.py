"""The kinds the dispatcher can dispatch, by the name a manager config uses for them: batch/v1 Job by its own adapter,
JobSet, the example JobGroup and any kind a config declares by the declared adapter."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from multiqueue.dispatch.adapters.declared import JOBGROUP, JOBSET, DeclaredAdapter, declared_kind
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.config import DeclaredKind, Kind
from multiqueue.dispatch.generic import GenericJob

ADAPTERS: Final[dict[str, Callable[[], GenericJob]]] = {
    "Job": BatchJobAdapter,
    "JobGroup": lambda: DeclaredAdapter(JOBGROUP),
    "JobSet": lambda: DeclaredAdapter(JOBSET),
}


def adapters_of(kinds: Sequence[Kind | DeclaredKind]) -> list[GenericJob]:
    """One adapter for each kind a manager config names or declares."""
    return [ADAPTERS[k]() if isinstance(k, str) else DeclaredAdapter(declared_kind(k)) for k in kinds]
