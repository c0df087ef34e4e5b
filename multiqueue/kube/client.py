"""An async REST client for one cluster: plain dicts in and out, typed errors, declared retries, a rate limit.

One :class:`KubeClient` per cluster, each with its own connections (kept-alive ones for requests answered in one
piece, kube/connections.py; an aiohttp session for streamed answers), so a slow cluster never holds up requests
to another. Transient failures (connection errors, timeouts, 429, 500/502/503/504) are retried with jittered
exponential back-off, 429 after the server's Retry-After; a 409 is never retried here, because only the caller
can decide again from a fresh read.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final

import aiohttp
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from multiqueue import __version__
from multiqueue.api import fastjson
from multiqueue.api.types import PODS, Obj, Resource
from multiqueue.kube.config import Credentials, load_credentials
from multiqueue.kube.connections import Connections, NoAnswer, cannot_connect
from multiqueue.kube.errors import ApiError, TooManyRequests, TransportError, error_for
from multiqueue.loop.collector import collector_paused

MERGE: Final = "application/merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
STRATEGIC: Final = "application/strategic-merge-patch+json"
PATCH_TYPES: Final = {"merge": MERGE, "json": JSON_PATCH, "strategic": STRATEGIC}
RETRIABLE_CODES: Final = frozenset({429, 500, 502, 503, 504})
# A body this large (a list of many objects) is decoded with the cyclic garbage collector paused: decoded JSON
# holds no reference cycles, yet the collections its many new dicts set off cost several times the decoding.
LARGE_BODY: Final = 1 << 16


@dataclasses.dataclass
class ClientOptions:
    qps: float = 200.0
    burst: int = 400
    request_timeout: float = 30.0
    # How long a watch may stay silent before we assume the connection is dead. The server sends bookmarks
    # at least every minute, so silence past this means the socket is gone.
    watch_read_timeout: float = 120.0
    max_attempts: int = 6
    max_retry_delay: float = 60.0
    # Who the requests come from, as servers log and count them (and name the field manager of writes after).
    user_agent: str = f"multiqueue/{__version__}"


class RateLimiter:
    """A token bucket: ``burst`` requests at once, ``qps`` sustained. Taking a token does not await, so on one
    event loop it needs no lock: a request that must wait has its turn reserved before it sleeps."""

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._stamp = clock()

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now
        self._tokens -= 1
        if self._tokens < 0:
            await self._sleep(-self._tokens / self.qps)


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, TransportError):
        return True
    return isinstance(exc, ApiError) and exc.code in RETRIABLE_CODES


def _wait(state: RetryCallState) -> float:
    """Retry-After when a 429 gives one, else jittered exponential back-off."""
    outcome = state.outcome
    exc = outcome.exception() if outcome is not None else None
    if isinstance(exc, TooManyRequests) and exc.retry_after is not None:
        return exc.retry_after
    return float(wait_random_exponential(multiplier=0.05, max=10)(state))


class KubeClient:
    """Talks to one cluster. Create with :meth:`connect` (or from loaded credentials) and ``await close()``."""

    def __init__(
        self, credentials: Credentials, name: str = "", options: ClientOptions | None = None
    ) -> None:
        self.name = name or credentials.context
        self.credentials = credentials
        self.options = options or ClientOptions()
        self.limiter = RateLimiter(self.options.qps, self.options.burst)
        self.requests: collections.Counter[str] = collections.Counter()  # by verb, for benchmarks and tests
        # Answers by (HTTP method, status code or "<error>" when none came), as client-go's rest_client_requests_total.
        self.responses: collections.Counter[tuple[str, str]] = collections.Counter()
        self._connections = Connections(credentials.server, credentials.ssl, self.options.request_timeout)
        self._headers = {"User-Agent": self.options.user_agent, "Accept": "application/json, */*"}
        connector = aiohttp.TCPConnector(limit=100, ssl=credentials.ssl)
        self._session = aiohttp.ClientSession(
            base_url=credentials.server,
            connector=connector,
            headers={"User-Agent": self.options.user_agent},
            timeout=aiohttp.ClientTimeout(total=self.options.request_timeout),
        )

    @classmethod
    async def connect(
        cls,
        kubeconfig: Path | None,
        context: str | None = None,
        name: str = "",
        options: ClientOptions | None = None,
        allow_insecure: bool = False,
    ) -> KubeClient:
        credentials = await load_credentials(kubeconfig, context, allow_insecure=allow_insecure)
        return cls(credentials, name, options)

    async def close(self) -> None:
        await self._connections.close()
        await self._session.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- verbs -----------------------------------------------------------------------------------------------

    async def get(
        self, resource: Resource, name: str, namespace: str | None = None, subresource: str | None = None
    ) -> Obj:
        return await self._json("GET", resource.path(namespace, name, subresource))  # type: ignore[no-any-return]

    async def list_page(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> Obj:
        params = _params(
            labelSelector=label_selector,
            fieldSelector=field_selector,
            limit=limit,
            resourceVersion=resource_version,
        )
        if continue_token:
            params["continue"] = continue_token
        return await self._json("GET", resource.path(namespace), params=params, verb="list")  # type: ignore[no-any-return]

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> tuple[list[Obj], str]:
        """Every matching object, fetched page by page, and the resourceVersion to watch from."""
        items: list[Obj] = []
        token: str | None = None
        while True:
            page = await self.list_page(
                resource,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=page_size,
                continue_token=token,
            )
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion", ""))

    async def create(
        self, resource: Resource, obj: Obj, namespace: str | None = None, dry_run: bool = False
    ) -> Obj:
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        params = {"dryRun": "All"} if dry_run else None
        return await self._json("POST", resource.path(ns), json_body=obj, params=params)  # type: ignore[no-any-return]

    async def update(self, resource: Resource, obj: Obj, subresource: str | None = None) -> Obj:
        meta = obj.get("metadata") or {}
        path = resource.path(meta.get("namespace"), meta["name"], subresource)
        return await self._json("PUT", path, json_body=obj)  # type: ignore[no-any-return]

    async def update_status(self, resource: Resource, obj: Obj) -> Obj:
        return await self.update(resource, obj, "status")

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> Obj:
        headers = {"Content-Type": PATCH_TYPES[patch_type]}
        path = resource.path(namespace, name, subresource)
        return await self._json("PATCH", path, json_body=patch, headers=headers)  # type: ignore[no-any-return]

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str | None = None,
        preconditions: Mapping[str, str] | None = None,
        grace_period_seconds: int | None = None,
    ) -> Obj:
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation:
            body["propagationPolicy"] = propagation
        if preconditions:
            body["preconditions"] = dict(preconditions)
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        return await self._json("DELETE", resource.path(namespace, name), json_body=body)  # type: ignore[no-any-return]

    async def get_raw(self, path: str) -> Any:
        """A path outside the resource API (``/metrics``, ``/version``), as ``kubectl get --raw``: parsed JSON, or
        the text."""
        return await self._json("GET", path)

    async def probe(self, deadline: float) -> None:
        """Ask ``/readyz`` once, with no retries: whether the server answers within ``deadline`` seconds."""
        try:
            async with asyncio.timeout(deadline):
                await self._once("GET", "/readyz", None, None, None, "probe")
        except TimeoutError:
            raise TransportError(f"GET /readyz on {self.name}: no answer within {deadline:g}s") from None

    async def read_log(self, name: str, namespace: str, query: LogQuery | None = None) -> str:
        params = (query or LogQuery()).params()
        response = await self._request("GET", PODS.path(namespace, name, "log"), params=params, verb="get")
        return response if isinstance(response, str) else json.dumps(response)

    async def follow_log(
        self, name: str, namespace: str, query: LogQuery | None = None
    ) -> AsyncIterator[str]:
        """Lines of a pod's log as they are written (``kubectl logs -f``), until the container ends."""
        params = (query or LogQuery()).params(follow="true")
        async for line in self._stream(
            PODS.path(namespace, name, "log"), params, "get", None, f"logs of {namespace}/{name}"
        ):
            yield line.decode(errors="replace").rstrip("\n")

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str = "",
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        bookmarks: bool = True,
    ) -> AsyncIterator[Obj]:
        """Watch events as dicts ({"type", "object"}); an in-stream ERROR raises its typed error (410 -> Gone).

        The stream ends normally when the server's timeout passes; callers watch again from the last
        resourceVersion they saw.
        """
        params = _params(
            watch="true",
            resourceVersion=resource_version or None,
            labelSelector=label_selector,
            fieldSelector=field_selector,
            timeoutSeconds=timeout_seconds,
            allowWatchBookmarks="true" if bookmarks else None,
        )
        what = f"watch {resource.plural}"
        async for line in self._stream(
            resource.path(namespace), params, "watch", self.options.watch_read_timeout, what
        ):
            if not line.strip():
                continue
            try:
                event = fastjson.loads(line)
            except ValueError as exc:
                raise TransportError(f"{what} on {self.name}: {exc}") from exc
            if event.get("type") == "ERROR":
                status = event.get("object") or {}
                raise error_for(int(status.get("code") or 500), status)
            yield event

    async def _stream(
        self, path: str, params: Mapping[str, str], verb: str, read_timeout: float | None, what: str
    ) -> AsyncIterator[bytes]:
        """Lines of a long-running response; a silent socket past ``read_timeout`` counts as a dead connection."""
        await self.limiter.acquire()
        self.requests[verb] += 1
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.options.request_timeout, sock_read=read_timeout
        )
        answered = False
        try:
            async with self._session.get(
                path, params=params, headers=await self.credentials.auth_headers(), timeout=timeout
            ) as response:
                answered = True
                self.responses[("GET", str(response.status))] += 1
                if response.status >= 400:
                    raise error_for(response.status, await _status_body(response))
                async for line in response.content:
                    yield line
        except (aiohttp.ClientError, TimeoutError) as exc:
            if not answered:
                self.responses[("GET", "<error>")] += 1
            raise TransportError(f"{what} on {self.name}: {unanswered(exc)}") from exc
        except RuntimeError as exc:
            if not self._session.closed:
                raise
            raise TransportError(f"{what} on {self.name}: the client is closed") from exc

    # --- plumbing --------------------------------------------------------------------------------------------

    async def _json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
        verb: str | None = None,
    ) -> Any:
        return await self._request(
            method, path, params=params, json_body=json_body, headers=headers, verb=verb
        )

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
        verb: str | None = None,
    ) -> Any:
        verb = verb or method.lower()
        # The first attempt runs outside the retry machinery, which costs more CPU than the request's own Python
        # work, and nearly every request succeeds at once. A transient failure is handed to tenacity as its first
        # attempt's outcome, so the attempts counted, the waits and the stop rules are the same as without this.
        try:
            return await self._once(method, path, params, json_body, headers, verb)
        except Exception as exc:
            if not _transient(exc):
                raise
            failed: BaseException | None = exc

        async def attempt() -> Any:
            nonlocal failed
            if failed is not None:
                error, failed = failed, None
                raise error
            return await self._once(method, path, params, json_body, headers, verb)

        retrying = AsyncRetrying(
            retry=retry_if_exception(_transient),
            wait=_wait,
            stop=stop_after_attempt(self.options.max_attempts)
            | stop_after_delay(self.options.max_retry_delay),
            reraise=True,
        )
        return await retrying(attempt)

    async def _once(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        json_body: Any,
        headers: Mapping[str, str] | None,
        verb: str,
    ) -> Any:
        refreshed = False
        body = None if json_body is None else fastjson.dumps(json_body)
        while True:
            await self.limiter.acquire()
            self.requests[verb] += 1
            all_headers = {**self._headers, **(await self.credentials.auth_headers(force_refresh=refreshed))}
            if body is not None:
                all_headers["Content-Type"] = "application/json"
            all_headers.update(headers or {})
            try:
                answer = await self._connections.request(method, path, params, all_headers, body)
            except (NoAnswer, TimeoutError) as exc:
                self.responses[(method, "<error>")] += 1
                why = str(exc) if isinstance(exc, NoAnswer) else "no answer in time"
                raise TransportError(f"{method} {path} on {self.name}: {why}") from exc
            self.responses[(method, str(answer.status))] += 1
            if answer.status == 401 and not refreshed and self.credentials._refreshable:
                refreshed = True  # an expired exec/OIDC credential: refresh once and try again
                continue
            if answer.status >= 400:
                raise error_for(answer.status, status_of(answer.status, answer.text(), answer.reason))
            if answer.content_type == "application/json":
                return decoded(answer.body)
            return answer.text()


