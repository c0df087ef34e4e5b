"""The dashboard's web server: the page, its live stream, a Job's Events, logs and placement explanation; nothing
without the secret.

The URL the manager prints carries a token. Opening it trades the token for a session cookie (HttpOnly,
SameSite=Strict) and redirects to the same page without it, so the token leaves the address bar and the history;
scripts may send ``Authorization: Bearer <token>`` instead. Anything else is answered 401. Every route only reads.
"""

from __future__ import annotations

import asyncio
import hmac
import importlib.resources
import logging
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

from aiohttp import web

from multiqueue.api.meta import as_dict
from multiqueue.api.types import EVENTS
from multiqueue.dashboard.live import DEFAULT_TIMINGS, LiveView, Timings
from multiqueue.dispatch.config import ManagerConfig
from multiqueue.dispatch.explain import explain_in_manager
from multiqueue.dispatch.inspect import UnknownKind, kind_named
from multiqueue.dispatch.joblogs import LogOptions, LogsError, follow_logs
from multiqueue.dispatch.manager import Manager
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import KubeError, NotFound

log = logging.getLogger(__name__)

COOKIE: Final = "multiqueue-dashboard"
STATIC: Final = Path(str(importlib.resources.files("multiqueue.dashboard") / "static"))
KEEPALIVE: Final = 15.0  # seconds between comments on an idle stream, so proxies keep it open
UNAUTHORIZED: Final = "401 Unauthorized: open the dashboard through the URL the manager printed at start (it carries ?token=...)\n"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Access:
    """The token, and the sessions opened with it (held in memory: a restarted manager asks for the URL again)."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token or secrets.token_urlsafe(32)
        self._sessions: set[str] = set()

    def open_session(self, offered: str) -> str | None:
        if not hmac.compare_digest(offered.encode(), self.token.encode()):
            return None
        session = secrets.token_urlsafe(32)
        self._sessions.add(session)
        return session

    def allows(self, request: web.Request) -> bool:
        if request.cookies.get(COOKIE, "") in self._sessions:
            return True
        scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(credential.encode(), self.token.encode())


LIVE: Final = web.AppKey("live", LiveView)
ACCESS: Final = web.AppKey("access", Access)
CONFIG: Final = web.AppKey("config", ManagerConfig)
MANAGEMENT: Final = web.AppKey("management", KubeClient)


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    access = request.app[ACCESS]
    if "token" in request.query:
        session = access.open_session(request.query["token"])
        if session is None:
            return web.Response(status=401, text=UNAUTHORIZED)
        kept = {k: v for k, v in request.query.items() if k != "token"}
        redirect = web.HTTPSeeOther(request.rel_url.with_query(kept))
        redirect.set_cookie(COOKIE, session, httponly=True, samesite="Strict", path="/")
        raise redirect
    if not access.allows(request):
        return web.Response(status=401, text=UNAUTHORIZED)
    response = await handler(request)
    response.headers.setdefault("Cache-Control", "no-store")
    return response


async def _index(_request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


async def _snapshot(request: web.Request) -> web.Response:
    return web.json_response(request.app[LIVE].snapshot())


async def _stream(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``snapshot``, then ``changes`` batches. The stream ends when the page falls behind;
    the browser's EventSource reconnects and gets a new snapshot."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
    await response.prepare(request)
    await response.write(b"retry: 1000\n\n")
    async with request.app[LIVE].page() as messages:
        while True:
            try:
                message = await asyncio.wait_for(messages.get(), KEEPALIVE)
            except TimeoutError:
                message = b": keepalive\n\n"
            if message is None:
                break
            await response.write(message)
    return response


async def _events(request: web.Request) -> web.Response:
    """The Events of the management cluster about one object (by UID), oldest first."""
    uid, namespace = request.query.get("uid", ""), request.query.get("namespace", "")
    if not uid or not namespace:
        return web.json_response({"message": "uid and namespace are required"}, status=400)
    try:
        events, _ = await request.app[MANAGEMENT].list(
            EVENTS, namespace, field_selector=f"involvedObject.uid={uid}"
        )
    except KubeError as exc:
        return web.json_response({"message": f"cannot list Events: {exc}"}, status=502)
    rows = [
        {
            "type": e.get("type", ""),
            "reason": e.get("reason", ""),
            "message": e.get("message", ""),
            "count": e.get("count") or as_dict(e.get("series")).get("count") or 1,
            "time": e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or "",
            "from": e.get("reportingComponent") or as_dict(e.get("source")).get("component") or "",
        }
        for e in events
    ]
    return web.json_response(sorted(rows, key=lambda r: str(r["time"])))


async def _logs(request: web.Request) -> web.StreamResponse:
    """The logs of a Job's pods on its worker, streamed as they are written (``prefix line`` per line)."""
    name, namespace = request.query.get("name", ""), request.query.get("namespace", "")
    if not name or not namespace:
        return web.Response(status=400, text="name and namespace are required\n")
    try:
        kind = kind_named(request.app[CONFIG], request.query.get("kind", "Job"))
    except UnknownKind as exc:
        return web.Response(status=400, text=f"{exc}\n")
    lines = follow_logs(request.app[CONFIG], name, namespace, LogOptions(all_containers=True), kind=kind)
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    try:
        first = await anext(lines, None)
    except LogsError as exc:
        return web.Response(status=404, text=f"{exc}\n")
    except (KubeError, OSError) as exc:
        return web.Response(status=502, text=f"cannot read the logs: {exc}\n")
    await response.prepare(request)
    try:
        while first is not None:
            prefix, line = first
            await response.write(f"{prefix} {line}\n".encode())
            first = await anext(lines, None)
    except (LogsError, KubeError, OSError) as exc:
        await response.write(f"(the log stopped: {exc})\n".encode())
    finally:
        await lines.aclose()
    return response


