"""The kubelet API of the local kubelet: what an API server calls on a node for ``kubectl logs``.

HTTPS on 127.0.0.1 only, at the port the Node gives in ``status.daemonEndpoints.kubeletEndpoint.Port``:

- ``GET /containerLogs/{namespace}/{pod}/{container}`` with upstream's query parameters ``follow``, ``previous``,
  ``timestamps``, ``tailLines`` (also ``tail``), ``limitBytes``, ``sinceSeconds`` and ``sinceTime``, read from the
  log files the containers write (multiqueue/local/containers.py): ``previous`` is the container's attempt before
  the latest, lines are stamped with when the container wrote them, and ``follow`` streams until the container
  ends. Semantics as upstream's kubelet (pkg/kubelet/kuberuntime/logs): the last ``tailLines`` lines are taken
  first, lines older than ``since*`` are then left out, and ``limitBytes`` caps what is sent, timestamps included.
- ``GET /healthz``, which needs no credentials (as upstream's).

Who may call: connections from loopback only; the serving certificate is self-signed (a CA of its own under the
kubelet's folder, made by multiqueue/local/certs.py), which an API server without ``--kubelet-certificate-
authority`` does not verify. Authentication is what the kubelet is given: with a client CA, a client certificate
it signed is accepted (kube-apiserver's ``--kubelet-client-certificate``); with a bearer token, that token is; with
both, either; with neither, none is asked for, and any local process that can reach the port may read pod logs —
the default, because the embedded API server does not call the kubelet and an upstream control plane run for
tests need not be given a client certificate. Nothing but logs is served (no exec, attach or port-forward).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import ipaddress
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from aiohttp import web

from multiqueue.local import containers
from multiqueue.local.certs import serving_cert
from multiqueue.local.containers import AttemptLog, Running

log = logging.getLogger(__name__)

HOST: Final = "127.0.0.1"
_BLOCK: Final = 1 << 20  # bytes read at a time
_TRUE: Final = (
    "1",
    "t",
    "true",
    "y",
    "yes",
)  # as Go's strconv.ParseBool, roughly, and upstream's query decoding
_FALSE: Final = ("", "0", "f", "false", "n", "no")


class LogRequestError(Exception):
    """A log request the kubelet cannot serve: its HTTP status and upstream kubelet's message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# namespace, pod, container, previous -> where that attempt's output is; raises LogRequestError.
LogLocator = Callable[[str, str, str, bool], Awaitable[AttemptLog]]


