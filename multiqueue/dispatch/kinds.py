"""The kinds the dispatcher can dispatch, by the name a manager config uses for them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from multiqueue.dispatch.generic import BatchJobAdapter, GenericJob
from multiqueue.dispatch.jobgroup import JobGroupAdapter

ADAPTERS: Final[dict[str, Callable[[], GenericJob]]] = {
    "Job": BatchJobAdapter,
    "JobGroup": JobGroupAdapter,
}
