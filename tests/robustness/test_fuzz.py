"""A seeded fuzz run against the embedded API server: at least 20,000 requests, every verb on every kind it serves,
with bodies generated from the server's own OpenAPI v3 schemas and then broken the ways clients break them: wrong
JSON types, nulls, huge, negative and non-finite numbers, nesting thousands deep, megabyte strings, invalid names and
base64, unknown fields, non-object and truncated bodies, wrong apiVersion and kind, patches of every content type on
random paths, list and watch options valid and not.

Why: a 5xx is the server failing, never the client; kube-apiserver answers every one of these with a 2xx or a 4xx
(a 504 the client asked for with its own short ``timeout``, or for a resourceVersion the server has not reached, is
an answer, not a failure). And what the server accepted it must be able to serve back: after the run every stored
object is read, written back as read and deleted, and every namespace the run created goes away. An object nobody
can delete is a leak no client can clean up.

Seeded and bounded: ``MULTIQUEUE_FUZZ_SEED`` repeats a run (each request's shape comes from the seed and its index;
what it meets depends on the requests before it, sent 16 at once). Amplifying patches stay small: at most three copy
operations per JSON patch, and none on an object over 200 kB, so a run cannot exhaust the machine.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import copy
import dataclasses
import itertools
import json
import logging
import os
import random
import re
import resource
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlencode

import aiohttp
import pytest
import yarl

from multiqueue.api.types import Resource
from multiqueue.apiserver.server import ApiServer
from multiqueue.kube.client import KubeClient
from multiqueue.kube.informer import Informer
from tests.support.clients import client_for
from tests.support.servers import server_config
from tests.support.waiting import Changes

pytestmark = pytest.mark.robustness

SEED_ENV: Final = "MULTIQUEUE_FUZZ_SEED"
DEFAULT_SEED: Final = 20_000
REQUESTS: Final = 20_000  # operations; each sends one request or two (read back, then write)
CONCURRENCY: Final = 16
REQUEST_TIMEOUT: Final = 30.0  # an answer later than this is a hang
SYNC_WITHIN: Final = 30.0
CLEANUP_WITHIN: Final = 60.0
MAX_COPIES: Final = 3  # copy operations per JSON patch: at most 2**3 times a value, never 2**25
COPY_LIMIT_BYTES: Final = 200_000  # no copy operations at all on an object larger than this
LISTED: Final = 30  # distinct failures shown
NAMESPACES: Final = (
    "fuzz-a",
    "fuzz-b",
    "fuzz-c",
    "fuzz-d",
)  # created first; deleted and made again by the run
NAMESPACE_POOL: Final = (*NAMESPACES, "fuzz-e")
MISSING_NAMESPACE: Final = "fuzz-missing"  # never created
NAMES: Final = ("f0", "f1", "f2", "f3", "f4")
CRD_POOL: Final = ("gen0s.gen.fuzz.example.com", "gen1s.gen.fuzz.example.com", "gen2s.gen.fuzz.example.com")
FUZZ_GROUP: Final = "fuzz.multiqueue.dev"
MAX_GEN_DEPTH: Final = 7
# A 504 Timeout is the client's own choice when it asked for one of these (all shorter than --request-timeout).
SHORT_TIMEOUTS: Final = ("1ns", "1us", "1ms", "10ms", "1s", "5s")
TIMEOUTS: Final = (*SHORT_TIMEOUTS, "0s", "-1s", "abc", "1h", "100", "")
TOO_LARGE_RV: Final = "Too large resource version"

# --- what the generator draws from -----------------------------------------------------------------------------

STRINGS: Final = (
    "",
    "a",
    "f0",
    "x-y",
    "True",
    "1",
    "100m",
    "1Gi",
    "Always",
    "fuzz.example.com/x",
    "ünï",
    "a b",
)
STRING_HINTS: Final[dict[str, tuple[str, ...]]] = {
    "image": ("busybox:1.36", "registry.example/app@sha256:" + "a" * 64),
    "restartPolicy": ("Never", "OnFailure", "Always"),
    "schedule": ("*/5 * * * *", "@hourly", "0 0 31 2 *", "* * * *", "CRON_TZ=Europe/Paris 0 * * * *"),
    "timeZone": ("Etc/UTC", "Europe/Paris", "Mars/Olympus"),
    "protocol": ("TCP", "UDP", "SCTP"),
    "apiGroup": ("rbac.authorization.k8s.io", ""),
    "kind": ("ClusterRole", "Role", "User", "ServiceAccount", "Group", "Pod", "Job"),
    "apiVersion": ("v1", "batch/v1"),
    "namespace": NAMESPACES,
    "operator": ("In", "NotIn", "Exists", "DoesNotExist", "Equal"),
    "type": ("Opaque", "ClusterIP", "RollingUpdate", "Recreate", "Complete", "Ready", "Normal", "NodePort"),
    "status": ("True", "False", "Unknown"),
    "concurrencyPolicy": ("Allow", "Forbid", "Replace"),
    "completionMode": ("Indexed", "NonIndexed"),
    "podReplacementPolicy": ("Failed", "TerminatingOrFailed"),
    "managedBy": ("kubernetes.io/job-controller", "multiqueue.dev/dispatcher", "example.com/x"),
    "imagePullPolicy": ("Always", "IfNotPresent", "Never"),
    "phase": ("Pending", "Running", "Succeeded", "Failed", "Active", "Terminating"),
    "scope": ("Namespaced", "Cluster"),
    "preemptionPolicy": ("PreemptLowerPriority", "Never"),
    "completedIndexes": ("0-2,5", "1,0", "x"),
    "failedIndexes": ("0-2,5", "3", "x"),
    "name": NAMES,
    "verbs": ("get", "list", "*"),
    "resources": ("pods", "jobs", "*"),
    "apiGroups": ("", "batch", "*"),
}
QUANTITIES: Final = ("100m", "1", "1Gi", "0.5", "2k", 1, 0.25, "1e3", "-1", "1Ei")
SMALL_INTS: Final = (0, 1, 1, 2, 3, 10, 80, 100)
NUMBERS: Final = (
    2**63,
    2**63 - 1,
    -(2**63),
    -(2**63) - 1,
    2**64,
    10**30,
    2**31,
    -(2**31) - 1,
    -1,
    0,
    1.5,
    -0.5,
    1e308,
    -1e308,
    5e-324,
)
# Written into the JSON text as they are: Go refuses NaN and Infinity, and 1e400 overflows a float64.
RAW_TOKENS: Final = (
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1E+2",
    "-0",
    "1.0",
    "123456789012345678901234567890",
    "0.1e-400",
    "+1",
    ".5",
    "01",
    "0x10",
    "tru",
)
DEPTHS: Final = (64, 150, 199, 200, 201, 500, 999, 1000, 1001, 10_000, 100_000)
LONG_LENGTHS: Final = (256, 64 * 1024, 300_000, 1_100_000)
ODD_CHARS: Final = (
    "\x00",
    "\ud800",
    "\udfff\ud800",
    "\u202e",
    "\ufeff",
    "a\x00b",
    "🙂",
    "\x7f",
    "é" * 100,
    "\\",
)
BAD_NAMES: Final = (
    "",
    "UPPER",
    "a_b",
    "a.b..c",
    ".",
    "..",
    "-a",
    "a-",
    "a b",
    "a/b",
    "a%2Fb",
    "x" * 254,
    "ü",
    "a\nb",
    "a:b",
    "%",
    "~",
    "\x00",
    "a" * 64,
    "1.2.3.4",
    "f0.",
)
BAD_BASE64: Final = ("!!!", "abc", "YQ", "YQ=", "Y Q==", "====", "a" * 5, "ÿ", "YWJj\n", 1, ["YQ=="])
LABEL_SELECTORS: Final = (
    "fuzz=yes",
    "fuzz!=yes",
    "app in (f, g)",
    "app notin (x)",
    "!app",
    "app",
    "fuzz=yes,app=f",
    "===",
    "a in",
    "(",
    "a!=",
    "x" * 70 + "=y",
    "a=b=c",
    "a in (b",
    "a=" + "x" * 64,
    "",
    " ",
    "a,,b",
    "a=é",
    "a>1",
    "a<2",
)
FIELD_SELECTORS: Final = (
    "metadata.name=f0",
    "metadata.namespace=fuzz-a",
    "metadata.name!=f1",
    "status.phase=Running",
    "spec.nodeName=",
    "spec.nodeName=n1",
    "type=Opaque",
    "involvedObject.name=f0",
    "bogus=1",
    "metadata.name",
    "metadata.name==f0",
    "=x",
    "metadata.name=f0,metadata.namespace!=x",
    "a in (b)",
    "metadata.name=" + "x" * 300,
)
ODD_POINTERS: Final = (
    "",
    "/",
    "/metadata/labels/~2",
    "/metadata/labels/~",
    "/metadata/labels/a~1b",
    "/spec/containers/-",
    "/spec/containers/-/name",
    "/nonexistent/deep/path",
    "/metadata/name",
    "/metadata/namespace",
    "/kind",
    "/apiVersion",
    "/metadata/resourceVersion",
    "/metadata/uid",
    "/status",
    "/spec",
    "metadata",
    "/metadata//x",
    "/spec/0",
    "/metadata/finalizers/-",
    "/metadata/ownerReferences/0/uid",
    "/metadata/deletionTimestamp",
    "/metadata/managedFields/0/fieldsV1",
    "/metadata/labels/" + "k" * 300,
)
INVALID_JSON_PATCHES: Final[tuple[Any, ...]] = (
    {},
    {"op": "add", "path": "/a", "value": 1},
    "x",
    None,
    1,
    [1],
    [None],
    [{"op": "add"}],
    [{"op": "add", "path": 1, "value": 1}],
    [{"path": "/metadata/labels/a", "value": "b"}],
    [{"op": "copy", "path": "/metadata/labels/x"}],
    [{"op": "move", "from": 1, "path": "/a"}],
    [{"op": "test", "path": "/metadata/name"}],
    [{"op": "remove", "path": "/metadata"}],
    [{"op": "replace", "path": "/metadata", "value": None}],
    [[{"op": "add", "path": "/a", "value": 1}]],
)
# The verbs of one operation, with how often each is drawn.
OPERATIONS: Final = (
    ("create", 22.0),
    ("update", 9.0),
    ("readback", 10.0),
    ("status", 6.0),
    ("json-patch", 9.0),
    ("merge-patch", 7.0),
    ("strategic-patch", 7.0),
    ("apply", 3.0),
    ("get", 6.0),
    ("list", 8.0),
    ("delete", 5.0),
    ("deletecollection", 1.0),
    ("watch", 1.5),
    ("finalize", 1.0),
    ("odd", 2.5),
)
MUTATIONS: Final = (
    ("wrong-type", 14.0),
    ("null", 6.0),
    ("number", 8.0),
    ("raw-token", 6.0),
    ("deep", 5.0),
    ("long", 3.0),
    ("bad-name", 5.0),
    ("bad-base64", 3.0),
    ("unknown-field", 8.0),
    ("non-object", 3.0),
    ("api-version", 5.0),
    ("metadata", 10.0),
    ("chars", 5.0),
)


# --- JSON text the generator controls to the byte ----------------------------------------------------------------


class Raw:
    """Text written into a JSON body as it is: NaN, 1e400, or nesting too deep to build as Python values."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def encode(value: Any) -> str:
    """JSON text of ``value``; :class:`Raw` parts verbatim, NaN and Infinity as Python writes them."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(encode(v) for v in value) + "]"
    return json.dumps(value)


def _deep(depth: int, as_object: bool) -> Raw:
    if as_object:
        return Raw('{"a":' * depth + "1" + "}" * depth)
    return Raw("[" * depth + "]" * depth)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _walk(root: Any, limit: int) -> list[tuple[Any, Any, Any, tuple[str, ...]]]:
    """(container, key, value, keys from the root) of the values inside ``root``, breadth first, at most
    ``limit``."""
    found: list[tuple[Any, Any, Any, tuple[str, ...]]] = []
    queue: collections.deque[tuple[Any, tuple[str, ...]]] = collections.deque([(root, ())])
    while queue and len(found) < limit:
        current, keys = queue.popleft()
        entries: Iterable[tuple[Any, Any]] = ()
        if isinstance(current, dict):
            entries = list(current.items())
        elif isinstance(current, list):
            entries = list(enumerate(current))
        for key, value in entries:
            found.append((current, key, value, (*keys, str(key))))
            if isinstance(value, (dict, list)):
                queue.append((value, (*keys, str(key))))
    return found


def _nodes(root: Any, limit: int = 400) -> list[tuple[Any, Any, Any, str]]:
    """(container, key, value, dotted path) of the values inside ``root``."""
    return [(c, k, v, ".".join(keys)) for c, k, v, keys in _walk(root, limit)]


def _pointers(root: Any, limit: int = 300) -> list[tuple[str, Any]]:
    """JSON pointers to the values inside ``root``, with the values."""
    return [("".join(f"/{_escape(key)}" for key in keys), v) for _, _, v, keys in _walk(root, limit)]


def _set_in(root: dict[str, Any], path: list[str | int], value: Any) -> None:
    """Put ``value`` at ``path``, making the objects and lists on the way (an index 0 is the first item)."""
    current: Any = root
    for segment, following in itertools.pairwise(path):
        fresh: Any = [] if isinstance(following, int) else {}
        if isinstance(segment, int):
            if not isinstance(current, list):
                return
            if not current:
                current.append(fresh)
            current = current[0]
        else:
            if not isinstance(current, dict):
                return
            if type(current.get(segment)) is not type(fresh):
                current[segment] = fresh
            current = current[segment]
    last = path[-1]
    if isinstance(last, int):
        if isinstance(current, list):
            current.append(value)
    elif isinstance(current, dict):
        current[last] = value


def _head(message: str) -> str:
    """What a message says, without the names, numbers and values it quotes: the same failure groups as one."""
    message = re.sub(r"\([^)]*\)", "", message)
    message = re.sub(r'"[^"]*"', '"…"', message)
    return re.sub(r"\d+", "N", message.partition(":")[0].strip())[:80]


# --- the served kinds and their schemas --------------------------------------------------------------------------


@dataclasses.dataclass
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    verbs: frozenset[str]
    subresources: set[str] = dataclasses.field(default_factory=set)
    schema: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        return f"{self.group}/{self.plural}"

    @property
    def resource(self) -> Resource:
        return Resource(self.group, self.version, self.plural, self.kind, self.namespaced)

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        """The request path, each name %-encoded as a client would."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if sub:
                base += f"/{sub}"
        return base

    def template(self, namespace: bool, name: bool, sub: str = "") -> str:
        """The path with its names as placeholders: what failures are grouped by."""
        return (
            self.path("{namespace}" if namespace else None, "{name}" if name else None, sub)
            .replace("%7B", "{")
            .replace("%7D", "}")
        )


