"""One cluster's kept-alive HTTP/1.1 connections for the requests answered in one piece: every verb but the
streamed ones (watches, followed logs), which go through aiohttp.

Why not aiohttp's client for these as well: it costs about 170 µs of the client's CPU per JSON request against
this project's API server, against about 50 µs here (tests/bench/kube_client.py measures the client's CPU per
request), and the manager sends five requests and two Events per Job, so they were a third of its CPU. The
HTTP parsing is httptools' (the parser uvicorn uses), the connections asyncio's.

A request takes an idle connection, or opens one, writes the whole request, and waits for the parsed answer. A
connection goes back to the idle ones only after a complete answer the server lets it keep; a request that fails,
times out or is cancelled closes its connection, whose state is then unknown.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Final, cast

import httptools

# What aiohttp's connector allowed at once per cluster before: requests past it wait for a connection.
LIMIT: Final = 100
# A connection idle this long is closed rather than used again, as aiohttp's connector did: one that died without
# a word (a NAT entry dropped, a peer gone) would cost its next request the whole request timeout.
IDLE_KEPT: Final = 15.0


class NoAnswer(Exception):
    """A request got no answer: its text says why, in a person's words."""


@dataclasses.dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    headers: Mapping[str, str]  # names in lower case
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").partition(";")[0].strip().lower()

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


class _Connection(asyncio.Protocol):
    """One connection: the answer to the request written on it is parsed as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiting: asyncio.Future[Answer] | None = None
        self.closed = False
        self.reusable = False
        self.idle_since = 0.0
        self._reason = ""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's TLS transport is not asyncio's class

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(f"the server's answer is not HTTP/1.1 ({exc})")
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail("the server closed the connection without answering")

    # httptools' callbacks

    def on_status(self, status: bytes) -> None:
        self._reason = status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        answer = Answer(self.parser.get_status_code(), self._reason, self._headers, b"".join(self._body))
        self.reusable = self.parser.should_keep_alive()
        self._reason, self._headers, self._body = "", {}, []
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_result(answer)

    # ours

    async def exchange(self, request: bytes) -> Answer:
        assert self.transport is not None
        self.waiting = asyncio.get_running_loop().create_future()
        self.reusable = False
        self.transport.write(request)
        try:
            return await self.waiting
        finally:
            self.waiting = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, why: str) -> None:
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_exception(NoAnswer(why))


def cannot_connect(host: str | None, port: int | None, error: OSError) -> str:
    """Why a connection could not be made, in a person's words: the system's text for its errno when it has one."""
    why = os.strerror(error.errno) if error.errno else str(error) or type(error).__name__
    return f"cannot connect to {host}:{port} ({why.lower()})"


class Connections:
    """The connections to one server (``https://host:port[/prefix]``): ``tls`` is the TLS context of an https
    server (None or False: plain HTTP), and each request has its answer within ``timeout`` seconds or fails with
    TimeoutError."""

    def __init__(
        self,
        server: str,
        tls: ssl.SSLContext | bool | None,
        timeout: float,
        limit: int = LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        url = urllib.parse.urlsplit(server)
        https = url.scheme == "https"
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if https else 80)
        self._authority = url.netloc.rpartition("@")[2]
        self._prefix = url.path.rstrip("/")
        self._tls = (
            (tls if isinstance(tls, ssl.SSLContext) else ssl.create_default_context()) if https else None
        )
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(limit)
        self._closed = False
        self._timeout = timeout
        self._clock = clock

    async def request(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str],
        body: bytes | None,
    ) -> Answer:
        """Send one request and read its whole answer."""
        request = self._encoded(method, path, params, headers, body)
        async with asyncio.timeout(self._timeout), self._slots:
            connection = await self._connection()
            try:
                answer = await connection.exchange(request)
            except BaseException:
                connection.close()
                raise
            if connection.reusable and not connection.closed and not self._closed:
                connection.idle_since = self._clock()
                self._idle.append(connection)
            else:
                connection.close()
            return answer

    async def close(self) -> None:
        """For good: idle connections are closed now, those in use when their request ends."""
        self._closed = True
        for connection in self._idle:
            connection.close()
        self._idle.clear()

    async def _connection(self) -> _Connection:
        if self._closed:
            raise NoAnswer("the client is closed")
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed and self._clock() - connection.idle_since < IDLE_KEPT:
                return connection
            connection.close()
        try:
            _, connection = await asyncio.get_running_loop().create_connection(
                _Connection,
                self.host,
                self.port,
                ssl=self._tls,
                server_hostname=self.host if self._tls is not None else None,
            )
        except ssl.SSLCertVerificationError as exc:
            raise NoAnswer(
                f"the TLS certificate of {self.host}:{self.port} is not trusted ({exc.verify_message})"
            ) from exc
        except OSError as exc:
            raise NoAnswer(cannot_connect(self.host, self.port, exc)) from exc
        return connection

    def _encoded(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str],
        body: bytes | None,
    ) -> bytes:
        target = self._prefix + path + ("?" + urllib.parse.urlencode(params) if params else "")
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._authority}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        head = "\r\n".join(lines)
        if "\n" in target or any("\r" in v or "\n" in v for v in headers.values()):
            raise ValueError(f"a line break in the request {method} {path} or in one of its headers")
        return head.encode("latin-1") + b"\r\n\r\n" + (body or b"")
