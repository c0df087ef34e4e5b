"""A controller, declared: what it is called, what feeds it, what its caches hold, how it syncs one key, and how
many workers do that. :class:`multiqueue.loop.runner.Runner` runs it."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable, Sequence
from typing import Any, Generic, TypeVar

from multiqueue.loop.source import Feed

K = TypeVar("K", bound=Hashable)


def _nothing_cached() -> Iterable[Any]:
    return ()


@dataclasses.dataclass(frozen=True)
class Controller(Generic[K]):
    """``sync(key)`` returns the seconds until the key is due again, or None (see
    :func:`multiqueue.loop.reconcile.reconcile`).

    ``cached`` gives the keys of everything the sources' caches hold: each term starts by queueing them, so a new
    leader (or a test that moved a clock) looks at everything once. ``prepare`` runs once the sources have synced,
    before the workers start; ``beside`` runs next to the workers for as long as they do (a periodic sweep).
    """

    name: str
    sync: Callable[[K], Awaitable[float | None]]
    workers: int = 1
    feeds: Sequence[Feed[Any]] = ()
    cached: Callable[[], Iterable[K]] = _nothing_cached
    prepare: Callable[[], Awaitable[None]] | None = None
    beside: Callable[[], Coroutine[Any, Any, None]] | None = None
