"""Go's decoders' verdicts on bad input, word for word, for the errors kube-apiserver passes through to clients.

kube-apiserver quotes Go's ``encoding/base64`` and ``encoding/json`` errors in its answers (a Secret whose data is
not base64, a mangled continue token), so the embedded server says the same: ``illegal base64 data at input byte
3``, ``invalid character 'x' looking for beginning of value``.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Final

_STD: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_URL: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_NEWLINES: Final = (0x0A, 0x0D)
_SHORT_ESCAPES: Final = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v"}


# How deeply a request body or a stored object may nest objects and arrays. kube-apiserver's Go decoder allows
# 10,000 levels; this server recurses over objects (copies, field sets, pruning), so it stops well inside Python's
# recursion limit, far deeper than any Kubernetes object or CRD schema nests.
MAX_DEPTH: Final = 200


class DecodeError(ValueError):
    """Bad input; the text is Go's."""


class TooDeep(DecodeError):
    """Valid JSON nested deeper than this server takes."""

    def __init__(self, max_depth: int) -> None:
        super().__init__(f"exceeded max depth of {max_depth}")


def b64decode(text: bytes, *, url: bool = False, padded: bool = True) -> bytes:
    """``base64.StdEncoding`` (or ``RawURLEncoding`` with ``url=True, padded=False``) ``DecodeString``: newlines
    are skipped, and the first bad byte is named by its offset as Go names it."""
    alphabet = _URL if url else _STD
    kept = bytearray()
    at = 0
    while at < len(text):
        quantum = 0  # characters of the current group of four seen so far
        while quantum < 4:
            if at == len(text):
                if quantum == 0:
                    return _decoded(kept, url)
                if quantum == 1 or padded:
                    raise DecodeError(f"illegal base64 data at input byte {at - quantum}")
                return _decoded(kept, url)
            byte = text[at]
            at += 1
            if byte in alphabet:
                kept.append(byte)
                quantum += 1
            elif byte in _NEWLINES:
                continue
            elif byte != ord("=") or not padded:
                raise DecodeError(f"illegal base64 data at input byte {at - 1}")
            else:
                _check_padding(text, at, quantum)
                return _decoded(kept, url)
    return _decoded(kept, url)


def _check_padding(text: bytes, at: int, quantum: int) -> None:
    """The first ``=`` was just read at ``at - 1``: what may follow it."""
    if quantum in (0, 1):
        raise DecodeError(f"illegal base64 data at input byte {at - 1}")
    if quantum == 2:
        while at < len(text) and text[at] in _NEWLINES:
            at += 1
        if at == len(text):
            raise DecodeError(f"illegal base64 data at input byte {len(text)}")
        if text[at] != ord("="):
            raise DecodeError(f"illegal base64 data at input byte {at - 1}")
        at += 1
    while at < len(text) and text[at] in _NEWLINES:
        at += 1
    if at < len(text):
        raise DecodeError(f"illegal base64 data at input byte {at}")


def _decoded(kept: bytearray, url: bool) -> bytes:
    padded = bytes(kept) + b"=" * (-len(kept) % 4)
    return base64.urlsafe_b64decode(padded) if url else base64.b64decode(padded)


def json_loads(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in ``data``; raises :class:`DecodeError` with Go's syntax error for invalid JSON, and for a
    value nested deeper than ``max_depth``.

    Python's C decoder reads what Go reads, but for NaN and Infinity (refused here) and invalid UTF-8 (which Go
    replaces); Go's scanner, a byte at a time in Python, runs only to explain a body that failed."""
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_not_json)
    except RecursionError:
        raise TooDeep(max_depth) from None
    except ValueError:  # JSONDecodeError, UnicodeDecodeError, and NaN or Infinity
        problem = json_syntax_error(data)
        if problem:
            raise DecodeError(problem) from None
        try:
            value = json.loads(data.decode("utf-8", errors="replace"))
        except RecursionError:
            raise TooDeep(max_depth) from None
    # A value cannot nest deeper than it has brackets, so most bodies skip the walk.
    if data.count(b"[") + data.count(b"{") > max_depth and nesting_depth(value) > max_depth:
        raise TooDeep(max_depth)
    if _SURROGATE_ESCAPE.search(data):
        value = _mend_surrogates(value)
    return value


# An escaped UTF-16 surrogate (\ud800-\udfff): Python's decoder joins a valid pair and keeps a lone one as is.
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _mend_surrogates(value: Any) -> Any:
    """Each lone surrogate becomes U+FFFD, as Go's decoder reads it (the text can then be stored as UTF-8)."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_mend_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_mend_surrogates(key): _mend_surrogates(item) for key, item in value.items()}
    return value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def nesting_depth(value: Any) -> int:
    """How deeply objects and arrays nest in ``value`` (a scalar: 0, ``{}``: 1), found without recursion."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        todo.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


# The states of Go's encoding/json scanner, by what they wait for; each names the words of its error.
_SPACE: Final = b" \t\r\n"
_DIGITS: Final = b"0123456789"
_HEX: Final = b"0123456789abcdefABCDEF"