@dataclasses.dataclass(frozen=True)
class LogOptions:
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None
    since_ns: int | None = None  # lines written before are left out

    @classmethod
    def from_query(cls, query: Mapping[str, str], now: datetime) -> LogOptions:
        """The options of a request, validated as upstream's PodLogOptions (400 when undecodable, 422 when
        invalid)."""
        tail = query.get("tailLines")
        if "tail" in query:  # upstream's older spelling; "all" means no limit
            tail = None if query["tail"] == "all" else query["tail"]
        since_seconds = _integer(query.get("sinceSeconds"))
        since_time = query.get("sinceTime")
        options = cls(
            follow=_flag(query.get("follow")),
            previous=_flag(query.get("previous")),
            timestamps=_flag(query.get("timestamps")),
            tail_lines=_integer(tail),
            limit_bytes=_integer(query.get("limitBytes")),
        )
        invalid = (
            (options.tail_lines is not None and options.tail_lines < 0)
            or (options.limit_bytes is not None and options.limit_bytes < 1)
            or (since_seconds is not None and since_seconds < 1)
            or (since_seconds is not None and since_time is not None)
        )
        if invalid:
            raise LogRequestError(422, '{"message": "Invalid request."}')
        if since_seconds is not None:
            return dataclasses.replace(options, since_ns=_ns(now) - since_seconds * 1_000_000_000)
        if since_time is not None:
            try:
                moment = datetime.fromisoformat(since_time.replace("Z", "+00:00"))
            except ValueError:
                raise LogRequestError(400, '{"message": "Unable to decode query."}') from None
            return dataclasses.replace(
                options, since_ns=_ns(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
            )
        return options


def _flag(value: str | None) -> bool:
    if value is None or value.lower() in _FALSE:
        return False
    if value.lower() in _TRUE:
        return True
    raise LogRequestError(400, '{"message": "Unable to decode query."}')


def _integer(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise LogRequestError(400, '{"message": "Unable to decode query."}') from None


def _ns(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def rfc3339_nano(ns: int) -> str:
    """Go's time.RFC3339Nano in UTC: nanoseconds with trailing zeros (and a bare dot) left out."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    stamp = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    digits = f"{fraction:09d}".rstrip("0")
    return f"{stamp}.{digits}Z" if digits else f"{stamp}Z"


# --- reading an attempt's output --------------------------------------------------------------------------------


class _Stamps:
    """An attempt's chunk stamps, read on as the shipper adds them."""

    def __init__(self, attempt: AttemptLog) -> None:
        self.attempt = attempt
        self.read_to = attempt.stamps_read_to

    def refresh(self) -> None:
        """Blocking: take the stamps written since the last look."""
        stamps, read_to = containers.read_stamps(self.attempt.run_dir, self.read_to)
        self.read_to = read_to
        if stamps:
            self.attempt = dataclasses.replace(self.attempt, stamps=self.attempt.stamps + stamps)


class _Writer:
    """Lines out, as the options say: since, timestamps, then the byte limit."""

    def __init__(self, options: LogOptions, response: web.StreamResponse) -> None:
        self.options = options
        self.response = response
        self.left = options.limit_bytes

    @property
    def full(self) -> bool:
        return self.left is not None and self.left <= 0

    async def lines(self, attempt: AttemptLog, data: bytes, offset: int) -> None:
        out = []
        for line in data.splitlines(keepends=True):
            written = attempt.written_at(offset)
            offset += len(line)
            if self.options.since_ns is not None and written < self.options.since_ns:
                continue
            out.append(f"{rfc3339_nano(written)} ".encode() + line if self.options.timestamps else line)
        chunk = b"".join(out)
        if self.left is not None:
            chunk = chunk[: self.left]
            self.left -= len(chunk)
        if chunk:
            await self.response.write(chunk)


def tail_start(attempt: AttemptLog, lines: int | None) -> int:
    """Blocking: where the last ``lines`` lines of the attempt's output begin (its start when None). A last line
    without its newline counts as a line, as in upstream's findTailLineStartIndex."""
    end = attempt.size()
    if lines is None:
        return attempt.start
    if lines == 0:
        return end
    position = end - 1 if end > attempt.start and attempt.read(end - 1, 1) == b"\n" else end
    found = 0
    while position > attempt.start:
        size = min(_BLOCK, position - attempt.start)
        block = attempt.read(position - size, size)
        index = len(block)
        while (index := block.rfind(b"\n", 0, index)) >= 0:
            found += 1
            if found == lines:
                return position - size + index + 1
        position -= size
    return attempt.start


async def stream_log(
    attempt: AttemptLog, options: LogOptions, response: web.StreamResponse, poll: float
) -> None:
    """Write the attempt's output to ``response``; with ``follow``, go on until the container ends."""
    writer = _Writer(options, response)
    stamps = _Stamps(attempt)
    await asyncio.to_thread(stamps.refresh)
    offset = await asyncio.to_thread(tail_start, stamps.attempt, options.tail_lines)
    pending = b""  # a line not ended yet, held while following
    while not writer.full:
        state = await asyncio.to_thread(stamps.attempt.running) if options.follow else Running.ENDED
        data = await asyncio.to_thread(stamps.attempt.read, offset, _BLOCK)
        if data:
            await asyncio.to_thread(stamps.refresh)
            start = offset - len(pending)
            pending += data
            offset += len(data)
            cut = pending.rfind(b"\n") + 1
            if cut:
                await writer.lines(stamps.attempt, pending[:cut], start)
                pending = pending[cut:]
            continue
        if state is Running.ENDED:
            break
        await asyncio.sleep(poll)  # files here give no change notification; upstream's kubelet uses fsnotify
    if pending and not writer.full:
        await writer.lines(stamps.attempt, pending, offset - len(pending))


# --- the server ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class KubeletAuth:
    """Who may read logs: a client certificate signed by ``client_ca_file``, or ``token`` as a bearer token; no
    check when neither is given (loopback connections only, in every case)."""

    token: str | None = None
    client_ca_file: Path | None = None


class KubeletApi:
    """The HTTPS server. :meth:`start` makes its certificate (once, under ``pki_dir``) and picks its port."""

    def __init__(
        self,
        locate: LogLocator,
        pki_dir: Path,
        *,
        auth: KubeletAuth | None = None,
        port: int = 0,
        poll: float = 0.25,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.locate = locate
        self.pki_dir = pki_dir
        self.auth = auth or KubeletAuth()
        self.port = port
        self.poll = poll
        self.clock = clock or (lambda: datetime.now(UTC))
        self._runner: web.AppRunner | None = None

    @property
    def ca_file(self) -> Path:
        """The CA that signed the serving certificate (for clients that verify it)."""
        return self.pki_dir / "ca.crt"

    async def start(self) -> int:
        context = await asyncio.to_thread(self._tls)
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/healthz", _healthz)
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._container_logs)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, HOST, self.port, ssl_context=context, reuse_address=True)
        await site.start()
        addresses = self._runner.addresses
        self.port = int(addresses[0][1]) if addresses else self.port
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _tls(self) -> ssl.SSLContext:
        cert = serving_cert(self.pki_dir, "kubelet", HOST)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert.cert_file, cert.key_file)
        if self.auth.client_ca_file is not None:
            context.verify_mode = ssl.CERT_OPTIONAL
            context.load_verify_locations(cafile=str(self.auth.client_ca_file))
        return context

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not _loopback(request.remote):
            return web.Response(status=403, text="Forbidden: the local kubelet serves loopback only\n")
        if request.path != "/healthz" and not self._authenticated(request):
            return web.Response(status=401, text="Unauthorized")
        return await handler(request)

    def _authenticated(self, request: web.Request) -> bool:
        token, ca = self.auth.token, self.auth.client_ca_file
        if token is None and ca is None:
            return True
        if ca is not None and request.transport is not None and request.transport.get_extra_info("peercert"):
            return True  # the TLS handshake verified it against the CA
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        return token is not None and scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), token)

    async def _container_logs(self, request: web.Request) -> web.StreamResponse:
        info = request.match_info
        try:
            options = LogOptions.from_query(request.query, self.clock())
            attempt = await self.locate(info["namespace"], info["pod"], info["container"], options.previous)
        except LogRequestError as exc:
            return web.Response(status=exc.status, text=exc.message)
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        with contextlib.suppress(ConnectionResetError):
            await stream_log(attempt, options, response, self.poll)
            await response.write_eof()
        return response


async def _healthz(_request: web.Request) -> web.Response:
    return web.Response(text="ok")


def _loopback(remote: str | None) -> bool:
    try:
        return remote is not None and ipaddress.ip_address(remote).is_loopback
    except ValueError:
        return False