async def _explain(request: web.Request) -> web.Response:
    """What ``multiqueue explain -o json`` prints of one Job, from this manager's own state (its read model), so
    the panel shows the verdicts this manager decides with. A Job it does not hold is a one-line 404 saying why."""
    name, namespace = request.query.get("name", ""), request.query.get("namespace", "")
    if not name or not namespace:
        return web.Response(status=400, text="name and namespace are required\n")
    config = request.app[CONFIG]
    try:
        kind = kind_named(config, request.query.get("kind", "Job"))
    except UnknownKind as exc:
        return web.Response(status=400, text=f"{exc}\n")
    shown = explain_in_manager(request.app[LIVE].manager, kind.resource.kind, f"{namespace}/{name}")
    if shown is not None:
        return web.json_response(shown.as_document())
    where = f'{kind.resource.kind.lower()} "{namespace}/{name}"'
    try:
        job = await request.app[MANAGEMENT].get(kind.resource, name, namespace)
    except NotFound:
        return web.Response(status=404, text=f"{where} not found on the management cluster\n")
    except KubeError as exc:
        return web.Response(status=502, text=f"cannot read {where}: {exc}\n")
    if kind.managed_by(job) != config.managed_by:
        why = f"its spec.managedBy is not {config.managed_by}"
    else:
        why = "this manager does not serve its kind or has not seen it yet"
    return web.Response(status=404, text=f"{where} is not dispatched by this manager: {why}\n")


def app(live: LiveView, access: Access, config: ManagerConfig, management: KubeClient) -> web.Application:
    application = web.Application(middlewares=[_guard])
    application[LIVE] = live
    application[ACCESS] = access
    application[CONFIG] = config
    application[MANAGEMENT] = management
    application.router.add_get("/", _index)
    application.router.add_get("/api/snapshot", _snapshot)
    application.router.add_get("/api/stream", _stream)
    application.router.add_get("/api/events", _events)
    application.router.add_get("/api/logs", _logs)
    application.router.add_get("/api/explain", _explain)
    application.router.add_static("/static/", STATIC)
    return application


class Dashboard:
    """The live view and its server, started and stopped with the manager."""

    def __init__(self, live: LiveView, access: Access, runner: web.AppRunner, url: str) -> None:
        self.live = live
        self.access = access
        self.runner = runner
        self.url = url  # with the token: what the admin opens

    async def stop(self) -> None:
        await self.live.stop()  # ends every open stream, so the server's shutdown waits on none of them
        await self.runner.cleanup()


async def serve(manager: Manager, timings: Timings = DEFAULT_TIMINGS) -> Dashboard | None:
    """The dashboard of a started manager, when its config enables it; served on ``dashboard.address`` (port 0:
    any free one)."""
    config = manager.config
    if not config.dashboard.enabled:
        return None
    assert manager.read_model is not None and manager.management is not None
    management = manager.management
    live = LiveView(manager.read_model, management, timings=timings)
    access = Access()
    host, _, port = config.dashboard.address.rpartition(":")
    runner = web.AppRunner(app(live, access, config, management), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host or "127.0.0.1", int(port or 0))
    await site.start()
    live.start()
    bound = runner.addresses[0] if runner.addresses else (host, port)
    shown = f"[{bound[0]}]" if ":" in str(bound[0]) else bound[0]
    return Dashboard(live, access, runner, f"http://{shown}:{bound[1]}/?token={access.token}")
