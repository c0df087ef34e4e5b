"""Per-key failure back-off for a work queue, as client-go's ItemExponentialFailureRateLimiter: each failure of a
key doubles its delay (5 ms doubling to 1000 s by default); success forgets the key. Kept apart from the queue so
the queue only orders keys and this only counts failures.
"""

from __future__ import annotations

import collections
from collections.abc import Hashable
from typing import Final, Generic, TypeVar

K = TypeVar("K", bound=Hashable)

BASE_DELAY: Final = 0.005
MAX_DELAY: Final = 1000.0


class ExponentialBackoff(Generic[K]):
    """How long a key that failed waits before it comes back."""

    def __init__(self, base_delay: float = BASE_DELAY, max_delay: float = MAX_DELAY) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: collections.Counter[K] = collections.Counter()

    def when(self, key: K) -> float:
        """Count one more failure of ``key``; the delay before it is tried again."""
        failures = self._failures[key]
        self._failures[key] += 1
        delay: float = min(self.max_delay, self.base_delay * (2**failures))
        return delay

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def requeues(self, key: K) -> int:
        return self._failures[key]