class Schemas:
    """The components of every OpenAPI v3 document the server serves."""

    def __init__(self, components: dict[str, Any]) -> None:
        self.components = components

    def resolve(self, schema: Any) -> dict[str, Any]:
        """``schema`` with its $ref (or single allOf) followed."""
        for _ in range(10):
            if not isinstance(schema, dict):
                return {}
            ref = schema.get("$ref")
            if isinstance(ref, str):
                schema = self.components.get(ref.rsplit("/", 1)[-1], {})
                continue
            all_of = schema.get("allOf")
            if isinstance(all_of, list) and all_of:
                own = {k: v for k, v in schema.items() if k != "allOf"}
                schema = {**self.resolve(all_of[0]), **own}
                continue
            return schema
        return {}

    def byte_paths(self, root: dict[str, Any], limit: int = 8) -> list[list[str | int]]:
        """Paths to fields of format byte, a few levels deep."""
        found: list[list[str | int]] = []
        queue: collections.deque[tuple[Any, list[str | int]]] = collections.deque([(root, [])])
        seen = 0
        while queue and seen < 2000 and len(found) < limit:
            seen += 1
            schema, path = queue.popleft()
            resolved = self.resolve(schema)
            if resolved.get("format") == "byte":
                found.append(path)
                continue
            if len(path) > 6:
                continue
            properties = resolved.get("properties")
            if isinstance(properties, dict):
                queue.extend((sub, [*path, name]) for name, sub in properties.items() if name != "metadata")
            if isinstance(resolved.get("items"), dict):
                queue.append((resolved["items"], [*path, 0]))
            if isinstance(resolved.get("additionalProperties"), dict):
                queue.append((resolved["additionalProperties"], [*path, "k"]))
        return found


@dataclasses.dataclass(frozen=True)
class Request:
    method: str
    path: str  # %-encoded
    template: str
    index: int = -1
    query: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    content_type: str | None = None
    accept: str | None = None
    shape: str = ""
    token: str | None = None  # None: the server's own

    @property
    def watch(self) -> bool:
        return self.method == "GET" and any(k == "watch" and v not in ("0", "false") for k, v in self.query)


@dataclasses.dataclass
class Answer:
    status: int  # 0: none
    body: bytes
    obj: Any  # the JSON body, if it was JSON


@dataclasses.dataclass
class Failure:
    request: Request
    status: int
    reason: str
    message: str
    answer: str
    cause: str = ""  # what the server logged for it

    @property
    def what(self) -> tuple[int, str]:
        """The failure: its status, reason, message and (for a 500) the exception the server logged."""
        cause = self.cause.partition(":")[0]
        text = f"{self.reason}: {_head(self.message)}" + (f" [{cause}]" if cause else "")
        return self.status, text

    @property
    def where(self) -> tuple[str, str]:
        return ("WATCH" if self.request.watch else self.request.method), self.request.template


class ServerLog(logging.Handler):
    """The errors the in-process server logs: the cause of each 500, and failures in its background loops."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.causes: dict[tuple[str, str], str] = {}
        self.background: collections.Counter[str] = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if record.name.endswith(".server") and isinstance(args, tuple) and len(args) == 4:
            method, path, name, exc = args
            self.causes[(str(method), str(path))] = f"{name}: {' '.join(str(exc).split())[:200]}"
            return
        text = record.getMessage()[:200]
        if record.exc_info and record.exc_info[1] is not None:
            text += f" ({type(record.exc_info[1]).__name__}: {str(record.exc_info[1])[:200]})"
        self.background[f"{record.name}: {text}"] += 1


class Http:
    """Sends requests and keeps the score: answers per status, every 5xx (and hang) with what caused it."""

    def __init__(self, session: aiohttp.ClientSession, base: str, token: str, server_log: ServerLog) -> None:
        self.session = session
        self.base = base
        self.token = token
        self.server_log = server_log
        self.sent = 0
        self.statuses: collections.Counter[str] = collections.Counter()
        self.failures: list[Failure] = []
        self.disconnects: list[tuple[Request, str]] = []

    async def send(self, request: Request) -> Answer:
        url = self.base + request.path
        if request.query:
            url += "?" + urlencode(request.query, quote_via=quote)
        headers = {"Authorization": f"Bearer {self.token if request.token is None else request.token}"}
        if request.content_type is not None:
            headers["Content-Type"] = request.content_type
        if request.accept is not None:
            headers["Accept"] = request.accept
        skip = () if request.content_type is not None else ("Content-Type",)
        self.sent += 1
        try:
            async with (
                asyncio.timeout(REQUEST_TIMEOUT),
                self.session.request(
                    request.method,
                    yarl.URL(url, encoded=True),
                    data=request.body,
                    headers=headers,
                    skip_auto_headers=skip,
                ) as response,
            ):
                status = response.status
                body = await response.read()
        except TimeoutError:
            self.statuses["no answer"] += 1
            self.failures.append(Failure(request, 0, "Hang", f"no answer within {REQUEST_TIMEOUT:.0f} s", ""))
            return Answer(0, b"", None)
        except aiohttp.ClientError as exc:
            self.statuses["disconnected"] += 1
            self.disconnects.append((request, f"{type(exc).__name__}: {exc}"))
            return Answer(0, b"", None)
        self.statuses[str(status)] += 1
        obj: Any = None
        if request.watch:
            self._check_events(request, body)
        else:
            try:
                obj = json.loads(body)
            except ValueError:
                obj = None
        if status >= 500 and not _excused(request, status, obj):
            status_obj = obj if isinstance(obj, dict) else {}
            reason = str(status_obj.get("reason", ""))
            # The server logs the exception behind each InternalError with the request's method and path.
            where = (request.method, yarl.URL(url, encoded=True).path)
            cause = self.server_log.causes.pop(where, "") if reason == "InternalError" else ""
            message = str(status_obj.get("message", body[:120].decode(errors="replace")))
            self.failures.append(
                Failure(request, status, reason, message, body[:300].decode(errors="replace"), cause)
            )
        return Answer(status, body, obj)

    def _check_events(self, request: Request, body: bytes) -> None:
        """A watch is answered 200 at once; a failure later arrives as an ERROR event."""
        for line in body.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict) or event.get("type") != "ERROR":
                continue
            status = event.get("object")
            if not isinstance(status, dict):
                continue
            code = status.get("code")
            message = str(status.get("message", ""))
            if isinstance(code, int) and code >= 500 and TOO_LARGE_RV not in message:
                reason = str(status.get("reason", ""))
                self.failures.append(
                    Failure(request, code, reason, message, line[:300].decode(errors="replace"))
                )


def _excused(request: Request, status: int, obj: Any) -> bool:
    """The 504s kube-apiserver answers as well: for a resourceVersion it has not reached, or a request that ran
    past a timeout its client chose (a watch's timeoutSeconds, or a short ``?timeout=``)."""
    if status != 504:
        return False
    status_obj = obj if isinstance(obj, dict) else {}
    if TOO_LARGE_RV in str(status_obj.get("message", "")):
        return True
    if request.watch:
        return True
    asked = dict(request.query).get("timeout")
    return status_obj.get("reason") == "Timeout" and asked in SHORT_TIMEOUTS


# --- discovery ---------------------------------------------------------------------------------------------------


async def _get_json(http: Http, path: str) -> Any:
    answer = await http.send(Request("GET", path, path))
    assert answer.status == 200, f"GET {path}: {answer.status} {answer.body[:300]!r}"
    return answer.obj


async def discover(http: Http) -> tuple[list[Kind], Schemas]:
    """The kinds the server serves (from discovery), each with its schema (from OpenAPI v3)."""
    group_versions: list[tuple[str, str, str]] = []
    for version in (await _get_json(http, "/api"))["versions"]:
        group_versions.append(("", version, f"/api/{version}"))
    for group in (await _get_json(http, "/apis"))["groups"]:
        for entry in group["versions"]:
            group_versions.append((group["name"], entry["version"], f"/apis/{entry['groupVersion']}"))
    kinds: dict[tuple[str, str, str], Kind] = {}
    subresources: list[tuple[str, str, str, str]] = []
    for group, version, path in group_versions:
        for found in (await _get_json(http, path))["resources"]:
            plural, _, sub = str(found["name"]).partition("/")
            if sub:
                subresources.append((group, version, plural, sub))
                continue
            kinds[(group, version, plural)] = Kind(
                group, version, plural, found["kind"], bool(found["namespaced"]), frozenset(found["verbs"])
            )
    for group, version, plural, sub in subresources:
        if (group, version, plural) in kinds:
            kinds[(group, version, plural)].subresources.add(sub)
    components: dict[str, Any] = {}
    for entry in (await _get_json(http, "/openapi/v3"))["paths"].values():
        document = await _get_json(http, entry["serverRelativeURL"])
        components.update(document.get("components", {}).get("schemas", {}))
    by_gvk: dict[tuple[str, str, str], dict[str, Any]] = {}
    for schema in components.values():
        for gvk in schema.get("x-kubernetes-group-version-kind", []) if isinstance(schema, dict) else []:
            by_gvk[(gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))] = schema
    for kind in kinds.values():
        kind.schema = by_gvk.get((kind.group, kind.version, kind.kind), {})
    return sorted(kinds.values(), key=lambda k: (k.group, k.plural)), Schemas(components)


