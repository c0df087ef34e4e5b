"""Smaller copies of objects for caches that hold many of them.

A cached object is mostly small dicts and short strings, and the same strings recur: a Job's UID appears in its
selector and in its template's labels, its name in labels, and values such as ``Never`` or ``default`` in every
Job. Interning makes each such string one object however often it recurs; dropping managedFields removes what a
cache's readers never look at (an update sent without them leaves the server's as they are).
"""

from __future__ import annotations

import sys
from typing import Any

from multiqueue.api.types import Obj


def compacted(obj: Obj) -> Obj:
    """A copy of ``obj`` without ``metadata.managedFields`` whose string values are interned."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return {k: _interned(v) for k, v in obj.items()}


def without_nested_spec(obj: Obj) -> Obj:
    """``obj`` with only the scalar fields of its spec (``suspend``, ``completions``, ...): what a reader of
    another controller's copy needs, without its pod templates, selectors and policies."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return obj
    return {**obj, "spec": {k: v for k, v in spec.items() if not isinstance(v, (dict, list))}}


def _interned(value: Any) -> Any:
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, dict):
        return {k: _interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interned(v) for v in value]
    return value
