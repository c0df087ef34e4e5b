"""The kinds the dispatcher can dispatch, one adapter a file, by the name a manager config uses for them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from multiqueue.dispatch.adapters.declared import JOBGROUP, JOBSET, DeclaredAdapter
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.generic import GenericJob

ADAPTERS: Final[dict[str, Callable[[], GenericJob]]] = {
    "Job": BatchJobAdapter,
    "JobGroup": lambda: DeclaredAdapter(JOBGROUP),
    "JobSet": lambda: DeclaredAdapter(JOBSET),
}
