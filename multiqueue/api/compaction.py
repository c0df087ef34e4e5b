"""Smaller copies of objects for caches that hold many of them.

A cached object is mostly small dicts and short strings, and the same strings recur: a Job's UID appears in its
selector and in its template's labels, its name in labels, and values such as ``Never`` or ``default`` in every
Job. Interning makes each such string one object however often it recurs; dropping managedFields removes what a
cache's readers never look at (an update sent without them leaves the server's as they are). Small maps of strings
recur whole across objects (a label set, an empty map, the conditions of Jobs that finished in the same second):
each such map seen lately is held once too. Readers of a cache never change what it holds, so sharing is safe.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Final

from multiqueue.api.fastjson import dumps
from multiqueue.api.types import Obj


def compacted(obj: Obj, previous: Obj | None = None) -> Obj:
    """A copy of ``obj`` without ``metadata.managedFields`` whose string values are interned. A top-level field
    that is the same as in ``previous`` (the copy kept of the object's last version) is ``previous``'s: an update
    of the status costs one comparison of the spec, not a second copy of it."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    kept = previous or {}
    return {k: kept[k] if k in kept and _same(kept[k], v) else _interned(v) for k, v in obj.items()}


def without_nested_spec(obj: Obj) -> Obj:
    """``obj`` with only the scalar fields of its spec (``suspend``, ``completions``, ...): what a reader of
    another controller's copy needs, without its pod templates, selectors and policies."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return obj
    return {**obj, "spec": {k: v for k, v in spec.items() if not isinstance(v, (dict, list))}}


def _same(kept: Any, value: Any) -> bool:
    """Equal as JSON. Python's ``==`` is not that (``1 == True``), and comparing the encodings in C costs far less
    than interning the value again."""
    return type(kept) is type(value) and (
        kept == value if isinstance(value, str) else dumps(kept) == dumps(value)
    )


SHARED_KEPT: Final = 4096


def _interned(value: Any) -> Any:
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, dict):
        return _shared({k: _interned(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_interned(v) for v in value]
    return value


def _shared(copy: dict[str, Any]) -> dict[str, Any]:
    """The map held for ``copy``'s items when every value is a string (one seen lately), else ``copy``."""
    if not all(type(v) is str for v in copy.values()):
        return copy
    return _held(tuple(copy.items()))


@functools.lru_cache(maxsize=SHARED_KEPT)
def _held(items: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """One map per run of items, in order: the same items in another order are another JSON text."""
    return dict(items)