def json_syntax_error(data: bytes) -> str:
    """Go's ``encoding/json`` verdict on ``data`` as a JSON document: "" when valid, else its error text."""
    stack: list[str] = []  # "key", "value" (inside an object), "array"
    state = "value"
    literal = ""  # the rest of true/false/null still expected
    hex_left = 0
    # Go feeds a space after the last byte: a number or literal cut short fails on it, in its own words.
    for byte in [*data, 0x20]:
        char = bytes([byte])
        bad = f"invalid character {quote_char(byte)} "
        while True:  # a state may hand the same byte on to the next one
            if state in ("value", "value-or-close", "key-or-close"):
                if char in _SPACE:
                    break
                if state == "value-or-close" and char == b"]":
                    stack.pop()
                    state = "end"
                    break
                if state == "key-or-close" and char == b"}":
                    stack.pop()
                    state = "end"
                    break
                if state == "key-or-close":
                    state = "key"
                    continue
                if char == b"{":
                    stack.append("key")
                    state = "key-or-close"
                elif char == b"[":
                    stack.append("array")
                    state = "value-or-close"
                elif char == b'"':
                    state = "string"
                elif char == b"-":
                    state = "neg"
                elif char == b"0":
                    state = "zero"
                elif char in b"123456789":
                    state = "int"
                elif char in (b"t", b"f", b"n"):
                    literal = {b"t": "rue", b"f": "alse", b"n": "ull"}[char]
                    state = "literal:" + {b"t": "true", b"f": "false", b"n": "null"}[char]
                else:
                    return bad + "looking for beginning of value"
                break
            if state == "key":
                if char in _SPACE:
                    break
                if char != b'"':
                    return bad + "looking for beginning of object key string"
                state = "string"
                break
            if state == "string":
                if char == b'"':
                    state = "end"
                elif char == b"\\":
                    state = "escape"
                elif byte < 0x20:
                    return bad + "in string literal"
                break
            if state == "escape":
                if char == b"u":
                    state, hex_left = "unicode", 4
                elif char in b'bfnrt\\/"':
                    state = "string"
                else:
                    return bad + "in string escape code"
                break
            if state == "unicode":
                if char not in _HEX:
                    return bad + "in \\u hexadecimal character escape"
                hex_left -= 1
                state = "string" if hex_left == 0 else "unicode"
                break
            if state.startswith("literal:"):
                if char != literal[:1].encode():
                    return bad + f"in literal {state[8:]} (expecting {quote_char(ord(literal[0]))})"
                literal = literal[1:]
                if not literal:
                    state = "end"
                break
            if state == "neg":
                if char == b"0":
                    state = "zero"
                elif char in b"123456789":
                    state = "int"
                else:
                    return bad + "in numeric literal"
                break
            if state in ("int", "zero"):
                if state == "int" and char in _DIGITS:
                    break
                if char == b".":
                    state = "dot"
                    break
                if char in b"eE":
                    state = "exp"
                    break
                state = "end"
                continue
            if state in ("dot", "fraction"):
                if char in _DIGITS:
                    state = "fraction"
                    break
                if state == "dot":
                    return bad + "after decimal point in numeric literal"
                if char in b"eE":
                    state = "exp"
                    break
                state = "end"
                continue
            if state in ("exp", "exp-sign"):
                if state == "exp" and char in b"+-":
                    state = "exp-sign"
                    break
                if char not in _DIGITS:
                    return bad + "in exponent of numeric literal"
                state = "exp-digits"
                break
            if state == "exp-digits":
                if char in _DIGITS:
                    break
                state = "end"
                continue
            # state == "end": a value just ended
            if char in _SPACE:
                break
            if not stack:
                return bad + "after top-level value"
            top = stack[-1]
            if top == "key":
                if char != b":":
                    return bad + "after object key"
                stack[-1] = "value"
                state = "value"
            elif top == "value":
                if char == b",":
                    stack[-1] = "key"
                    state = "key"
                elif char == b"}":
                    stack.pop()
                else:
                    return bad + "after object key:value pair"
            elif char == b",":
                state = "value"
            elif char == b"]":
                stack.pop()
            else:
                return bad + "after array element"
            break
    return "" if not stack and state == "end" else "unexpected end of JSON input"


def json_object(data: bytes, go_type: str) -> dict[str, Any]:
    """The JSON object in ``data``, unmarshalled into a Go struct or map named ``go_type`` for errors."""
    value = json_loads(data)
    if not isinstance(value, dict):
        kind = {list: "array", str: "string", bool: "bool", type(None): "null"}.get(type(value), "number")
        if kind != "null":  # Go leaves the target alone for null
            raise DecodeError(f"json: cannot unmarshal {kind} into Go value of type {go_type}")
        return {}
    return value


def quote_char(byte: int) -> str:
    """A byte as Go's JSON scanner names it: ``'x'``, ``'\\''``, ``'\\x01'``, ``'\\u009e'``."""
    char = chr(byte)
    if char in ("'", "\\"):
        return f"'\\{char}'"
    if char == '"':
        return "'\"'"
    if byte in _SHORT_ESCAPES:
        return f"'{_SHORT_ESCAPES[byte]}'"
    if byte < 0x20 or byte == 0x7F:
        return f"'\\x{byte:02x}'"
    if byte < 0x7F or (char.isprintable() and not char.isspace()):
        return f"'{char}'"
    return f"'\\u{byte:04x}'"