def decoded(body: bytes) -> Any:
    """A JSON response body as plain dicts; a large one without collections of garbage while it is decoded."""
    if len(body) < LARGE_BODY:
        return fastjson.loads(body)
    with collector_paused():
        return fastjson.loads(body)


def unanswered(exc: aiohttp.ClientError | TimeoutError) -> str:
    """Why a request got no answer, in a person's words rather than the client library's internals."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"the TLS certificate of {exc.host}:{exc.port} is not trusted ({exc.certificate_error})"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return cannot_connect(exc.host, exc.port, exc.os_error)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the server closed the connection without answering"
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def _status_body(response: aiohttp.ClientResponse) -> Obj:
    return status_of(response.status, await response.text(), response.reason or "")


def status_of(code: int, text: str, reason: str) -> Obj:
    """The API Status of an error answer: its body when it is one, else one made of the code and the text."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        return body
    return {
        "kind": "Status",
        "status": "Failure",
        "code": code,
        "message": text.strip()[:500] or reason,
    }


@dataclasses.dataclass(frozen=True)
class LogQuery:
    """Which of a pod's log to read: one container's (None: its only one), the last lines only, time-stamped."""

    container: str | None = None
    tail_lines: int | None = None
    timestamps: bool = False

    def params(self, **extra: str) -> dict[str, str]:
        return _params(
            container=self.container, tailLines=self.tail_lines, timestamps=self.timestamps or None, **extra
        )


def _params(**values: Any) -> dict[str, str]:
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in values.items() if v is not None}
