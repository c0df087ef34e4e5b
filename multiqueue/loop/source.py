"""What feeds a controller: a source of change events (an informer's cache on the client side, the store's commits
in the embedded server) and the handlers that turn its events into keys.

Defined here, on the ground floor, as a Protocol, so both sides' sources fit without this package importing them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

H = TypeVar("H")
H_contra = TypeVar("H_contra", contravariant=True)

# Called once, it stops a subscription: the handlers are not called again.
Unsubscribe = Callable[[], None]


class Source(Protocol[H_contra]):
    """Anything that calls handlers on changes and can say when its cache is complete."""

    def add_handlers(self, handlers: H_contra, /) -> Unsubscribe:
        """Call ``handlers`` on every change from now on (and, for a cache, on what it holds already)."""
        ...

    async def wait_for_sync(self) -> None:
        """Return once the cache holds everything there is (at once for a source that is its own store)."""
        ...


@dataclasses.dataclass(frozen=True)
class Feed(Generic[H]):
    """One source of a controller and how its events become keys: ``handlers`` only enqueue, never await."""

    source: Source[H]
    handlers: H
