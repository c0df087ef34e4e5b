"""Connections that cannot be held open by a client that never finishes its request headers.

aiohttp has no header-read timeout (Go's ``http.Server.ReadHeaderTimeout``, 32 s on kube-apiserver): a client that
trickles a request line a byte at a time keeps its connection, and its memory, for as long as it likes, before any
authentication runs. Here each connection gets a deadline when it opens, and again when the first bytes of a
following request arrive on a kept-alive connection; the deadline is lifted when the request's handler starts, and a
connection that reaches it is closed without an answer, as Go closes it. Idle kept-alive connections are left to
aiohttp's keep-alive timeout.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler


class HeaderDeadlineHandler(RequestHandler):
    """aiohttp's connection protocol with a deadline on reading each request's headers."""

    __slots__ = ("_header_deadline", "_header_timeout", "_in_request")

    def __init__(self, manager: Any, *, header_timeout: float, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._header_timeout = header_timeout
        self._header_deadline: asyncio.TimerHandle | None = None
        self._in_request = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if not self._in_request and self._header_deadline is None:
            self._arm()  # the first bytes of the next request on a kept-alive connection
        super().data_received(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def log_exception(self, *args: Any, **kw: Any) -> None:
        """One line, no traceback: a request aiohttp could not parse is the client's doing (debug), anything else
        is noted once (warning) without a traceback per request."""
        exc = kw.get("exc_info")
        level = logging.DEBUG if isinstance(exc, HttpProcessingError) else logging.WARNING
        message = args[0] % args[1:] if args else "connection error"
        self.logger.log(level, "%s: %s", message, exc)

    def request_started(self) -> None:
        """The headers are in and the handler runs: the deadline is met."""
        self._in_request = True
        self._disarm()

    def request_finished(self) -> None:
        self._in_request = False

    def _arm(self) -> None:
        self._header_deadline = asyncio.get_running_loop().call_later(self._header_timeout, self._expire)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _expire(self) -> None:
        self._header_deadline = None
        if not self._in_request:
            self.force_close()


class GuardedSite(web.BaseSite):
    """A TCP (or TLS) listener whose connections are :class:`HeaderDeadlineHandler`\\ s."""

    __slots__ = ("_handler_args", "_header_timeout", "_host", "_port")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        header_timeout: float,
        ssl_context: Any = None,
        **handler_args: Any,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self._host = host
        self._port = port
        self._header_timeout = header_timeout
        self._handler_args = handler_args

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self._port}"

    @property
    def port(self) -> int:
        """The port bound (the one asked for, or the one the system chose for port 0)."""
        assert self._server is not None, "site not started"
        sockets = getattr(self._server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else self._port

    async def start(self) -> None:
        await super().start()
        manager = self._runner.server
        assert manager is not None
        loop = asyncio.get_running_loop()

        def connection() -> HeaderDeadlineHandler:
            return HeaderDeadlineHandler(
                manager, loop=loop, header_timeout=self._header_timeout, **self._handler_args
            )

        self._server = await loop.create_server(
            connection,
            self._host,
            self._port,
            ssl=self._ssl_context,
            reuse_address=True,
            # Go's TLS handshake must also end within the header timeout.
            ssl_handshake_timeout=self._header_timeout if self._ssl_context else None,
        )