# --- the generator -----------------------------------------------------------------------------------------------


def _crd(name: str, scope: str, schema: dict[str, Any], status: bool) -> dict[str, Any]:
    plural, _, group = name.partition(".")
    singular = plural.removesuffix("s")
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "additionalPrinterColumns": [
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"},
        ],
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": singular, "kind": singular.capitalize()},
            "versions": [version],
        },
    }


WIDGET_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 0, "maximum": 100},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "ratio": {"type": "number"},
                "port": {"x-kubernetes-int-or-string": True},
                "payload": {"type": "string", "format": "byte"},
                "when": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "entries": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["key"],
                    "items": {
                        "type": "object",
                        "required": ["key"],
                        "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
                    },
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "blob": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}
# Two kinds of our own, so custom resources are fuzzed too: a namespaced one with a status subresource and a
# structural schema, a cluster-scoped one that keeps whatever it is sent.
SEEDED_CRDS: Final = (
    _crd(f"widgets.{FUZZ_GROUP}", "Namespaced", WIDGET_SCHEMA, True),
    _crd(
        f"gadgets.{FUZZ_GROUP}",
        "Cluster",
        {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        False,
    ),
)


def _seed(kind: Kind, name: str, namespace: str) -> dict[str, Any]:
    """The fields a body of ``kind`` needs to be valid, where the schema alone rarely gets them right."""
    container = {"name": "c", "image": "busybox:1.36", "command": ["true"]}
    template = {
        "metadata": {"labels": {"app": "f"}},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    rbac = "rbac.authorization.k8s.io"
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    seeds: dict[str, dict[str, Any]] = {
        "Pod": {"spec": {"containers": [container]}},
        "Job": {"spec": {"template": template}},
        "CronJob": {"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template}}}},
        "Deployment": {
            "spec": {
                "selector": {"matchLabels": {"app": "f"}},
                "template": {**template, "spec": {"containers": [container]}},
            }
        },
        "Service": {"spec": {"ports": [{"port": 80}]}},
        "Event": {
            "involvedObject": {"kind": "Pod", "name": "f0", "namespace": namespace},
            "reason": "Fuzz",
            "message": "fuzzed",
        },
        "Role": {"rules": rules},
        "ClusterRole": {"rules": rules},
        "RoleBinding": {
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "f0"},
            "subjects": [{"kind": "User", "name": "u", "apiGroup": rbac}],
        },
        "ClusterRoleBinding": {
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "f0"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
        },
        "PriorityClass": {"value": 1000},
        "Lease": {"spec": {"holderIdentity": "fuzz", "leaseDurationSeconds": 10}},
        "Secret": {"type": "Opaque", "data": {"k": "dmFsdWU="}},
        "ConfigMap": {"data": {"k": "v"}},
        "SelfSubjectAccessReview": {"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}},
        "Widget": {"spec": {"size": 1}},
    }
    if kind.kind == "CustomResourceDefinition":
        schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        body = _crd(name if "." in name else CRD_POOL[0], "Namespaced", schema, False)
        return {"spec": body["spec"]}
    return copy.deepcopy(seeds.get(kind.kind, {}))


@dataclasses.dataclass
class State:
    """What the run learnt from the server's answers: the last object seen under each name, and versions."""

    known: dict[tuple[str, str, str], dict[str, Any]] = dataclasses.field(default_factory=dict)
    max_rv: int = 1
    continues: collections.deque[str] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=32)
    )
    namespaces_made: set[str] = dataclasses.field(default_factory=set)


class Gen:
    """One operation's choices: all drawn from its own Random, seeded by the run's seed and its index."""

    def __init__(self, rng: random.Random, schemas: Schemas, state: State) -> None:
        self.rng = rng
        self.schemas = schemas
        self.state = state

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def weighted(self, table: tuple[tuple[str, float], ...]) -> str:
        return self.rng.choices([name for name, _ in table], [w for _, w in table])[0]

    # names

    def namespace(self) -> str:
        r = self.rng.random()
        if r < 0.86:
            return self.rng.choice(NAMESPACES)
        if r < 0.91:
            return self.rng.choice(("default", "fuzz-e"))
        if r < 0.95:
            return MISSING_NAMESPACE
        return self.rng.choice(BAD_NAMES)

    def name(self, kind: Kind) -> str:
        if self.chance(0.04):
            return self.rng.choice(BAD_NAMES)
        if kind.plural == "namespaces":
            return self.rng.choice(NAMESPACE_POOL)
        if kind.plural == "customresourcedefinitions":
            return self.rng.choice(CRD_POOL)
        return self.rng.choice(NAMES)

    def key(self) -> str:
        return self.rng.choice(("a", "k", "app", "fuzz.example.com/x", "cpu", "memory", "x-y.z"))

    def resource_version(self) -> str:
        rv = self.state.max_rv
        if self.chance(0.05):  # a version the server has not reached: answered after 3 s
            return self.rng.choice((str(rv + 100_000), "99999999999999999999"))
        return self.rng.choice(
            ("0", "", str(rv), str(max(1, rv - self.rng.randint(1, 50))), "1", "abc", "-1", "1.5", " 1")
        )

    # values from schemas

    def string(self, field: str, fmt: Any) -> str:
        if fmt == "date-time":
            return self.rng.choice(
                ("2024-01-02T03:04:05Z", "2024-01-02T03:04:05.123456Z", "1970-01-01T00:00:00Z")
            )
        if fmt == "byte":
            return base64.b64encode(self.rng.randbytes(self.rng.choice((0, 3, 16)))).decode()
        hints = STRING_HINTS.get(field)
        if hints and self.chance(0.85):
            return self.rng.choice(hints)
        return self.rng.choice(STRINGS)

    def free(self) -> Any:
        return copy.deepcopy(
            self.rng.choice(({}, {"a": 1}, "x", 1, [1, "a"], {"k": {"n": [True, None]}}, None, 2.5))
        )

    def value(self, schema: Any, field: str, depth: int) -> Any:
        """A value that fits ``schema``, its optional fields drawn more rarely the deeper they are."""
        rng = self.rng
        s = self.schemas.resolve(schema)
        if s.get("format") == "int-or-string" or s.get("x-kubernetes-int-or-string"):
            return rng.choice((rng.randint(0, 100), "50%", "http", "8080"))
        if isinstance(s.get("oneOf") or s.get("anyOf"), list):
            return rng.choice(QUANTITIES)
        if isinstance(s.get("enum"), list) and s["enum"]:
            return rng.choice(s["enum"])
        kind = s.get("type")
        if kind == "object" or "properties" in s:
            properties = s.get("properties")
            if isinstance(properties, dict) and properties:
                required = set(s.get("required", []))
                chance = 0.5 / (1 + depth / 2)
                return {
                    key: self.value(sub, key, depth + 1)
                    for key, sub in properties.items()
                    if key in required or (depth < MAX_GEN_DEPTH and rng.random() < chance)
                }
            extra = s.get("additionalProperties")
            if isinstance(extra, dict) and depth < MAX_GEN_DEPTH:
                return {
                    self.key(): self.value(extra, field, depth + 1) for _ in range(rng.choice((0, 1, 1, 2)))
                }
            return self.free()
        if kind == "array":
            if depth >= MAX_GEN_DEPTH:
                return []
            return [self.value(s.get("items", {}), field, depth + 1) for _ in range(rng.choice((0, 1, 1, 2)))]
        if kind == "string":
            return self.string(field, s.get("format"))
        if kind == "integer":
            return rng.choice(SMALL_INTS)
        if kind == "number":
            return rng.choice((0, 0.5, 1, 2.25))
        if kind == "boolean":
            return rng.random() < 0.5
        return self.free()

    def schema_path(self, schema: Any, path: list[str | int]) -> tuple[list[str | int], Any]:
        """A random walk down ``schema``: a path into it and the schema found there."""
        for _ in range(8):
            s = self.schemas.resolve(schema)
            if path and self.chance(0.3):
                break
            properties = s.get("properties")
            if isinstance(properties, dict) and properties:
                key = self.rng.choice(sorted(properties))
                path.append(key)
                schema = properties[key]
            elif s.get("type") == "array" and isinstance(s.get("items"), dict):
                path.append(0)
                schema = s["items"]
            elif isinstance(s.get("additionalProperties"), dict):
                path.append(self.key())
                schema = s["additionalProperties"]
            else:
                break
        return path, schema

    def enrich(self, kind: Kind, body: dict[str, Any], fields: int) -> None:
        """Set ``fields`` random fields of the schema, anywhere below the top level."""
        properties = self.schemas.resolve(kind.schema).get("properties", {})
        tops = sorted(k for k in properties if k not in ("apiVersion", "kind", "metadata", "status"))
        for _ in range(fields):
            if not tops:
                return
            top = self.rng.choice(tops)
            path, schema = self.schema_path(properties[top], [top])
            field = path[-1] if isinstance(path[-1], str) else top
            _set_in(body, path, self.value(schema, field, len(path)))

    def status(self, kind: Kind) -> Any:
        schema = self.schemas.resolve(kind.schema).get("properties", {}).get("status")
        return self.value(schema, "status", 1) if schema is not None else {"phase": "Running"}

    # bodies

    def metadata(self, kind: Kind, name: str, namespace: str) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if kind.namespaced and self.chance(0.5):
            meta["namespace"] = namespace
        if self.chance(0.75):
            meta["labels"] = {"fuzz": "yes", **({"app": "f"} if self.chance(0.5) else {})}
        if self.chance(0.3):
            meta["annotations"] = {"fuzz.example.com/note": self.string("note", None)}
        if self.chance(0.03):
            finalizer = ("fuzz.example.com/keep", "orphan", "foregroundDeletion", "kubernetes")
            meta["finalizers"] = [self.rng.choice(finalizer)]
        if self.chance(0.03):
            meta["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "f0",
                    "uid": f"00000000-0000-4000-8000-{self.rng.randrange(16**12):012x}",
                    "controller": self.chance(0.5),
                    "blockOwnerDeletion": self.chance(0.5),
                }
            ]
        if self.chance(0.02):
            del meta["name"]
            meta["generateName"] = "gen-"
        return meta

    def body(self, kind: Kind, name: str, namespace: str) -> dict[str, Any]:
        """A valid-looking object: the fields it needs, plus a few drawn from its schema."""
        body: dict[str, Any] = {"apiVersion": kind.api_version, "kind": kind.kind}
        body["metadata"] = self.metadata(kind, name, namespace)
        body.update(_seed(kind, name, namespace))
        self.enrich(kind, body, self.rng.choice((0, 0, 1, 2, 3)))
        return body

    def partial(self, kind: Kind, name: str, namespace: str) -> dict[str, Any]:
        """Some of a valid-looking object, as a merge patch sends it, a field set to null now and then."""
        full = self.body(kind, name, namespace)
        keys = [k for k in full if self.chance(0.5)] or [self.rng.choice(sorted(full))]
        patch = {k: full[k] for k in keys}
        if isinstance(patch.get("metadata"), dict):
            meta = patch["metadata"]
            patch["metadata"] = {k: v for k, v in meta.items() if k != "name" and self.chance(0.6)}
        if self.chance(0.2):
            nodes = _nodes(patch, 100)
            if nodes:
                container, key, _, _ = self.rng.choice(nodes)
                if isinstance(container, dict):
                    container[key] = None
        return patch

    # breaking things

    def other_type(self, value: Any) -> Any:
        if isinstance(value, bool):
            choices: tuple[Any, ...] = ("true", 1, None, [True], {"b": True})
        elif isinstance(value, (int, float)):
            choices = ("1", "x", [1], {"n": 1}, True, None)
        elif isinstance(value, str):
            choices = (123, -1, 1.5, True, None, [value], {"s": value}, ["a", "b"])
        elif isinstance(value, dict):
            choices = ("str", 1, [value], [["a", "b"]], True, None, [])
        elif isinstance(value, list):
            choices = ({"0": "a"}, "str", 1, None, True, {})
        else:
            choices = ({}, "x", 0, [], False)
        return copy.deepcopy(self.rng.choice(choices))

    def mutant(self) -> Any:
        """A value that fits no field."""
        r = self.rng.random()
        if r < 0.3:
            return Raw(self.rng.choice(RAW_TOKENS))
        if r < 0.45:
            return _deep(self.rng.choice(DEPTHS), self.chance(0.5))
        if r < 0.55:
            return "x" * self.rng.choice(LONG_LENGTHS[:3])
        if r < 0.7:
            return self.rng.choice(NUMBERS)
        if r < 0.8:
            return self.rng.choice(ODD_CHARS)
        return self.other_type(self.free())

    def mutate(self, kind: Kind, body: Any) -> tuple[Any, str]:
        """``body`` broken in one to three ways, and what was done."""
        labels = []
        for _ in range(self.rng.choice((1, 1, 1, 2, 3))):
            body, label = self.mutate_once(kind, body)
            labels.append(label)
        return body, "+".join(labels)

    def mutate_once(self, kind: Kind, body: Any) -> tuple[Any, str]:
        rng = self.rng
        how = self.weighted(MUTATIONS)
        nodes = _nodes(body)
        if how == "non-object" or not isinstance(body, dict):
            choices: tuple[Any, ...] = ([], [body], "text", 42, None, True, 1.5, Raw("NaN"))
            return rng.choice(choices), "non-object"
        meta = body.get("metadata")
        if how == "bad-name":
            if isinstance(meta, dict):
                meta["name"] = rng.choice(BAD_NAMES)
            else:
                body["metadata"] = {"name": rng.choice(BAD_NAMES)}
            return body, "bad-name"
        if how == "api-version":
            field = rng.choice(("apiVersion", "kind"))
            choices = (
                "v2",
                "batch/v1",
                "",
                1,
                None,
                "apps/v1beta1",
                "/",
                "a/b/c",
                "Pod",
                "configmap",
                "List",
            )
            if self.chance(0.2):
                body.pop(field, None)
            else:
                body[field] = rng.choice(choices)
            return body, f"wrong-{field}"
        if how == "metadata":
            return body, self.break_metadata(body)
        if how == "bad-base64":
            paths = self.schemas.byte_paths(self.schemas.resolve(kind.schema))
            path: list[str | int] = rng.choice(paths) if paths else ["data", "k"]
            _set_in(body, path, rng.choice(BAD_BASE64))
            return body, "bad-base64@" + ".".join(map(str, path))
        if how == "unknown-field":
            dicts = [v for _, _, v, _ in nodes if isinstance(v, dict)] + [body]
            rng.choice(dicts)[rng.choice(("zzUnknown", "Name", "metadata2", "$patch", ""))] = self.free()
            return body, "unknown-field"
        if not nodes:
            return body, "nothing-to-break"
        container, key, value, where = rng.choice(nodes)
        if how == "wrong-type":
            container[key] = self.other_type(value)
        elif how == "null":
            container[key] = None
        elif how == "number":
            numeric = [n for n in nodes if isinstance(n[2], (int, float)) and not isinstance(n[2], bool)]
            if numeric and self.chance(0.7):
                container, key, value, where = rng.choice(numeric)
            container[key] = rng.choice(NUMBERS)
        elif how == "raw-token":
            container[key] = Raw(rng.choice(RAW_TOKENS))
        elif how == "deep":
            depth = rng.choice(DEPTHS)
            container[key] = _deep(depth, self.chance(0.5))
            how = f"deep{depth}"
        elif how == "long":
            strings = [n for n in nodes if isinstance(n[2], str)]
            if strings:
                container, key, value, where = rng.choice(strings)
            length = rng.choice(LONG_LENGTHS) if self.chance(0.9) else 3_300_000  # over --max-request-bytes
            container[key] = "x" * length
            how = f"long{length}"
        elif how == "chars":
            strings = [n for n in nodes if isinstance(n[2], str)]
            if strings:
                container, key, value, where = rng.choice(strings)
            container[key] = rng.choice(ODD_CHARS) + (value if isinstance(value, str) else "")
        return body, f"{how}@{where}"

    def break_metadata(self, body: dict[str, Any]) -> str:
        rng = self.rng
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            body["metadata"] = meta = {}
        deep = _deep(rng.choice(DEPTHS), True)
        choices: dict[str, tuple[Any, ...]] = {
            "resourceVersion": ("", "0", "abc", "-1", "99999999999999999999", 1, str(self.state.max_rv), "1"),
            "uid": ("x", 1, "00000000-0000-4000-8000-000000000000", ""),
            "generation": (-1, "1", 2**63, 1.5),
            "creationTimestamp": ("yesterday", 0, "2024-13-45T99:99:99Z", "2024-01-01T00:00:00+25:00"),
            "deletionTimestamp": ("2024-01-01T00:00:00Z", "x"),
            "deletionGracePeriodSeconds": (30, -1, "x"),
            "finalizers": (
                ["a/b"],
                ["kubernetes"],
                [1],
                "x",
                ["bad finalizer"],
                ["x" * 300],
                [None],
                ["a/b", "a/b"],
            ),
            "ownerReferences": (
                [{}],
                [{"apiVersion": "v1", "kind": "Pod", "name": "f0", "uid": "u"}],
                "x",
                [{"uid": 1}],
                [{"apiVersion": "v1", "kind": "Pod", "name": "f0", "uid": "u", "controller": True}] * 2,
            ),
            "managedFields": (
                [
                    {
                        "manager": "x",
                        "operation": "Apply",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:data": {}},
                    }
                ],
                [{"fieldsType": "bogus"}],
                [{"manager": "x", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": deep}],
                "x",
                [{"manager": "x", "operation": "Update", "time": "x"}],
            ),
            "labels": (
                {"bad key!": "v"},
                {"a": "x" * 64},
                {"a": 1},
                {"a": None},
                ["a"],
                {"": ""},
                {"k8s.io/": "v"},
            ),
            "annotations": ({"a": "x" * 300_000}, {"a": 1}, {"A B": "c"}, {"a": None}, "x"),
            "namespace": ("other-ns", "", 1, MISSING_NAMESPACE),
            "generateName": ("BAD", "x" * 300, 1, "gen-"),
            "name": (1, None, ["f0"], {"n": "f0"}),
        }
        field = rng.choice(sorted(choices))
        meta[field] = copy.deepcopy(rng.choice(choices[field]))
        return f"metadata.{field}"

    def serialize(self, body: Any) -> tuple[bytes, str]:
        """The JSON text of ``body``; one time in ten broken on the way."""
        text = encode(body)
        if not self.chance(0.1):
            return text.encode(), ""
        how = self.rng.choice(
            (
                "truncated",
                "trailing",
                "bom",
                "bad-utf8",
                "duplicate-key",
                "empty",
                "whitespace",
                "garbage",
                "single-quotes",
                "comment",
                "yaml",
                "two-documents",
            )
        )
        data = text.encode()
        if how == "truncated" and len(data) > 1:
            data = data[: self.rng.randrange(1, len(data))]
        elif how == "trailing":
            data += self.rng.choice((b" x", b"}", b"]", b",", b"{}", b"\x00"))
        elif how == "bom":
            data = b"\xef\xbb\xbf" + data
        elif how == "bad-utf8":
            at = data.find(b'"') + 1
            data = data[:at] + self.rng.choice((b"\xff\xfe", b"\xc3", b"\xed\xa0\x80")) + data[at:]
        elif how == "duplicate-key" and data.startswith(b"{"):
            data = (
                self.rng.choice((b'{"metadata":{"name":"dup"},', b'{"kind":"Pod",', b'{"spec":1,')) + data[1:]
            )
        elif how == "empty":
            data = b""
        elif how == "whitespace":
            data = b"  \n\t"
        elif how == "garbage":
            data = self.rng.randbytes(self.rng.choice((1, 16, 1000)))
        elif how == "single-quotes":
            data = data.replace(b'"', b"'")
        elif how == "comment":
            data = b"/*x*/" + data
        elif how == "yaml":
            data = b"metadata:\n  name: f0\nspec: [\n"
        elif how == "two-documents":
            data += b"{}"
        return data, how

    def content_type(self) -> tuple[str | None, bool]:
        """A content type for a create or an update, and whether the body should be protobuf."""
        r = self.rng.random()
        if r < 0.88:
            return self.rng.choice(
                ("application/json", "application/json", "application/json;charset=utf-8")
            ), False
        if r < 0.93:
            return "application/yaml", False
        if r < 0.97:
            return "application/vnd.kubernetes.protobuf", True
        if r < 0.99:
            return self.rng.choice(("text/plain", "application/xml", "application/json-patch+json")), False
        return None, False

    def protobuf(self) -> bytes:
        prefixes = (
            b"",
            b"k8s\x00",
            b"k8s\x00\x0a\x08\x0a\x02v1\x12\x02Pod",
            b"k8s\x00\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
            b"k8s\x00\x12\x05\x0a\x03\x0a\x01a",
            b"k8s\x00\x0a\x00\x12\x80\x80\x80\x80\x10",
        )
        return self.rng.choice(prefixes) + self.rng.randbytes(self.rng.choice((0, 8, 64, 512)))

    def write_query(self) -> list[tuple[str, str]]:
        query: list[tuple[str, str]] = []
        if self.chance(0.08):
            query.append(("dryRun", self.rng.choice(("All", "All", "bogus", ""))))
        if self.chance(0.08):
            query.append(("fieldManager", self.rng.choice(("fuzz", "", "x" * 200, "a\nb", "kubectl-edit"))))
        if self.chance(0.12):
            query.append(
                ("fieldValidation", self.rng.choice(("Strict", "Warn", "Ignore", "strict", "bogus", "")))
            )
        if self.chance(0.04):
            query.append(("timeout", self.rng.choice(TIMEOUTS)))
        if self.chance(0.03):
            query.append(("pretty", self.rng.choice(("true", "1", "x"))))
        return query

    def list_query(self) -> list[tuple[str, str]]:
        rng = self.rng
        query: list[tuple[str, str]] = []
        if self.chance(0.3):
            query.append(
                ("limit", rng.choice(("1", "2", "5", "0", "-1", "abc", "1e3", "99999999999999999999", "500")))
            )
        if self.chance(0.15):
            garbage = (
                "abc",
                "",
                base64.b64encode(b'{"v":"meta.k8s.io/v1","rv":1,"start":"x"}').decode(),
                base64.b64encode(b'{"v":"meta.k8s.io/v1","rv":-5,"start":"\\u0000"}').decode(),
                base64.b64encode(b"[1,2]").decode(),
                "%%%",
                "eyJ",
            )
            known = list(self.state.continues)
            query.append(
                ("continue", rng.choice(known) if known and self.chance(0.6) else rng.choice(garbage))
            )
        if self.chance(0.3):
            query.append(("labelSelector", rng.choice(LABEL_SELECTORS)))
        if self.chance(0.25):
            query.append(("fieldSelector", rng.choice(FIELD_SELECTORS)))
        if self.chance(0.3):
            query.append(("resourceVersion", self.resource_version()))
        if self.chance(0.15):
            query.append(("resourceVersionMatch", rng.choice(("NotOlderThan", "Exact", "bogus", ""))))
        if self.chance(0.05):
            query.append(("allowWatchBookmarks", rng.choice(("true", "false"))))
        if self.chance(0.05):
            query.append(("sendInitialEvents", rng.choice(("true", "false", "x"))))
        if self.chance(0.05):
            query.append(("timeoutSeconds", rng.choice(("1", "-1", "x"))))
        if self.chance(0.03):
            query.append(("includeObject", rng.choice(("Object", "Metadata", "None", "bogus"))))
        if self.chance(0.03):
            query.append(("watch", rng.choice(("false", "0"))))
        return query

    def accept(self) -> str | None:
        if not self.chance(0.12):
            return None
        return self.rng.choice(
            (
                "application/json;as=Table;v=v1;g=meta.k8s.io",
                "application/json;as=Table;v=v1;g=meta.k8s.io, application/json",
                "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
                "application/vnd.kubernetes.protobuf",
                "application/yaml",
                "text/html",
            )
        )

    def delete_options(self, kind: Kind) -> tuple[bytes | None, str]:
        if self.chance(0.5):
            return None, ""
        rng = self.rng
        options: dict[str, Any] = {}
        if self.chance(0.5):
            options.update(kind="DeleteOptions", apiVersion=rng.choice(("v1", "meta.k8s.io/v1", "bogus/v9")))
        if self.chance(0.4):
            options["propagationPolicy"] = rng.choice(("Background", "Foreground", "Orphan", "bogus", "", 1))
        if self.chance(0.4):
            options["gracePeriodSeconds"] = rng.choice((0, 1, 30, -1, -100, 2**63, "5", 1.5, None))
        if self.chance(0.2):
            options["preconditions"] = copy.deepcopy(
                rng.choice(
                    (
                        {"uid": "x"},
                        {"resourceVersion": str(self.state.max_rv)},
                        {"uid": 1},
                        "x",
                        {"resourceVersion": "a"},
                    )
                )
            )
        if self.chance(0.1):
            options["dryRun"] = copy.deepcopy(rng.choice((["All"], ["bogus"], "All", [])))
        if self.chance(0.1):
            options["orphanDependents"] = rng.choice((True, False, "yes"))
        body: Any = options
        shape = "delete-options"
        if self.chance(0.2):
            body, shape = self.mutate(kind, options)
        data, broken = self.serialize(body)
        return data, f"{shape} {broken}".strip()

    def json_patch(self, target: Any) -> tuple[Any, str]:
        rng = self.rng
        if self.chance(0.08):
            return copy.deepcopy(rng.choice(INVALID_JSON_PATCHES)), "json-patch-invalid"
        pointers = _pointers(target)
        large = len(encode(target)) > COPY_LIMIT_BYTES
        ops: list[Any] = []
        copies = 0
        for _ in range(rng.choice((1, 1, 2, 3, 5))):
            op = rng.choice(("add", "add", "remove", "replace", "replace", "copy", "move", "test"))
            if op == "copy" and (copies >= MAX_COPIES or large):
                op = "add"
            copies += op == "copy"
            entry: dict[str, Any] = {"op": op, "path": self.pointer(pointers)}
            if op in ("add", "replace", "test"):
                entry["value"] = self.patch_value(pointers, entry["path"], op)
            if op in ("copy", "move"):
                entry["from"] = self.pointer(pointers, existing=True)
            if self.chance(0.04):
                damage = rng.choice(("no-path", "int-path", "bad-op", "null-from", "no-value"))
                if damage == "no-path":
                    del entry["path"]
                elif damage == "int-path":
                    entry["path"] = 1
                elif damage == "bad-op":
                    entry["op"] = rng.choice(("ADD", "inc", "", None))
                elif damage == "null-from":
                    entry["from"] = None
                else:
                    entry.pop("value", None)
            ops.append(entry)
        return ops, "json-patch:" + ",".join(str(o.get("op")) for o in ops)

    def pointer(self, pointers: list[tuple[str, Any]], existing: bool = False) -> str:
        r = self.rng.random()
        if pointers and (existing or r < 0.6):
            return self.rng.choice(pointers)[0]
        containers = [(p, v) for p, v in pointers if isinstance(v, (dict, list))]
        if containers and r < 0.87:
            base, value = self.rng.choice(containers)
            if isinstance(value, list):
                return f"{base}/{self.rng.choice(('-', '0', '99', '-1', '01', '1'))}"
            return f"{base}/{_escape(self.key())}"
        return self.rng.choice(ODD_POINTERS)

    def patch_value(self, pointers: list[tuple[str, Any]], path: str, op: str) -> Any:
        r = self.rng.random()
        if op == "test" and r < 0.5:
            matching = [v for p, v in pointers if p == path]
            if matching:
                return copy.deepcopy(matching[0])
        if pointers and r < 0.35:
            return copy.deepcopy(self.rng.choice(pointers)[1])
        if r < 0.7:
            return copy.deepcopy(
                self.rng.choice(("x", 1, True, {"a": "b"}, ["a"], "f0", None, {}, [], "fuzz=yes"))
            )
        return self.mutant()

    def strategic(self, kind: Kind, name: str, namespace: str) -> tuple[Any, str]:
        rng = self.rng
        patch: Any = self.partial(kind, name, namespace)
        labels = ["strategic"]
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            dicts = [v for _, _, v, _ in _nodes(patch) if isinstance(v, dict)] + [patch]
            target = rng.choice(dicts)
            lists = sorted(k for k, v in target.items() if isinstance(v, list))
            key = rng.choice(lists) if lists else rng.choice(("containers", "finalizers", "env", "ports"))
            directive = rng.choice(("patch", "order", "retain", "delete-from", "element"))
            labels.append(directive)
            if directive == "patch":
                target["$patch"] = rng.choice(("delete", "replace", "merge", "bogus", 1, None))
            elif directive == "order":
                orders: tuple[Any, ...] = (
                    [{"name": "c"}],
                    ["a", "b"],
                    "x",
                    [1],
                    [{}],
                    [{"name": "zz"}],
                    [{"name": "c"}] * 2,
                )
                target[f"$setElementOrder/{key}"] = copy.deepcopy(rng.choice(orders))
            elif directive == "retain":
                target["$retainKeys"] = copy.deepcopy(rng.choice((sorted(target)[:2], ["a"], "x", [1])))
            elif directive == "delete-from":
                target[f"$deleteFromPrimitiveList/{key}"] = copy.deepcopy(
                    rng.choice((["x"], "x", [1], [{"a": 1}]))
                )
            elif lists:
                items = target[key]
                items.append(
                    copy.deepcopy(rng.choice(({"name": "c", "$patch": "delete"}, {"$patch": "replace"}, 1)))
                )
        if self.chance(0.3):
            patch, mutated = self.mutate(kind, patch)
            labels.append(mutated)
        return patch, "+".join(labels)


# --- the fuzzer --------------------------------------------------------------------------------------------------


class Fuzzer:
    def __init__(self, seed: int, http: Http, kinds: list[Kind], schemas: Schemas) -> None:
        self.seed = seed
        self.http = http
        self.kinds = [k for k in kinds if "create" in k.verbs or "get" in k.verbs]
        self.schemas = schemas
        self.state = State()
        self.accepted: collections.Counter[str] = collections.Counter()  # writes answered 2xx, per kind

    async def run(self) -> None:
        async def worker(first: int) -> None:
            for index in range(first, REQUESTS, CONCURRENCY):
                await self.operate(index)

        await asyncio.gather(*(worker(w) for w in range(CONCURRENCY)))

    async def send(
        self, request: Request, kind: Kind | None = None, key: tuple[str, str] | None = None
    ) -> Answer:
        answer = await self.http.send(request)
        self.learn(answer, kind, key)
        if kind is not None and request.method in ("POST", "PUT", "PATCH") and 200 <= answer.status < 300:
            self.accepted[kind.plural] += 1
        return answer

    def learn(self, answer: Answer, kind: Kind | None, key: tuple[str, str] | None) -> None:
        """Remember versions, continue tokens and the last object seen under a name."""
        obj = answer.obj
        if not isinstance(obj, dict):
            return
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            rv = meta.get("resourceVersion")
            if isinstance(rv, str) and rv.isdigit():
                self.state.max_rv = max(self.state.max_rv, int(rv))
            token = meta.get("continue")
            if isinstance(token, str) and token:
                self.state.continues.append(token)
        if kind is None or key is None:
            return
        where = (kind.key, *key)
        if answer.status in (200, 201) and isinstance(meta, dict) and obj.get("kind") == kind.kind:
            if meta.get("name") == key[1]:
                self.state.known[where] = obj
            if kind.plural == "namespaces" and answer.status == 201:
                self.state.namespaces_made.add(key[1])
        elif answer.status == 404:
            self.state.known.pop(where, None)

    async def operate(self, index: int) -> None:
        rng = random.Random(f"{self.seed}:{index}")
        gen = Gen(rng, self.schemas, self.state)
        kind = rng.choice(self.kinds)
        allowed = tuple((op, w) for op, w in OPERATIONS if _allows(kind, op))
        op = gen.weighted(allowed)
        namespace = gen.namespace() if kind.namespaced else ""
        name = gen.name(kind)
        await getattr(self, "op_" + op.replace("-", "_"))(index, gen, kind, namespace, name)

    def target(self, kind: Kind, namespace: str, name: str, sub: str = "") -> tuple[str, str]:
        """The path of one object and its template."""
        return kind.path(namespace, name, sub), kind.template(kind.namespaced, True, sub)

    def collection(self, kind: Kind, namespace: str | None) -> tuple[str, str]:
        return kind.path(namespace), kind.template(kind.namespaced and namespace is not None, False)

    async def op_create(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        body: Any = gen.body(kind, name, namespace)
        shape = "valid"
        if gen.chance(0.55):
            body, shape = gen.mutate(kind, body)
        content_type, protobuf = gen.content_type()
        if protobuf:
            data, broken = gen.protobuf(), "protobuf"
        else:
            data, broken = gen.serialize(body)
        path, template = self.collection(kind, namespace)
        request = Request(
            "POST",
            path,
            template,
            index,
            tuple(gen.write_query()),
            data,
            content_type,
            gen.accept(),
            f"{shape} {broken}".strip(),
        )
        await self.send(request, kind, (namespace, name))

    async def op_update(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        body: Any = gen.body(kind, name, namespace)
        known = self.state.known.get((kind.key, namespace, name))
        if known is not None and isinstance(body.get("metadata"), dict) and gen.chance(0.6):
            body["metadata"]["resourceVersion"] = known["metadata"].get("resourceVersion")
        shape = "valid"
        if gen.chance(0.5):
            body, shape = gen.mutate(kind, body)
        content_type, protobuf = gen.content_type()
        data, broken = (gen.protobuf(), "protobuf") if protobuf else gen.serialize(body)
        path, template = self.target(kind, namespace, name)
        query = tuple(gen.write_query())
        request = Request(
            "PUT", path, template, index, query, data, content_type, gen.accept(), f"{shape} {broken}"
        )
        await self.send(request, kind, (namespace, name))

    async def op_readback(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        """Read an object back, change it (or not) and write it: finds states stored and then broken."""
        path, template = self.target(kind, namespace, name)
        answer = await self.send(Request("GET", path, template, index), kind, (namespace, name))
        if answer.status != 200 or not isinstance(answer.obj, dict):
            return
        body: Any = copy.deepcopy(answer.obj)  # the object State.known keeps stays as read
        r = gen.rng.random()
        shape = "as-read"
        if r < 0.3:
            pass
        elif r < 0.6:
            gen.enrich(kind, body, gen.rng.choice((1, 2)))
            shape = "read+schema-fields"
        elif r < 0.87:
            body, shape = gen.mutate(kind, body)
            shape = "read+" + shape
        elif r < 0.95:
            body.get("metadata", {})["resourceVersion"] = gen.rng.choice(("1", "", "abc"))
            shape = "read+stale-version"
        else:
            body.get("metadata", {})["name"] = "other"
            shape = "read+renamed"
        data, broken = gen.serialize(body)
        query = tuple(gen.write_query())
        request = Request(
            "PUT", path, template, index, query, data, "application/json", None, f"{shape} {broken}"
        )
        await self.send(request, kind, (namespace, name))

    async def op_status(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        path, template = self.target(kind, namespace, name, "status")
        key = (namespace, name)
        if gen.chance(0.15):
            await self.send(Request("GET", path, template, index, accept=gen.accept()), kind, key)
            return
        status = gen.status(kind)
        r = gen.rng.random()
        if r < 0.45:
            obj_path, obj_template = self.target(kind, namespace, name)
            answer = await self.send(Request("GET", obj_path, obj_template, index), kind, key)
            read = answer.obj if isinstance(answer.obj, dict) else gen.body(kind, name, namespace)
            body: Any = copy.deepcopy(read)
            body["status"] = status
            shape = "status-put"
            if gen.chance(0.4):
                body, shape = gen.mutate(kind, body)
            data, broken = gen.serialize(body)
            query = tuple(gen.write_query())
            request = Request(
                "PUT", path, template, index, query, data, "application/json", None, f"{shape} {broken}"
            )
        elif r < 0.8:
            patch: Any = {"status": status}
            shape = "status-merge"
            if gen.chance(0.4):
                patch, shape = gen.mutate(kind, patch)
            data, broken = gen.serialize(patch)
            content_type = gen.rng.choice(
                ("application/merge-patch+json", "application/strategic-merge-patch+json")
            )
            query = tuple(gen.write_query())
            request = Request(
                "PATCH", path, template, index, query, data, content_type, None, f"{shape} {broken}"
            )
        else:
            target = self.state.known.get((kind.key, namespace, name)) or {"status": status}
            ops, shape = gen.json_patch(target)
            data, broken = gen.serialize(ops)
            request = Request(
                "PATCH",
                path,
                template,
                index,
                (),
                data,
                "application/json-patch+json",
                None,
                f"status-{shape} {broken}",
            )
        await self.send(request, kind, key)

    async def op_json_patch(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        target = self.state.known.get((kind.key, namespace, name)) or gen.body(kind, name, namespace)
        ops, shape = gen.json_patch(target)
        data, broken = gen.serialize(ops)
        await self.patch(
            index, gen, kind, namespace, name, data, "application/json-patch+json", f"{shape} {broken}"
        )

    async def op_merge_patch(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        patch: Any = gen.partial(kind, name, namespace)
        shape = "merge"
        if gen.chance(0.3):
            patch, shape = gen.mutate(kind, patch)
        elif gen.chance(0.08):
            patch, shape = (
                copy.deepcopy(gen.rng.choice(([], "x", 1, None, [{"op": "add"}]))),
                "merge-non-object",
            )
        data, broken = gen.serialize(patch)
        await self.patch(
            index, gen, kind, namespace, name, data, "application/merge-patch+json", f"{shape} {broken}"
        )

    async def op_strategic_patch(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        patch, shape = gen.strategic(kind, name, namespace)
        data, broken = gen.serialize(patch)
        content_type = "application/strategic-merge-patch+json"
        await self.patch(index, gen, kind, namespace, name, data, content_type, f"{shape} {broken}")

    async def op_apply(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        body: Any = gen.body(kind, name, namespace)
        body["metadata"].pop("generateName", None)
        body["metadata"]["name"] = name
        shape = "apply"
        if gen.chance(0.25):
            body, shape = gen.mutate(kind, body)
        data, broken = gen.serialize(body)
        query: list[tuple[str, str]] = []
        if gen.chance(0.9):
            query.append(("fieldManager", gen.rng.choice(("fuzz", "fuzz-2", "kubectl"))))
        if gen.chance(0.3):
            query.append(("force", gen.rng.choice(("true", "false", "x"))))
        await self.patch(
            index,
            gen,
            kind,
            namespace,
            name,
            data,
            "application/apply-patch+yaml",
            f"{shape} {broken}",
            query,
        )

    async def patch(
        self,
        index: int,
        gen: Gen,
        kind: Kind,
        namespace: str,
        name: str,
        data: bytes,
        content_type: str,
        shape: str,
        query: list[tuple[str, str]] | None = None,
    ) -> None:
        if gen.chance(0.03):  # a patch in a type no patch is
            content_type = gen.rng.choice(
                ("application/json", "application/vnd.kubernetes.protobuf", "text/plain")
            )
        path, template = self.target(kind, namespace, name)
        full_query = tuple((query or []) + gen.write_query())
        request = Request(
            "PATCH", path, template, index, full_query, data, content_type, gen.accept(), shape.strip()
        )
        await self.send(request, kind, (namespace, name))

    async def op_get(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        subs = sorted(kind.subresources)
        sub = gen.rng.choice(subs) if subs and gen.chance(0.2) else ""
        path, template = self.target(kind, namespace, name, sub)
        query: list[tuple[str, str]] = []
        if gen.chance(0.3):
            query.append(("resourceVersion", gen.resource_version()))
        if sub == "log":
            options = (("tailLines", "-1"), ("limitBytes", "0"), ("sinceSeconds", "x"), ("container", "c"))
            query.extend(gen.rng.sample(options, gen.rng.randint(0, 2)))
        request = Request("GET", path, template, index, tuple(query), accept=gen.accept())
        await self.send(request, kind, (namespace, name))

    async def op_list(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        scope = namespace if kind.namespaced and gen.chance(0.7) else None
        path, template = self.collection(kind, scope)
        query = tuple(gen.list_query())
        await self.send(Request("GET", path, template, index, query, accept=gen.accept()))

    async def op_watch(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        """A watch that ends after one second, as timeoutSeconds=1 asks."""
        scope = namespace if kind.namespaced and gen.chance(0.7) else None
        if gen.chance(0.2):
            path, template = self.target(kind, namespace, name)
        else:
            path, template = self.collection(kind, scope)
        query = [(k, v) for k, v in gen.list_query() if k not in ("watch", "timeoutSeconds")]
        query += [("watch", gen.rng.choice(("1", "true"))), ("timeoutSeconds", "1")]
        await self.send(Request("GET", path, template, index, tuple(query), accept=gen.accept()))

    async def op_delete(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        path, template = self.target(kind, namespace, name)
        data, shape = gen.delete_options(kind)
        query: list[tuple[str, str]] = []
        if gen.chance(0.2):
            query.append(
                ("gracePeriodSeconds", gen.rng.choice(("0", "-1", "abc", "30", "99999999999999999999")))
            )
        if gen.chance(0.15):
            query.append(("propagationPolicy", gen.rng.choice(("Background", "Foreground", "Orphan", "x"))))
        if gen.chance(0.05):
            query.append(("orphanDependents", gen.rng.choice(("true", "false", "x"))))
        if gen.chance(0.08):
            query.append(("dryRun", "All"))
        content_type = "application/json" if data is not None else None
        request = Request("DELETE", path, template, index, tuple(query), data, content_type, None, shape)
        await self.send(request, kind, (namespace, name))

    async def op_deletecollection(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        # Never an unselected sweep of a cluster-scoped collection: it would take the server's own objects.
        selector = gen.rng.choice(("fuzz=yes", "app=f", "fuzz=yes,app=f", "a in", "!app"))
        query = [("labelSelector", selector)]
        if not kind.namespaced:
            query = [("labelSelector", "fuzz=yes" if selector == "!app" else selector)]
        elif gen.chance(0.3):
            query = []
        if gen.chance(0.2):
            query.append(("fieldSelector", gen.rng.choice(FIELD_SELECTORS)))
        path, template = self.collection(kind, namespace if kind.namespaced else None)
        data, shape = gen.delete_options(kind)
        content_type = "application/json" if data is not None else None
        await self.send(
            Request("DELETE", path, template, index, tuple(query), data, content_type, None, shape)
        )

    async def op_finalize(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        """Namespaces only: the finalize subresource kube-apiserver serves (and /status, fuzzed as any status)."""
        finalizers: tuple[Any, ...] = (
            ["kubernetes"],
            [],
            ["fuzz.example.com/x"],
            ["bad finalizer"],
            [1],
            "x",
            None,
        )
        body: Any = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name},
            "spec": {"finalizers": copy.deepcopy(gen.rng.choice(finalizers))},
        }
        shape = "finalize"
        if gen.chance(0.3):
            body, shape = gen.mutate(kind, body)
        data, broken = gen.serialize(body)
        path, template = self.target(kind, namespace, name, "finalize")
        method = gen.rng.choice(("PUT", "PUT", "GET", "PATCH"))
        content_type = "application/json" if method == "PUT" else "application/merge-patch+json"
        request = Request(method, path, template, index, (), data, content_type, None, f"{shape} {broken}")
        await self.send(request, kind, (namespace, name))

    async def op_odd(self, index: int, gen: Gen, kind: Kind, namespace: str, name: str) -> None:
        """Requests no client library sends: wrong methods, paths and credentials."""
        rng = gen.rng
        path, template = self.target(kind, namespace, name)
        collection, collection_template = self.collection(kind, namespace)
        body = gen.body(kind, name, namespace)
        data = encode(body).encode()
        variants: list[Request] = [
            Request("POST", path, template, index, (), data, "application/json"),
            Request("PUT", collection, collection_template, index, (), data, "application/json"),
            Request(
                "PATCH", collection, collection_template, index, (), b"{}", "application/merge-patch+json"
            ),
            Request(rng.choice(("OPTIONS", "HEAD", "TRACE", "FOO")), path, template, index),
            Request(
                "GET",
                path + "/" + rng.choice(("scale", "foo", "status/x", "log/x", "")),
                template + "/*",
                index,
            ),
            Request("GET", path.replace("/", "/%zz", 1), "/%zz" + template, index),
            Request("GET", path + "?x=%zz", template + "?x=%zz", index),
            Request(
                "GET",
                "/api/v1/namespaces/" + quote(namespace or "x", safe="") + "/namespaces/x",
                "/api/v1/..",
                index,
            ),
            Request("GET", "//" + path.lstrip("/"), "//" + template, index),
            Request("GET", "/api/v2/pods", "/api/v2/pods", index),
            Request("GET", f"/apis/{kind.group or 'core'}", "/apis/{group}", index),
            Request(
                "GET", "/openapi/v3/" + rng.choice(("bogus", "apis", "api/v1/x")), "/openapi/v3/*", index
            ),
            Request(
                "GET",
                "/openapi/v2",
                "/openapi/v2",
                index,
                accept="application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
            ),
            Request(
                "GET", rng.choice(("/", "/version", "/metrics", "/healthz", "/readyz?verbose")), "/*", index
            ),
            Request("GET", path, template, index, token=rng.choice(("", "wrong", "x" * 5000))),
            Request(
                "POST", collection, collection_template, index, (), data, "application/json", token="wrong"
            ),
            Request("GET", "/api/v1/" + "a/" * 200, "/api/v1/a/a/...", index),
        ]
        request = rng.choice(variants)
        await self.send(dataclasses.replace(request, shape="odd"))


def _allows(kind: Kind, op: str) -> bool:
    verbs = kind.verbs
    needs: dict[str, bool] = {
        "create": "create" in verbs,
        "update": "update" in verbs,
        "readback": "update" in verbs and "get" in verbs,
        "status": "status" in kind.subresources,
        "json-patch": "patch" in verbs,
        "merge-patch": "patch" in verbs,
        "strategic-patch": "patch" in verbs,
        "apply": "patch" in verbs,
        "get": "get" in verbs,
        "list": "list" in verbs,
        "delete": "delete" in verbs,
        "deletecollection": "deletecollection" in verbs,
        "watch": "watch" in verbs,
        "finalize": kind.plural == "namespaces",
        "odd": True,
    }
    return needs[op]


# --- after the run: everything stored can be read, written back and deleted ------------------------------------


@dataclasses.dataclass(frozen=True)
class Stored:
    kind: Kind
    namespace: str
    name: str
    uid: str

    @property
    def label(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind.plural}.{self.kind.group or 'core'} {where}{self.name}"

    @property
    def cache_key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def _without_managed_fields(obj: Any) -> Any:
    """An object as a report shows it: its managedFields say little and take most of the room."""
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        return obj
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    return {**obj, "metadata": meta}


def _reason(answer: Answer) -> str:
    obj = answer.obj
    if isinstance(obj, dict) and "message" in obj:
        return f"{answer.status} {obj.get('reason', '')}: {str(obj['message'])[:300]}"
    return f"{answer.status} {answer.body[:300].decode(errors='replace')}"


class Cleanup:
    def __init__(self, http: Http, client: KubeClient, fuzz_namespaces: set[str]) -> None:
        self.http = http
        self.client = client
        self.fuzz_namespaces = fuzz_namespaces
        self.problems: list[str] = []
        self.deleted: list[Stored] = []

    async def run(self) -> int:
        """Check every stored object; returns how many there were."""
        kinds, _ = await discover(self.http)
        listable = [k for k in kinds if "list" in k.verbs]
        stored: list[Stored] = []
        for kind in listable:
            path = kind.path()
            answer = await self.http.send(Request("GET", path, kind.template(False, False)))
            if answer.status != 200 or not isinstance(answer.obj, dict):
                self.problems.append(f"LIST {path}: {_reason(answer)}")
                continue
            for item in answer.obj.get("items", []):
                meta = item.get("metadata", {})
                stored.append(
                    Stored(kind, meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""))
                )

        def order(s: Stored) -> int:
            return {"namespaces": 1, "customresourcedefinitions": 2}.get(s.kind.plural, 0)

        informers = {k.key: Informer(self.client, k.resource) for k in listable}
        for informer in informers.values():
            informer.start()
        try:
            try:
                async with asyncio.timeout(SYNC_WITHIN):
                    await asyncio.gather(*(i.wait_for_sync() for i in informers.values()))
            except TimeoutError:
                unsynced = [key for key, i in informers.items() if not i.has_synced]
                self.problems.append(f"no informer sync within {SYNC_WITHIN:.0f} s for {unsynced}")
            for phase in (0, 1, 2):
                await _bounded(self.check(s) for s in stored if order(s) == phase)
            await _bounded(self.unblock(s) for s in self.deleted)
            await self.wait_gone(informers)
        finally:
            for informer in informers.values():
                await informer.stop()
        return len(stored)

    async def check(self, stored: Stored) -> None:
        """GET, PUT what GET returned (again on a 409), then DELETE at once."""
        kind = stored.kind
        path = kind.path(stored.namespace, stored.name)
        template = kind.template(kind.namespaced, True)
        answer = await self.http.send(Request("GET", path, template))
        if answer.status == 404:
            return  # gone with its namespace or its owner meanwhile
        if answer.status != 200 or not isinstance(answer.obj, dict):
            self.problems.append(f"{stored.label}: GET answered {_reason(answer)}")
            return
        for _ in range(3):
            put = await self.http.send(
                Request(
                    "PUT", path, template, body=encode(answer.obj).encode(), content_type="application/json"
                )
            )
            if put.status != 409:
                break
            answer = await self.http.send(Request("GET", path, template))
            if answer.status != 200:
                break
        if put.status not in (200, 404):
            sent = encode(_without_managed_fields(answer.obj))[:400]
            self.problems.append(
                f"{stored.label}: PUT of what GET returned answered {_reason(put)}; object: {sent}"
            )
        if kind.plural == "namespaces" and stored.name not in self.fuzz_namespaces:
            return  # default, kube-system, ...: the run did not make them
        if "delete" not in kind.verbs:
            return
        options = b'{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0,"propagationPolicy":"Background"}'
        deleted = await self.http.send(
            Request("DELETE", path, template, body=options, content_type="application/json")
        )
        if deleted.status not in (200, 202, 404):
            self.problems.append(f"{stored.label}: DELETE answered {_reason(deleted)}")
            return
        self.deleted.append(stored)

    async def unblock(self, stored: Stored) -> None:
        """An object the run gave finalizers: take them away, as its controller (or an admin) would."""
        kind = stored.kind
        path = kind.path(stored.namespace, stored.name)
        template = kind.template(kind.namespaced, True)
        if kind.plural == "namespaces":
            await self.finalize(stored)
        for _ in range(3):
            answer = await self.http.send(Request("GET", path, template))
            if answer.status != 200 or not isinstance(answer.obj, dict):
                return
            obj = answer.obj
            meta = obj.get("metadata", {})
            if meta.get("uid") != stored.uid or not meta.get("finalizers"):
                return
            meta["finalizers"] = []
            put = await self.http.send(
                Request("PUT", path, template, body=encode(obj).encode(), content_type="application/json")
            )
            if put.status != 409:
                if put.status not in (200, 404):
                    self.problems.append(f"{stored.label}: PUT without finalizers answered {_reason(put)}")
                return

    async def finalize(self, stored: Stored) -> None:
        """A namespace the run gave finalizers of its own (spec.finalizers): drop them through the finalize
        subresource, as ``kubectl replace --raw .../finalize`` does; only the namespace controller's is kept."""
        kind = stored.kind
        path = kind.path(None, stored.name)
        answer = await self.http.send(Request("GET", path, kind.template(False, True)))
        if answer.status != 200 or not isinstance(answer.obj, dict):
            return
        obj = answer.obj
        spec = obj.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("finalizers"), list):
            return
        finalizers = spec["finalizers"]
        if all(f == "kubernetes" for f in finalizers):
            return
        spec["finalizers"] = [f for f in finalizers if f == "kubernetes"]
        obj.get("metadata", {}).pop("resourceVersion", None)  # namespaces take unconditional updates
        finalize = kind.path(None, stored.name, "finalize")
        template = kind.template(False, True, "finalize")
        put = await self.http.send(
            Request("PUT", finalize, template, body=encode(obj).encode(), content_type="application/json")
        )
        if put.status != 200:
            self.problems.append(
                f"{stored.label}: PUT {finalize} without the finalizers {finalizers} answered {_reason(put)}"
            )

    async def wait_gone(self, informers: dict[str, Informer]) -> None:
        """Until no deleted object is left, as the informers' watches see it."""

        def left() -> list[Stored]:
            remaining = []
            for stored in self.deleted:
                informer = informers[stored.kind.key]
                cached = informer.get(stored.cache_key)
                if not informer.has_synced or (
                    cached is not None and cached["metadata"].get("uid") == stored.uid
                ):
                    remaining.append(stored)
            return remaining

        try:
            await Changes(*informers.values()).until(lambda: not left(), within=CLEANUP_WITHIN)
        except TimeoutError:
            for stored in left():
                self.problems.append(
                    f"{stored.label}: still there {CLEANUP_WITHIN:.0f} s after its DELETE: {await self.describe(stored)}"
                )

    async def describe(self, stored: Stored) -> str:
        kind = stored.kind
        answer = await self.http.send(
            Request("GET", kind.path(stored.namespace, stored.name), kind.template(kind.namespaced, True))
        )
        if answer.status != 200 or not isinstance(answer.obj, dict):
            return f"GET answered {_reason(answer)}"
        meta = answer.obj.get("metadata", {})
        spec = answer.obj.get("spec") if kind.plural == "namespaces" else None
        status = answer.obj.get("status") if kind.plural == "namespaces" else None
        text = (
            f"deletionTimestamp={meta.get('deletionTimestamp')} finalizers={meta.get('finalizers')} "
            f"ownerReferences={meta.get('ownerReferences')}"
        )
        if spec is not None:
            text += f" spec={json.dumps(spec)[:200]} status={json.dumps(status)[:300]}"
        return text


async def _bounded(coroutines: Iterable[Any], limit: int = CONCURRENCY) -> None:
    semaphore = asyncio.Semaphore(limit)

    async def one(coroutine: Any) -> None:
        async with semaphore:
            await coroutine

    await asyncio.gather(*(one(c) for c in coroutines))


# --- the test ----------------------------------------------------------------------------------------------------


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    running = ApiServer(server_config(tmp_path / "state"))
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


async def _install(http: Http, client: KubeClient) -> None:
    """Our own CustomResourceDefinitions, Established, and the namespaces the run starts with."""
    crds = Resource(
        "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
    )
    informer = Informer(client, crds)
    changes = Changes(informer)
    informer.start()
    try:
        for crd in SEEDED_CRDS:
            path = crds.path()
            answer = await http.send(
                Request("POST", path, path, body=encode(crd).encode(), content_type="application/json")
            )
            assert answer.status == 201, _reason(answer)

        def established() -> bool:
            ready = 0
            for crd in SEEDED_CRDS:
                obj = informer.get(crd["metadata"]["name"]) or {}
                conditions = (obj.get("status") or {}).get("conditions") or []
                ready += any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
            return ready == len(SEEDED_CRDS)

        await changes.until(established, within=SYNC_WITHIN)
    finally:
        await informer.stop()
    for name in NAMESPACES:
        body = encode({"metadata": {"name": name}}).encode()
        answer = await http.send(
            Request(
                "POST", "/api/v1/namespaces", "/api/v1/namespaces", body=body, content_type="application/json"
            )
        )
        assert answer.status == 201, _reason(answer)


def _example(failure: Failure) -> str:
    request = failure.request
    query = "?" + urlencode(request.query, quote_via=quote)[:200] if request.query else ""
    body = (request.body or b"")[:300].decode(errors="replace")
    text = (
        f"      e.g. #{request.index} {request.method} {request.path[:200]}{query}\n"
        f"        content-type {request.content_type}, shape {request.shape!r}\n"
        f"        body {body!r}\n"
        f"        answer {failure.answer[:300]!r}"
    )
    return text + (f"\n        server log: {failure.cause}" if failure.cause else "")


def _report(http: Http, problems: list[str], server_log: ServerLog) -> str:
    """Every 5xx grouped by what it says, then by (method, path template), with counts and one example each."""
    groups: dict[tuple[int, str], dict[tuple[str, str], list[Failure]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    for failure in http.failures:
        groups[failure.what][failure.where].append(failure)
    distinct = sum(len(places) for places in groups.values())
    lines = [
        f"{len(http.failures)} 5xx answers (or hangs), {distinct} distinct (method, path, status, message):"
    ]
    ranked = sorted(groups.items(), key=lambda g: -sum(len(f) for f in g[1].values()))
    for (status, what), places in ranked[:LISTED]:
        total = sum(len(f) for f in places.values())
        lines.append(f"- {total}x {status} {what}")
        by_count = sorted(places.items(), key=lambda p: -len(p[1]))
        for (method, template), found in by_count[:3]:
            lines.append(f"    {len(found)}x {method} {template}")
            lines.append(_example(found[0]))
        if len(by_count) > 3:
            rest = ", ".join(f"{m} {t} ({len(f)}x)" for (m, t), f in by_count[3:])
            lines.append(f"    also: {rest}")
    if problems:
        lines.append(
            f"{len(problems)} cleanup failures (stored objects that cannot be read, written or deleted):"
        )
        lines.extend(f"- {p}" for p in problems[:LISTED])
    if server_log.background:
        lines.append("errors the server logged outside any request:")
        lines.extend(f"- {n}x {text}" for text, n in server_log.background.most_common(10))
    return "\n".join(lines)


@pytest.mark.timeout(900)
async def test_fuzzed_requests_get_no_5xx_and_leave_nothing_undeletable(server: ApiServer) -> None:
    seed = int(os.environ.get(SEED_ENV) or DEFAULT_SEED)
    print(f"\nfuzz: seed {seed} (repeat with {SEED_ENV}={seed})")
    server_log = ServerLog()
    logger = logging.getLogger("multiqueue")
    logger.addHandler(server_log)
    propagate, logger.propagate = logger.propagate, False  # thousands of 500s: the report lists them, grouped
    connector = aiohttp.TCPConnector(limit=CONCURRENCY * 2)
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            http = Http(session, server.url, server.config.token, server_log)
            client = await client_for(server)
            try:
                await _install(http, client)
                kinds, schemas = await discover(http)
                print("fuzz: kinds " + ", ".join(f"{k.plural}.{k.group or 'core'}" for k in kinds))
                fuzzer = Fuzzer(seed, http, kinds, schemas)
                started = time.monotonic()
                await fuzzer.run()
                fuzz_seconds = time.monotonic() - started
                fuzz_sent, fuzz_statuses = http.sent, http.statuses.copy()
                started = time.monotonic()
                cleanup = Cleanup(http, client, set(NAMESPACE_POOL) | fuzzer.state.namespaces_made)
                objects = await cleanup.run()
                cleanup_seconds = time.monotonic() - started
            finally:
                await client.close()
    finally:
        logger.removeHandler(server_log)
        logger.propagate = propagate
    statuses = " ".join(f"{code}:{n}" for code, n in sorted(fuzz_statuses.items()))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"fuzz: seed {seed}: {fuzz_sent} requests in {fuzz_seconds:.0f} s ({statuses}); "
        f"cleanup: {objects} objects, {http.sent - fuzz_sent} requests in {cleanup_seconds:.0f} s; "
        f"{len(http.failures)} 5xx, {len(cleanup.problems)} cleanup failures, "
        f"{len(http.disconnects)} disconnects; peak RSS {peak_mb:.0f} MB"
    )
    print(
        "fuzz: writes accepted per kind: " + ", ".join(f"{k} {n}" for k, n in sorted(fuzzer.accepted.items()))
    )
    assert fuzz_sent >= REQUESTS
    assert not http.failures and not cleanup.problems, _report(http, cleanup.problems, server_log)
