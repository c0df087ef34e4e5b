"""Pausing Python's cyclic garbage collector around work that makes many objects with no reference cycles (decoded
JSON): the collections those objects set off would cost several times the work itself."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


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
