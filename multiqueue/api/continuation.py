"""List continue tokens, in upstream's format and with its error messages.

A token is unpadded URL-safe base64 of ``{"v":"meta.k8s.io/v1","rv":<resourceVersion>,"start":"<key>\\u0000"}``,
where the key is ``namespace/name`` (``name`` for cluster-scoped kinds) of the last item sent: the next page
starts after it. A token a client mangled is refused with the words kube-apiserver uses, which carry the Go
decoder's own error (``illegal base64 data at input byte 3``, ``invalid character ...``).
"""

from __future__ import annotations

import base64
import json
import posixpath
from typing import Any, Final

VERSION: Final = "meta.k8s.io/v1"
_NOT_VALID: Final = "continue key is not valid"
_ALPHABET: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_VALUE_STARTS: Final = frozenset(b'{["-0123456789tfn')


class ContinueError(ValueError):
    """A token that cannot be used; its text is upstream's (the server prefixes ``invalid continue token:``)."""


def encode(resource_version: int, namespace: str, name: str) -> str:
    """The token of a page whose last item is ``namespace/name`` (namespace "" for cluster-scoped kinds)."""
    start = f"{namespace}/{name}\x00" if namespace else f"{name}\x00"
    raw = json.dumps({"v": VERSION, "rv": resource_version, "start": start}, separators=(",", ":"))
    return _b64encode(raw.encode())


def decode(token: str) -> tuple[int, str, str]:
    """(resourceVersion, namespace, name) of the last item the previous page sent; raises ContinueError."""
    data = _b64decode(token.encode("utf-8", errors="surrogateescape"))
    body = _json_object(data)
    version = body.get("v")
    if version != VERSION:
        shown = "" if version is None else version
        raise ContinueError(f"{_NOT_VALID}: server does not recognize this encoded version {shown}")
    rv = body.get("rv")
    if not isinstance(rv, int) or isinstance(rv, bool) or rv == 0:
        raise ContinueError(f"{_NOT_VALID}: incorrect encoded start resourceVersion (version {VERSION})")
    start = body.get("start")
    if not isinstance(start, str) or not start:
        raise ContinueError(f"{_NOT_VALID}: encoded start key empty (version {VERSION})")
    rooted = start if start.startswith("/") else "/" + start
    if posixpath.normpath(rooted) != rooted:
        raise ContinueError(f"{_NOT_VALID}: {start}")
    key = rooted[1:].removesuffix("\x00")
    namespace, _, name = key.rpartition("/")
    return rv, namespace, name


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _b64decode(text: bytes) -> bytes:
    """Go's ``base64.RawURLEncoding.DecodeString``: no padding, newlines skipped, errors at a byte offset."""
    kept = bytearray()
    for index, byte in enumerate(text):
        if byte in (0x0A, 0x0D):
            continue
        if byte not in _ALPHABET:
            raise ContinueError(f"{_NOT_VALID}: illegal base64 data at input byte {index}")
        kept.append(byte)
    if len(kept) % 4 == 1:
        raise ContinueError(f"{_NOT_VALID}: illegal base64 data at input byte {len(text) - 1}")
    return base64.urlsafe_b64decode(bytes(kept) + b"=" * (-len(kept) % 4))


def _json_object(data: bytes) -> dict[str, Any]:
    """The token's JSON object; errors in the words of Go's encoding/json for the common cases."""
    stripped = data.lstrip(b" \t\r\n")
    if not stripped:
        raise ContinueError(f"{_NOT_VALID}: unexpected end of JSON input")
    if stripped[0] not in _VALUE_STARTS:
        raise ContinueError(
            f"{_NOT_VALID}: invalid character {_go_quote_char(stripped[0])} looking for beginning of value"
        )
    try:
        body = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ContinueError(f"{_NOT_VALID}: {exc}") from exc
    if not isinstance(body, dict):
        kind = {list: "array", str: "string", bool: "bool"}.get(type(body), "number")
        raise ContinueError(
            f"{_NOT_VALID}: json: cannot unmarshal {kind} into Go value of type storage.continueToken"
        )
    return body


def _go_quote_char(byte: int) -> str:
    """A byte as Go's JSON scanner names it in errors: ``'x'``, ``'\\u009e'``, ``'\\x01'``."""
    char = chr(byte)
    if char == "'":
        return "'\\''"
    if char == '"':
        return "'\"'"
    if char == "\\":
        return "'\\\\'"
    if char.isprintable() and (byte < 0x80 or not char.isspace()):
        return f"'{char}'"
    escapes = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v"}
    if byte in escapes:
        return f"'{escapes[byte]}'"
    if byte < 0x20 or byte == 0x7F:
        return f"'\\x{byte:02x}'"
    return f"'\\u{byte:04x}'"
