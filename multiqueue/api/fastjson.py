"""JSON on the wire and in the store, at orjson's speed: every request, watch event and stored write is encoded or
decoded here, and the standard library's json costs several times as much CPU. Where orjson refuses what json
takes (an integer beyond 64 bits, NaN, a string with a lone surrogate), json does the work, so no input that worked
before fails now."""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(obj: Any) -> bytes:
    """Compact JSON as UTF-8 (as ASCII, with escapes, where a string holds what UTF-8 cannot: a lone surrogate)."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, separators=(",", ":")).encode()


def loads(data: bytes | str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def copied(value: Any) -> Any:
    """A deep copy of plain JSON data (what an object read from a server is), through orjson: many times cheaper
    than ``copy.deepcopy``, which the manager's hot path would otherwise spend much of its time in."""
    return loads(dumps(value))
