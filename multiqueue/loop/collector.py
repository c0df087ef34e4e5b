"""Python's cyclic garbage collector, tuned for work that makes many objects with no reference cycles (decoded
JSON): paused around one large piece of it, and set for a long-running process that does much of it, since the
collections those objects set off would cost several times the work itself."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Final

# Young objects are collected after this many more allocations than frees (Python's default is 700); each decoded
# watch event or answer makes a few hundred, nearly all freed by their reference counts.
YOUNG_THRESHOLD: Final = 20_000
# Collections of the young generation per collection of the middle one, and of the middle per full (10 and 10).
MIDDLE_THRESHOLD: Final = 50
OLD_THRESHOLD: Final = 100


def settle() -> None:
    """For a long-running process, once started: what starting it made (modules, caches, the first listings) is
    kept out of every later collection, and the young generation is collected far less often. Measured on the
    manager (tests/bench/dispatch_scale.py, 1,000 Jobs): about 4% less CPU per Job."""
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No collection inside the block; the collector is left as it was found (a pause inside a pause stays one)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
