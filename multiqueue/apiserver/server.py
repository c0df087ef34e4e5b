"""The HTTP face of a local API server: routing, authentication, content negotiation, watch streams.

Everything a client can observe goes through here as it would on a real API server: Status bodies for every
error, Tables for ``kubectl get``, newline-delimited watch events with bookmarks, health and metrics endpoints.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import random
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from multiqueue.api import errors, evictions, fastjson
from multiqueue.api.meta import as_dict, metadata, path_segment_name_errors
from multiqueue.api.query import flag, go_duration
from multiqueue.api.types import Obj
from multiqueue.apiserver import (
    decoding,
    discovery,
    openapi,
    openapi_v2,
    protobuf,
    reviews,
    tables,
    watches,
)
from multiqueue.apiserver.apiservice import ApiServicePublisher
from multiqueue.apiserver.authentication import Authenticator
from multiqueue.apiserver.backend import Backend
from multiqueue.apiserver.connections import GuardedSite, HeaderDeadlineHandler
from multiqueue.apiserver.metrics import RequestMetrics
from multiqueue.apiserver.podlog import PodLogs
from multiqueue.apiserver.registry import Registry
from multiqueue.apiserver.resources import ResourceType
from multiqueue.apiserver.rest import APPLY_PATCH, ApiError, Rest, decode_continue
from multiqueue.apiserver.rules import godecode, listoptions, managedfields
from multiqueue.apiserver.store import (
    DEFAULT_WINDOW,
    DEFAULT_WINDOW_BYTES,
    Expired,
    ObjectTooLarge,
    Store,
)
from multiqueue.loop.files import private_dirs

log = logging.getLogger(__name__)

UNAUTHENTICATED_PATHS: Final = frozenset({"/healthz", "/livez", "/readyz", "/version"})
LINGERING_TIME: Final = 2.0
MAX_HEADER_BYTES: Final = 1 << 20  # Go's http.Server MaxHeaderBytes, as kube-apiserver serves
INITIAL_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")
# Requests kube-apiserver never times out (its LongRunningFunc): watches, and these subresources.
LONG_RUNNING_SUBRESOURCES: Final = frozenset({"attach", "exec", "log", "portforward", "proxy"})
REQUEST_TIMED_OUT: Final = "Timeout: request did not complete within the allotted timeout"
SHUTTING_DOWN: Final = "The apiserver is shutting down, please try again later."
# How often an eviction reads the pod again when its status changed under the DisruptionTarget write.
EVICTION_ATTEMPTS: Final = 5
# What Go's net/http answers a request line it cannot parse (an invalid %-escape), before any handler runs.
BAD_REQUEST_TEXT: Final = "400 Bad Request"
_BAD_ESCAPE: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
UNKNOWN_FORMAT: Final = "the body of the request was in an unknown format - accepted media types include:"
LIST_TOO_OLD: Final = "The resourceVersion for the provided list is too old."
JSON_TYPES: Final = (
    "application/json, application/json-patch+json, application/merge-patch+json, "
    "application/strategic-merge-patch+json"
)
# How many encoded watch events are kept for the other watches of their resource to send.
ENCODED_EVENTS: Final = 4096
MetricLabels = tuple[str, str, str, str]
METRIC_LABELS: Final = web.RequestKey[MetricLabels]("metric_labels")
USER: Final = web.RequestKey[Obj]("user")  # who the request authenticated as (its userInfo)


@dataclasses.dataclass(frozen=True)
class BodyLimits:
    """How much of a request body the server reads, and for how long."""

    max_bytes: int
    timeout: float


BODY_LIMITS: Final = web.AppKey("body_limits", BodyLimits)


@dataclasses.dataclass
class ServerConfig:
    name: str
    token: str
    host: str = "127.0.0.1"
    port: int = 0
    state_dir: Path | None = None
    watch_window: int = DEFAULT_WINDOW
    watch_window_bytes: int = DEFAULT_WINDOW_BYTES
    bookmark_interval: float = 60.0
    # Serve HTTPS with this certificate and key (kubectl sends bearer tokens only over TLS).
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    # The CA that signed the certificate: published in every namespace as the kube-root-ca.crt ConfigMap.
    ca_file: Path | None = None
    # Slow or oversized requests, with kube-apiserver's defaults: Go's ReadHeaderTimeout (32 s, which also bounds
    # the TLS handshake) and IdleTimeout (90 s), --request-timeout (60 s; it bounds reading the body too, which has
    # its own setting here), --min-request-timeout (a watch without timeoutSeconds lasts between it and twice it),
    # --max-request-bytes (3 MiB).
    request_header_timeout: float = 32.0
    request_body_timeout: float = 60.0
    request_timeout: float = 60.0
    idle_timeout: float = 90.0
    min_request_timeout: int = 1800
    max_request_bytes: int = 3 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Target:
    """What a request path names."""

    rtype: ResourceType
    namespace: str
    name: str
    subresource: str


class ApiServer:
    def __init__(self, config: ServerConfig, clock: Callable[[], datetime] | None = None) -> None:
        self.config = config
        self.clock = clock or (lambda: datetime.now(UTC))
        self.registry = Registry()
        self.metrics = RequestMetrics()
        self._backend: Backend | None = None  # from start() on
        self._authenticator: Authenticator | None = None  # from start() on
        # The latest watch events as encoded: every watch of a resource sends the same bytes for an event.
        self._lines: collections.OrderedDict[tuple[str, ...], bytes] = collections.OrderedDict()
        self._runner: web.AppRunner | None = None
        self._watch_tasks: set[asyncio.Task[Any]] = set()
        # Handlers still running after their request timed out (504).
        self._overdue: set[asyncio.Future[web.StreamResponse]] = set()
        self._stopping = asyncio.Event()
        self._pod_logs = PodLogs()
        self._api_service: ApiServicePublisher | None = None  # from start() on, once the port is known
        self.port = config.port

    # --- lifecycle -------------------------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        assert self._backend is not None, "server not started"
        return self._backend.store

    @property
    def rest(self) -> Rest:
        assert self._backend is not None, "server not started"
        return self._backend.rest

    async def idle(self) -> None:
        """Wait until the server's own controllers have nothing queued (see :meth:`Backend.idle`)."""
        assert self._backend is not None, "server not started"
        await self._backend.idle()

    @property
    def url(self) -> str:
        scheme = "https" if self.config.tls_cert_file is not None else "http"
        return f"{scheme}://{self.config.host}:{self.port}"

    async def start(self) -> None:
        path = None
        if self.config.state_dir is not None:
            await asyncio.to_thread(private_dirs, self.config.state_dir)
            path = self.config.state_dir / "objects.db"
        ca_file = self.config.ca_file
        ca_pem = await asyncio.to_thread(ca_file.read_text) if ca_file is not None else None
        window = (self.config.watch_window, self.config.watch_window_bytes)
        self._backend = await Backend.open(path, window, self.registry, self.clock, ca_pem)
        self._authenticator = Authenticator(
            self.config.token, self._backend.store, self._backend.rest, self.registry, self.clock
        )
        await self._bootstrap()
        app = web.Application(middlewares=[self._middleware])
        app[BODY_LIMITS] = BodyLimits(self.config.max_request_bytes, self.config.request_body_timeout)
        # Every path, newlines and all (a path is answered by _dispatch, never by aiohttp's router).
        app.router.add_route("*", r"/{tail:[\s\S]*}", self._dispatch)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=2.0)
        await self._runner.setup()
        ssl_context = None
        if self.config.tls_cert_file is not None:
            ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ssl_context.load_cert_chain(self.config.tls_cert_file, self.config.tls_key_file)
        site = GuardedSite(
            self._runner,
            self.config.host,
            self.config.port,
            header_timeout=self.config.request_header_timeout,
            ssl_context=ssl_context,
            access_log=None,
            keepalive_timeout=self.config.idle_timeout,
            # A body the handler left unread (a refused request) is drained this long, so the client reads the
            # answer rather than a reset; then the connection closes.
            lingering_time=LINGERING_TIME,
            # Go reads request lines and headers of up to 1 MiB; what takes longer meets the header deadline.
            max_line_size=MAX_HEADER_BYTES,
            max_field_size=MAX_HEADER_BYTES,
        )
        await site.start()
        self.port = site.port
        self._api_service = ApiServicePublisher(self.store, self.registry, self.rest, self.port)
        await self._api_service.sync()  # there before anyone is told the server is up
        self._api_service.start()

    async def stop(self) -> None:
        self._stopping.set()
        for task in [*self._watch_tasks, *self._overdue]:
            task.cancel()
        if self._api_service is not None:
            await self._api_service.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        await self._pod_logs.close()
        if self._backend is not None:
            await self._backend.close()

    async def _bootstrap(self) -> None:
        namespaces = self.registry.lookup("", "v1", "namespaces")
        assert namespaces is not None
        for name in INITIAL_NAMESPACES:
            if self.store.get("namespaces", "", name) is None:
                await self.rest.create(namespaces, "", {"metadata": {"name": name}}, manager="kube-apiserver")

    # --- plumbing --------------------------------------------------------------------------------------------

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        protocol = request.protocol
        if isinstance(protocol, HeaderDeadlineHandler):
            protocol.request_started()
        try:
            return await self._answer(request, handler)
        finally:
            if isinstance(protocol, HeaderDeadlineHandler):
                protocol.request_finished()

    async def _answer(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        started = time.perf_counter()
        labels = ("", "", "", "")
        code = 500
        try:
            if self._stopping.is_set() and request.transport is not None:
                # Stopping: a request on a connection the shutdown left open (one whose TLS handshake ended after
                # the connections were closed) is not taken; its connection is closed unanswered, as a closed
                # listener's would be, so the client tries again on a new one, reaching whoever serves next.
                code = 499
                request.transport.close()
                return web.Response(status=503, text=SHUTTING_DOWN)
            if _BAD_ESCAPE.search(request.raw_path.partition("?")[0]):
                code = 400
                return web.Response(status=400, text=BAD_REQUEST_TEXT, headers={"Connection": "close"})
            timeout = None if self._long_running(request) else self._request_timeout(request)
            if request.path not in UNAUTHENTICATED_PATHS:
                user = await self._authenticate(request)
                if user is None:
                    raise ApiError(errors.status(401, "Unauthorized", "Unauthorized"))
                request[USER] = user
            if timeout is None:
                response = await handler(request)
            else:
                response = await self._within(timeout, request, handler(request))
            code = response.status
            labels = request.get(METRIC_LABELS, labels)
            return response
        except ApiError as exc:
            code = exc.code
            labels = request.get(METRIC_LABELS, labels)
            return _json(exc.status, exc.code)
        except ObjectTooLarge as exc:
            code = 413
            labels = request.get(METRIC_LABELS, labels)
            return _json(errors.status(413, "RequestEntityTooLarge", str(exc)), 413)
        except web.HTTPNotFound:
            # A request line aiohttp cannot route (CONNECT names an authority, not a path): Go's plain 404.
            code = 404
            return _page_not_found()
        except (asyncio.CancelledError, ConnectionResetError):
            code = 499
            raise
        except Exception as exc:  # the last resort: every cause found is fixed where it lies
            log.error("%s %r failed: %s: %s", request.method, request.path, type(exc).__name__, exc)
            return _json(errors.status(500, "InternalError", "an internal error occurred"), 500)
        finally:
            verb, group, resource, subresource = labels
            if resource:
                self.metrics.observe(verb, group, resource, subresource, code, time.perf_counter() - started)

    def _long_running(self, request: web.Request) -> bool:
        """A request the per-request timeout leaves alone: a watch, or a streaming subresource (upstream's
        LongRunningFunc)."""
        if request.method == "GET" and flag(request.query.get("watch")):
            return True
        parts = [p for p in request.path.split("/") if p]
        target = self._resolve(parts) if parts else None
        return target is not None and target.subresource in LONG_RUNNING_SUBRESOURCES

    def _request_timeout(self, request: web.Request) -> float:
        """--request-timeout, or the shorter ``timeout`` the request asks for (a Go duration; 0 asks for none)."""
        limit = self.config.request_timeout
        asked = request.query.get("timeout", "")
        if not asked:
            return limit
        nanoseconds = go_duration(asked)
        if isinstance(nanoseconds, str):
            message = f"invalid timeout specified in the request URL - {nanoseconds}"
            raise ApiError(errors.bad_request_status(message))
        seconds = nanoseconds / 1e9
        return seconds if 0 < seconds < limit else limit

    async def _within(
        self, seconds: float, request: web.Request, answer: Awaitable[web.StreamResponse]
    ) -> web.StreamResponse:
        """The handler's answer, or upstream's 504 once ``seconds`` passed. As kube-apiserver lets the handler run
        on, a handler that overran finishes in the background (a write it began is not cut short); its answer is
        dropped. A body still arriving is cut off (the connection closes after the 504), so it stops waiting."""
        task = asyncio.ensure_future(answer)
        try:
            done, _ = await asyncio.wait({task}, timeout=seconds)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task in done:
            return task.result()
        self._overdue.add(task)
        task.add_done_callback(self._overdue_done)
        _cut_off_body(request)
        raise ApiError(errors.status(504, "Timeout", REQUEST_TIMED_OUT, {}))

    def _overdue_done(self, task: asyncio.Future[web.StreamResponse]) -> None:
        self._overdue.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("a request that timed out ended with %r", task.exception())

    async def _authenticate(self, request: web.Request) -> Obj | None:
        """Who the request's bearer token names (the admin, or a ServiceAccount); None: nobody."""
        assert self._authenticator is not None, "server not started"
        return await self._authenticator.user(request.headers.get("Authorization", ""))

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            ready = self._backend is not None and not self._stopping.is_set()
            return web.Response(text="ok" if ready else "shutting down", status=200 if ready else 503)
        if path == "/version":
            return _json(discovery.version_info())
        if path == "/metrics":
            return web.Response(text=self.metrics.render(), content_type="text/plain", charset="utf-8")
        if path == "/":
            return _json({"paths": discovery.root_paths(list(self.registry))})
        if path in ("/api", "/apis"):
            return self._discovery_root(request, path == "/api")
        if path == "/openapi/v2":
            return await self._openapi_v2(request)
        if path == "/openapi/v3" or path.startswith("/openapi/v3/"):
            return await self._openapi(request, path.removeprefix("/openapi/v3"))
        parts = [p for p in path.split("/") if p]
        if parts[0] == "apis" and len(parts) == 2:
            return self._api_group(parts[1])
        if parts[0] == "api" and len(parts) == 2:
            return self._resource_list("", parts[1])
        if parts[0] == "apis" and len(parts) == 3:
            return self._resource_list(parts[1], parts[2])
        target = self._resolve(parts)
        if target is None:
            return self._not_found(parts)
        return await self._serve(request, target)

    def _not_found(self, parts: list[str]) -> web.Response:
        """Under a group version it serves, upstream answers a Status; anywhere else Go's plain-text 404."""
        group, version = "", ""
        if parts[0] == "api" and len(parts) > 1:
            version = parts[1]
        elif parts[0] == "apis" and len(parts) > 2:
            group, version = parts[1], parts[2]
        if version and any(t.group == group and t.version == version for t in self.registry):
            not_found = errors.status(404, "NotFound", "the server could not find the requested resource")
            raise ApiError({**not_found, "details": {}})
        return _page_not_found()

    def _discovery_root(self, request: web.Request, legacy: bool) -> web.Response:
        """Legacy or aggregated discovery, as the client's Accept asks."""
        content_type, body = discovery.discovery_root(
            list(self.registry), legacy, request.headers.get("Accept", "")
        )
        return web.Response(
            body=fastjson.dumps(body),
            headers={"Content-Type": content_type, "Vary": "Accept"},
        )

    def _api_group(self, group: str) -> web.Response:
        body = discovery.api_group(list(self.registry), group)
        if body is None:
            raise ApiError(errors.status(404, "NotFound", "the server could not find the requested resource"))
        return _json(body)

    def _resource_list(self, group: str, version: str) -> web.Response:
        body = discovery.api_resource_list(list(self.registry), group, version)
        if body is None:
            return self._not_found(["apis", group, version] if group else ["api", version])
        return _json(body)

    async def _openapi(self, request: web.Request, path: str) -> web.Response:
        # The first document of a set of kinds takes about a second of CPU to build (then it is cached): never
        # on the event loop.
        reply = await asyncio.to_thread(
            openapi.openapi_v3_reply,
            list(self.registry),
            path,
            now=self.clock(),
            hash_param=request.query.get("hash"),
            accept=request.headers.get("Accept", ""),
            if_none_match=request.headers.get("If-None-Match"),
        )
        if reply is None:
            raise ApiError(errors.status(404, "NotFound", "the server could not find the requested resource"))
        return web.Response(status=reply.status, headers=reply.headers, body=reply.body or None)

    async def _openapi_v2(self, request: web.Request) -> web.Response:
        reply = await asyncio.to_thread(
            openapi_v2.openapi_v2_reply,
            list(self.registry),
            request.headers.get("Accept", ""),
            request.headers.get("If-None-Match"),
        )
        return web.Response(status=reply.status, headers=reply.headers, body=reply.body or None)

    def _resolve(self, parts: list[str]) -> Target | None:
        """Map /api/v1/... or /apis/{g}/{v}/... onto a resource type, namespace, name and subresource."""
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = self.registry.lookup(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        rtype = self.registry.lookup(group, version, rest[0])
        if rtype is None or len(rest) > 3 or (rtype.namespaced and not namespace and len(rest) > 1):
            return None
        name = rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        if subresource and subresource not in rtype.subresources:
            return None
        return Target(rtype, namespace, name, subresource)

    # --- verbs -----------------------------------------------------------------------------------------------

    async def _serve(self, request: web.Request, target: Target) -> web.StreamResponse:
        rtype, namespace, name, sub = target.rtype, target.namespace, target.name, target.subresource
        query = request.query
        method = request.method
        dry_run = query.get("dryRun") == "All"
        if method == "PUT" and not name and rtype.schema is not None:
            raise ApiError(errors.bad_request_status("name must be provided"))  # custom resources' handler
        if sub == "eviction":
            request[METRIC_LABELS] = ("POST", rtype.group, rtype.plural, sub)
            if method != "POST":
                raise _method_not_allowed()
            return await self._evict(request, target)
        verb = _verb(method, bool(name), flag(query.get("watch")))
        request[METRIC_LABELS] = (verb, rtype.group, rtype.plural, sub)
        if not sub and _VERB_NAMES[verb] not in rtype.verbs:
            raise _method_not_allowed()
        if sub and _VERB_NAMES[verb] not in discovery.subresource_verbs(sub):
            raise _method_not_allowed()
        if verb in ("GET", "PUT", "PATCH", "DELETE") and (bad_name := path_segment_name_errors(name)):
            # Upstream's storage refuses to make a key of such a name.
            raise ApiError(
                errors.bad_request_status(
                    f"Name parameter invalid: {errors.strconv_quote(name)}: {';'.join(bad_name)}"
                )
            )
        if verb == "POST" and reviews.is_review(rtype):
            review = reviews.answer(rtype, await _body(request, rtype), self.clock(), request[USER])
            return _json(review, 201)
        rest = self.rest
        if verb == "WATCH":
            return await self._watch(request, rtype, namespace or None, name)
        if verb == "LIST":
            list_options = listoptions.parse(query)
            found = listoptions.errors(list_options)
            if found:
                raise ApiError(listoptions.invalid(found))
            limit = _int(query.get("limit"), 0)
            at = await self._list_version(list_options, limit)
            try:
                listing = rest.list_collection(
                    rtype,
                    namespace or None,
                    query.get("labelSelector", ""),
                    _with_name(query.get("fieldSelector", ""), name),
                    listoptions.page_size(list_options.resource_version, limit),
                    list_options.continue_token,
                    at,
                )
            except Expired as exc:
                raise ApiError(errors.gone_status(LIST_TOO_OLD)) from exc
            return self._respond_list(request, rtype, listing)
        if verb == "GET":
            if sub == "log":
                return await self._pod_logs.serve(request, rest.get(rtype, namespace, name), self.store)
            return self._respond_object(request, rtype, rest.get(rtype, namespace, name))
        if verb == "POST":
            body, warned = await _object_body(request, rtype, "CreateOptions")
            try:
                created = await rest.create(
                    rtype, namespace, body, dry_run, _manager(request, "CreateOptions")
                )
            except ApiError as exc:  # the decoder's warnings come with a refusal too
                return _warning(_json(exc.status, exc.code), warned)
            return _warning(self._respond_object(request, rtype, created, 201), warned)
        if verb == "PUT":
            body, warned = await _object_body(request, rtype, "UpdateOptions")
            manager = _manager(request, "UpdateOptions")
            try:
                updated, made = await rest.replace(rtype, namespace, name, body, sub, dry_run, manager)
            except ApiError as exc:
                return _warning(_json(exc.status, exc.code), warned)
            return _warning(self._respond_object(request, rtype, updated, 201 if made else 200), warned)
        if verb == "PATCH":
            content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
            is_apply = content_type == APPLY_PATCH
            problems = managedfields.patch_option_problems(
                query.get("fieldManager", ""), "force" in query, is_apply
            )
            if problems:
                raise ApiError(errors.invalid_status("PatchOptions", "meta.k8s.io", "", problems))
            decoding.check_directive(query.get("fieldValidation", ""), "PatchOptions")
            if is_apply:
                config, warned = decoding.decode_apply(
                    await _patch_body(request), query.get("fieldValidation", "")
                )
                force = flag(query.get("force"))
                applied, made = await rest.apply(
                    rtype, namespace, name, config, sub, dry_run, query["fieldManager"], force
                )
                return _warning(self._respond_object(request, rtype, applied, 201 if made else 200), warned)
            patched = await rest.patch(
                rtype,
                namespace,
                name,
                content_type,
                await _patch_body(request),
                sub,
                dry_run,
                _manager(request, "PatchOptions"),
            )
            return self._respond_object(request, rtype, patched)
        if verb == "DELETE":
            options = _delete_options(await _optional_body(request), query)
            warned = [
                decoding.warning(text) for text in self.registry.strategy(rtype).delete_warnings(options)
            ]
            try:
                deleted = await rest.delete(rtype, namespace, name, options, dry_run or _dry_run_in(options))
            except ApiError as exc:
                return _warning(_json(exc.status, exc.code), warned)
            return _warning(self._respond_object(request, rtype, deleted), warned)
        if verb == "DELETECOLLECTION":
            options = _delete_options(await _optional_body(request), query)
            dry_run = dry_run or _dry_run_in(options)
            listing = rest.list_collection(
                rtype, namespace or None, query.get("labelSelector", ""), query.get("fieldSelector", "")
            )
            for item in listing["items"]:
                with contextlib.suppress(ApiError):
                    await rest.delete(
                        rtype,
                        str(metadata(item).get("namespace") or ""),
                        str(metadata(item)["name"]),
                        options,
                        dry_run,
                    )
            return _json(listing)
        raise _method_not_allowed()

    async def _evict(self, request: web.Request, target: Target) -> web.Response:
        """POST pods/NAME/eviction: mark the pod DisruptionTarget, then delete it gracefully with the eviction's
        deleteOptions (see api.evictions; no PodDisruptionBudgets are served, so none forbids it)."""
        rtype, namespace, name = target.rtype, target.namespace, target.name
        raw = await _raw_body(request)
        decoding.check_media_type(request.headers.get("Content-Type", ""))
        if _media_type(request) == protobuf.MEDIA_TYPE:
            # No protobuf message of policy/v1 Eviction here; clients (kubectl drain) send JSON.
            message = f"{UNKNOWN_FORMAT} application/json, application/yaml"
            raise ApiError(errors.status(415, "UnsupportedMediaType", message))
        if not raw.strip():
            raise ApiError(errors.bad_request_status("the request body is empty"))
        if _media_type(request) == decoding.YAML:
            body = decoding.read_yaml(raw, evictions.KIND)
        else:
            body = decoding.read_json(raw, evictions.KIND)
        if problem := evictions.body_problem(body, name, namespace):
            raise ApiError(errors.bad_request_status(problem))
        options = evictions.delete_options(body, request.query.get("dryRun") == "All")
        pod = self.rest.get(rtype, namespace, name)
        if not evictions.is_dry_run(options):
            await self._mark_disruption_target(rtype, pod)
        await self.rest.delete(rtype, namespace, name, options, evictions.is_dry_run(options))
        return _json(evictions.SUCCESS, 201)

    async def _mark_disruption_target(self, rtype: ResourceType, pod: Obj) -> None:
        """Write the DisruptionTarget condition, on the pod as it is: a status the kubelet wrote meanwhile (a 409)
        is read again, as upstream retries its own write, rather than failing the eviction."""
        namespace, name = str(metadata(pod).get("namespace")), str(metadata(pod).get("name"))
        for attempt in range(EVICTION_ATTEMPTS):
            with_condition = evictions.marked(pod, self.clock())
            if with_condition is None:
                return
            try:
                await self.rest.update(rtype, namespace, name, with_condition, "status", manager=None)
                return
            except ApiError as exc:
                if exc.code != 409 or attempt == EVICTION_ATTEMPTS - 1:
                    raise
            pod = self.rest.get(rtype, namespace, name)

    async def _list_version(self, options: listoptions.ListOptions, limit: int) -> int | None:
        """The resourceVersion a LIST must show exactly, or None for the newest state. A version this server
        has not reached is waited for a while, then a 504, as upstream's watch cache answers."""
        if options.continue_token:
            decode_continue(options.continue_token)
            if not options.legacy_version:
                raise ApiError(
                    errors.bad_request_status(
                        "specifying resource version is not allowed when using continue"
                    )
                )
            return None
        if options.legacy_version:
            return None
        requested = _int(options.resource_version, 0)
        await self._wait_for_version(requested)
        return requested if listoptions.lists_exactly(options, limit) else None

    async def _wait_for_version(self, requested: int) -> None:
        """Return once ``requested`` is committed; an ApiError (504) if it is not within upstream's wait."""
        try:
            async with asyncio.timeout(listoptions.FRESHNESS_WAIT):
                await self.store.wait_for(requested)
        except TimeoutError:
            raise ApiError(listoptions.too_large_status(requested, self.store.resource_version)) from None

    def _respond_object(
        self, request: web.Request, rtype: ResourceType, obj: Obj, code: int = 200
    ) -> web.Response:
        if _wants_table(request):
            return _json(tables.table(rtype, [obj], self.clock(), _include_object(request)), code)
        return _json(obj, code)

    def _respond_list(self, request: web.Request, rtype: ResourceType, listing: Obj) -> web.Response:
        if not _wants_table(request):
            return _json(listing)
        table = tables.table(rtype, listing["items"], self.clock(), _include_object(request))
        table["metadata"] = listing["metadata"]
        return _json(table)

    # --- watch -----------------------------------------------------------------------------------------------

    def _default_watch_timeout(self) -> float:
        """A watch without timeoutSeconds (or with 0) ends at a random point between --min-request-timeout and
        twice that, as upstream spreads its watches' reconnections."""
        return self.config.min_request_timeout * (1.0 + random.random())

    def _event_line(self, rtype: ResourceType, kind: str, obj: Obj) -> bytes:
        """A watch event as sent, encoded once for every watch that sends it (they share the object committed)."""
        meta = as_dict(obj.get("metadata"))
        key = (rtype.key, rtype.api_version, kind, str(meta.get("resourceVersion")), str(meta.get("uid")))
        line = self._lines.get(key)
        if line is None:
            line = _line({"type": kind, "object": self.rest._present(rtype, obj)})
            self._lines[key] = line
            if len(self._lines) > ENCODED_EVENTS:
                self._lines.popitem(last=False)
        return line

    async def _watch(
        self, request: web.Request, rtype: ResourceType, namespace: str | None, name: str
    ) -> web.StreamResponse:
        query = request.query
        matches = self.rest.matcher(
            rtype, query.get("labelSelector", ""), _with_name(query.get("fieldSelector", ""), name)
        )
        options = listoptions.with_defaults(listoptions.parse(query))
        found = listoptions.errors(options)
        if found:
            raise ApiError(listoptions.invalid(found))
        requested = -1 if options.legacy_version else _int(options.resource_version, -1)
        if not options.legacy_version and requested < 0:
            raise ApiError(errors.bad_request_status(f"invalid resource version: {options.resource_version}"))
        timeout = _int(query.get("timeoutSeconds"), 0) or self._default_watch_timeout()
        as_table = _wants_table(request)
        include = _include_object(request)
        columns_sent = False

        pending: list[bytes] = []

        async def send(kind: str, obj: Obj) -> None:
            nonlocal columns_sent
            if as_table and kind != "BOOKMARK":
                obj = tables.table(
                    rtype, [self.rest._present(rtype, obj)], self.clock(), include, headers=not columns_sent
                )
                columns_sent = True
                pending.append(_line({"type": kind, "object": obj}))
            elif kind == "BOOKMARK":
                pending.append(_line({"type": kind, "object": obj}))
            else:
                pending.append(self._event_line(rtype, kind, obj))

        async def flush() -> None:
            if pending:
                await response.write(b"".join(pending))
                pending.clear()

        response = web.StreamResponse(
            headers={"Content-Type": "application/json", "Cache-Control": "no-cache"}
        )
        response.enable_chunked_encoding()
        await response.prepare(request)
        stream = watches.WatchStream(
            self.store,
            rtype,
            namespace,
            matches,
            send,
            flush,
            options.allow_bookmarks,
            timeout,
            self.config.bookmark_interval,
        )
        initial = bool(options.send_initial_events)
        task = asyncio.current_task()
        if task is not None:
            self._watch_tasks.add(task)
        try:
            if initial and requested > 0:
                await self._wait_for_version(requested)  # the objects sent first must be at least this new
            # Taken after the headers went out, so the objects listed and the events after them meet exactly.
            since = self.store.resource_version if initial or requested < 0 else requested
            await stream.run(since, initial)
        except ApiError as exc:
            await response.write(_line({"type": "ERROR", "object": exc.status}))
        except Expired as exc:
            await response.write(_line({"type": "ERROR", "object": errors.gone_status(str(exc))}))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            if task is not None:
                self._watch_tasks.discard(task)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response


# --- helpers ------------------------------------------------------------------------------------------------


def _page_not_found() -> web.Response:
    return web.Response(status=404, text="404 page not found\n", content_type="text/plain", charset="utf-8")


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=fastjson.dumps(body), status=status, content_type="application/json")


def _line(event: Obj) -> bytes:
    return fastjson.dumps(event) + b"\n"


def _verb(method: str, named: bool, watch: bool) -> str:
    if method == "GET":
        if watch:
            return "WATCH"
        return "GET" if named else "LIST"
    if method == "POST" and not named:
        return "POST"
    if method == "PUT" and named:
        return "PUT"
    if method == "PATCH" and named:
        return "PATCH"
    if method == "DELETE":
        return "DELETE" if named else "DELETECOLLECTION"
    raise _method_not_allowed()


# The request verb -> the API verb a resource lists in discovery.
_VERB_NAMES: Final = {
    "WATCH": "watch",
    "LIST": "list",
    "GET": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
    "DELETECOLLECTION": "deletecollection",
}


def _warning(response: web.Response, warnings: list[str]) -> web.Response:
    for value in warnings:
        response.headers.add("Warning", value)
    return response


def _method_not_allowed() -> ApiError:
    not_allowed = errors.status(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )
    return ApiError({**not_allowed, "details": {}})


def _manager(request: web.Request, options_kind: str) -> str:
    """Who is writing: the ``fieldManager`` asked for (checked as upstream checks it), else the User-Agent's
    product name."""
    field_manager = request.query.get("fieldManager", "")
    problems = managedfields.manager_problems(field_manager)
    if problems:
        raise ApiError(errors.invalid_status(options_kind, "meta.k8s.io", "", problems))
    return field_manager or managedfields.manager_from_user_agent(request.headers.get("User-Agent", ""))


def _int(value: str | None, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ApiError(errors.bad_request_status(f"invalid integer: {value!r}")) from exc


def _with_name(field_selector: str, name: str) -> str:
    """A watch of one named object (GET .../jobs/x?watch=1) is a watch with metadata.name=x."""
    if not name:
        return field_selector
    return f"metadata.name={name}" + (f",{field_selector}" if field_selector else "")


def _wants_table(request: web.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


def _include_object(request: web.Request) -> str:
    try:
        return tables.include_object_policy(request.query.get("includeObject"))
    except ValueError as exc:
        raise ApiError(errors.bad_request_status(str(exc))) from exc


async def _object_body(request: web.Request, rtype: ResourceType, options_kind: str) -> tuple[Any, list[str]]:
    """The object a create or update sends, and the Warning headers its unknown fields call for. Options are
    checked first, as upstream does; a protobuf body has no unknown fields to speak of (Go skips them)."""
    directive = request.query.get("fieldValidation", "")
    decoding.check_directive(directive, options_kind)
    body = await _body(request, rtype)
    if _media_type(request) == protobuf.MEDIA_TYPE:
        return body, []
    return body, decoding.decode(rtype, body, directive)


async def _body(request: web.Request, rtype: ResourceType) -> Any:
    """The object a create, an update or a review sends: JSON, YAML, or protobuf for a built-in kind."""
    raw = await _raw_body(request)
    decoding.check_media_type(request.headers.get("Content-Type", ""))
    if _media_type(request) == protobuf.MEDIA_TYPE:
        if rtype.schema is not None:
            # Custom resources have no protobuf messages (kube-apiserver fails on such a body without an answer).
            raise ApiError(errors.status(415, "UnsupportedMediaType", f"{UNKNOWN_FORMAT} application/json"))
        try:
            return protobuf.read_object(raw, rtype.api_version, rtype.kind)
        except protobuf.DecodeError as exc:
            raise ApiError(errors.bad_request_status(str(exc))) from exc
    if not raw.strip():
        raise ApiError(errors.bad_request_status("the request body is empty"))
    body = (
        decoding.read_yaml(raw, rtype.kind)
        if _media_type(request) == decoding.YAML
        else decoding.read_json(raw, rtype.kind)
    )
    if body is None:
        raise ApiError(errors.bad_request_status("the request body is empty"))
    return body


async def _patch_body(request: web.Request) -> Any:
    """A patch, in the JSON its Content-Type names; any other type is refused by the patch itself (415)."""
    raw = await _raw_body(request)
    return raw if _media_type(request) == protobuf.MEDIA_TYPE else _json_body(request, raw)


async def _optional_body(request: web.Request) -> Any:
    """The DeleteOptions a delete may send, in JSON, YAML or protobuf; None when it sends none."""
    raw = await _raw_body(request)
    if _media_type(request) == protobuf.MEDIA_TYPE and raw:
        try:
            return protobuf.read_delete_options(raw)
        except protobuf.DecodeError as exc:
            raise ApiError(errors.bad_request_status(str(exc))) from exc
    if _media_type(request) == decoding.YAML and raw.strip():
        return decoding.read_yaml(raw, "DeleteOptions")
    return _json_body(request, raw)


async def _raw_body(request: web.Request) -> bytes:
    """The body, read as kube-apiserver reads it: never more than --max-request-bytes (a Content-Length over it is
    refused before reading; a chunked body is counted as it comes), and within the body timeout."""
    limits = request.app[BODY_LIMITS]
    if request.content_length is not None and request.content_length > limits.max_bytes:
        raise _too_large(limits.max_bytes)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(limits.timeout):
            async for chunk in request.content.iter_any():
                size += len(chunk)
                if size > limits.max_bytes:
                    raise _too_large(limits.max_bytes)
                chunks.append(chunk)
    except TimeoutError as exc:
        _cut_off_body(request)
        raise ApiError(errors.status(504, "Timeout", REQUEST_TIMED_OUT, {})) from exc
    return b"".join(chunks)


def _cut_off_body(request: web.Request) -> None:
    """Stop reading what is left of a late body: whoever waits on it gives up, and the connection closes once the
    answer is sent (as a TimeoutError, aiohttp does not linger to drain it)."""
    if not request.content.at_eof():
        request.content.set_exception(TimeoutError(REQUEST_TIMED_OUT))


def _too_large(limit: int) -> ApiError:
    return ApiError(
        errors.status(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")
    )


def _media_type(request: web.Request) -> str:
    return request.headers.get("Content-Type", "application/json").split(";")[0].strip()


def _json_body(request: web.Request, raw: bytes) -> Any:
    """A JSON body (or a server-side apply's YAML, passed on as text); None when there is none."""
    if not raw.strip():
        return None
    content_type = _media_type(request)
    if "yaml" in content_type and "apply-patch" not in content_type:
        raise ApiError(errors.status(415, "UnsupportedMediaType", f"accepted media types: {JSON_TYPES}"))
    try:
        return godecode.json_loads(raw)
    except godecode.DecodeError as exc:
        if "apply-patch" in content_type and not isinstance(exc, godecode.TooDeep):
            return raw.decode(errors="replace")
        raise ApiError(errors.bad_request_status(f"the request body is not valid JSON: {exc}")) from exc


def _delete_options(body: Any, query: Any) -> Obj:
    options = dict(body) if isinstance(body, dict) else {}
    for key in ("propagationPolicy", "gracePeriodSeconds", "orphanDependents"):
        if key in query and key not in options:
            value: Any = query[key]
            if key == "orphanDependents":
                value = flag(value)
            options[key] = value
    return options


def _dry_run_in(options: Obj) -> bool:
    """DeleteOptions carry dryRun in the body, where kubectl sends it (``kubectl delete --dry-run=server``)."""
    value = options.get("dryRun")
    return isinstance(value, list) and "All" in value
