"""List continue tokens, in upstream's format and with its error messages.

A token is unpadded URL-safe base64 of ``{"v":"meta.k8s.io/v1","rv":<resourceVersion>,"start":"<key>\\u0000"}``,
where the key is ``namespace/name`` (``name`` for cluster-scoped kinds) of the last item sent: the next page
starts after it. A token a client mangled is refused with the words kube-apiserver uses, which carry the Go
decoder's own error (``illegal base64 data at input byte 3``, ``invalid character ...``). A token's resourceVersion
is the snapshot every page lists; -1 (in the token of a 410 for a snapshot too old) means "the latest".
"""

from __future__ import annotations

import base64
import json
import posixpath
from typing import Final

from multiqueue.api.errors import status
from multiqueue.api.types import Obj
from multiqueue.apiserver.rules import godecode

VERSION: Final = "meta.k8s.io/v1"
LATEST: Final = -1
_NOT_VALID: Final = "continue key is not valid"
TOO_OLD: Final = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list."
)


class ContinueError(ValueError):
    """A token that cannot be used; its text is upstream's (the server prefixes ``invalid continue token:``)."""


def encode(resource_version: int, namespace: str, name: str) -> str:
    """The token of a page whose last item is ``namespace/name`` (namespace "" for cluster-scoped kinds)."""
    start = f"{namespace}/{name}\x00" if namespace else f"{name}\x00"
    raw = json.dumps({"v": VERSION, "rv": resource_version, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode(token: str) -> tuple[int, str, str]:
    """(resourceVersion, namespace, name) of the last item the previous page sent; raises ContinueError."""
    try:
        data = godecode.b64decode(token.encode("utf-8", errors="surrogateescape"), url=True, padded=False)
        body = godecode.json_loads(data)
    except godecode.DecodeError as exc:
        raise ContinueError(f"{_NOT_VALID}: {exc}") from exc
    if not isinstance(body, dict):
        kind = {list: "array", str: "string", bool: "bool"}.get(type(body), "number")
        raise ContinueError(
            f"{_NOT_VALID}: json: cannot unmarshal {kind} into Go value of type storage.continueToken"
        )
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


def too_old_status(namespace: str, name: str) -> Obj:
    """The 410 for a token whose snapshot left the watch window; it carries a token that lists the rest as of
    now."""
    body = status(410, "Expired", TOO_OLD)
    body["metadata"] = {"continue": encode(LATEST, namespace, name)}
    return body
