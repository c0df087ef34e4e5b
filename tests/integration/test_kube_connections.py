"""The kept-alive connections every request answered in one piece goes through, against a scripted server on a
real socket: one connection carries request after request, whatever way the answer's length is given; a
connection the server closes (idle, after its answer, or before it) is never used again; and every way a request
gets no answer says why in a person's words, for a KubeClient's retries to act on."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from multiqueue.api.types import JOBS
from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.kube.config import load_credentials
from multiqueue.kube.connections import IDLE_KEPT, Connections, NoAnswer
from multiqueue.kube.errors import NotFound
from multiqueue.local.certs import serving_cert

OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"kind":1}\n'
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    b'4\r\n{"ki\r\n7\r\nnd":2}\n\r\n0\r\n\r\n'
)
CLOSING = b'HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 10\r\n\r\n{"kind":3}'
MISSING = (
    b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 111\r\n\r\n"
    b'{"kind":"Status","status":"Failure","reason":"NotFound","code":404,'
    b'"message":"jobs.batch \\"gone\\" not found"}      '
)

# What the scripted server does with one request: the bytes to answer with, or None to close without answering,
# or ... to read it and never answer.
Script = Callable[[int, int], "bytes | type[Ellipsis] | None"]


class Scripted:
    """A server on a real socket that answers each request by its script, given the connection's number and the
    request's number on it; it counts connections and sees when a client closes one."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.closed_by_client = asyncio.Event()
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number, served = self.connections, 0
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
                    0,
                )  # fmt: skip
                await reader.readexactly(length)
                served += 1
                answer = self.script(number, served)
                if answer is None:
                    writer.close()
                    return
                if answer is Ellipsis:
                    continue
                assert isinstance(answer, bytes)
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer:
                    writer.close()
                    return
        except asyncio.IncompleteReadError:
            self.closed_by_client.set()
            writer.close()

    async def start(self, tls: ssl.SSLContext | None = None) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0, ssl=tls)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()


async def _client(url: str) -> KubeClient:
    credentials = await load_credentials(
        config_dict={
            "clusters": [{"name": "c", "cluster": {"server": url}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "c",
        }
    )
    return KubeClient(credentials, "scripted", ClientOptions(qps=0))


@pytest.fixture
async def scripted() -> AsyncIterator[Callable[[Script], Scripted]]:
    made: list[Scripted] = []

    def make(script: Script) -> Scripted:
        made.append(Scripted(script))
        return made[-1]

    yield make
    for server in made:
        await server.stop()


async def test_one_connection_carries_request_after_request_whatever_way_the_length_is_given(
    scripted: Callable[[Script], Scripted],
) -> None:
    server = scripted(lambda _c, n: OK if n % 2 else CHUNKED)
    connections = Connections(await server.start(), None, timeout=5)
    try:
        answers = [await connections.request("GET", "/x", {"a": "b c"}, {}, None) for _ in range(4)]
        assert [(a.status, a.body, a.content_type) for a in answers] == [
            (200, b'{"kind":1}\n', "application/json"),
            (200, b'{"kind":2}\n', "application/json"),
        ] * 2
        assert server.connections == 1
    finally:
        await connections.close()


async def test_a_connection_the_server_closes_is_not_used_again(
    scripted: Callable[[Script], Scripted],
) -> None:
    server = scripted(lambda connection, _n: CLOSING if connection == 1 else OK)
    connections = Connections(await server.start(), None, timeout=5)
    try:
        assert (await connections.request("GET", "/x", None, {}, None)).body == b'{"kind":3}'
        assert (await connections.request("GET", "/x", None, {}, None)).body == b'{"kind":1}\n'
    finally:
        await connections.close()
    # The server closes a client's idle connection: its next request is answered, on a new connection (the
    # client sees the closed one as closed, or its retry does, when the request was already on its way).
    client = await _client(server.url)
    try:
        await client.get(JOBS, "one", "default")
        for writer in server.writers:
            writer.close()
            await writer.wait_closed()
        assert (await client.get(JOBS, "two", "default")) == {"kind": 1}
        assert server.connections == 4
    finally:
        await client.close()


async def test_a_connection_idle_too_long_is_closed_rather_than_used_again(
    scripted: Callable[[Script], Scripted],
) -> None:
    server = scripted(lambda _c, _n: OK)
    now = [0.0]
    connections = Connections(await server.start(), None, timeout=5, clock=lambda: now[0])
    try:
        await connections.request("GET", "/x", None, {}, None)
        now[0] += IDLE_KEPT - 1
        await connections.request("GET", "/x", None, {}, None)
        assert server.connections == 1, "idle for less than IDLE_KEPT: used again"
        now[0] += IDLE_KEPT
        await connections.request("GET", "/x", None, {}, None)
        assert server.connections == 2, "idle for longer: closed, and a new one opened"
        async with asyncio.timeout(5):
            await server.closed_by_client.wait()
    finally:
        await connections.close()


async def test_a_request_the_server_drops_fails_and_a_client_retries_it_on_a_new_connection(
    scripted: Callable[[Script], Scripted],
) -> None:
    # Connection 1 is dropped on its first request; connection 2 answers.
    server = scripted(lambda connection, _n: None if connection == 1 else MISSING)
    url = await server.start()
    connections = Connections(url, None, timeout=5)
    try:
        with pytest.raises(NoAnswer, match=r"^the server closed the connection without answering$"):
            await connections.request("GET", "/x", None, {}, None)
    finally:
        await connections.close()
    server.connections = 0
    client = await _client(url)
    try:
        with pytest.raises(NotFound, match=r'jobs\.batch "gone" not found'):
            await client.get(JOBS, "gone", "default")
        assert server.connections == 2, "dropped once, then answered on a new connection"
        assert client.responses[("GET", "<error>")] == 1 and client.responses[("GET", "404")] == 1
    finally:
        await client.close()


async def test_every_request_without_an_answer_says_why(
    scripted: Callable[[Script], Scripted], tmp_path: Path
) -> None:
    silent = scripted(lambda _c, _n: ...)
    connections = Connections(await silent.start(), None, timeout=0.2)
    with pytest.raises(TimeoutError):
        await connections.request("GET", "/x", None, {}, None)
    async with asyncio.timeout(5):
        await silent.closed_by_client.wait()  # a request that timed out closes its connection

    garbled = scripted(lambda _c, _n: b"SSH-2.0-OpenSSH\r\n\r\n")
    connections = Connections(await garbled.start(), None, timeout=5)
    with pytest.raises(NoAnswer, match=r"^the server's answer is not HTTP/1\.1"):
        await connections.request("GET", "/x", None, {}, None)

    probe = await asyncio.start_server(lambda _r, _w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    connections = Connections(f"http://127.0.0.1:{port}", None, timeout=5)
    with pytest.raises(NoAnswer, match=rf"^cannot connect to 127\.0\.0\.1:{port} \(connection refused\)$"):
        await connections.request("GET", "/x", None, {}, None)

    cert = serving_cert(tmp_path, "scripted", "127.0.0.1")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert.cert_file, cert.key_file)
    secure = scripted(lambda _c, _n: OK)
    url = await secure.start(tls)
    untrusting = Connections(url, ssl.create_default_context(), timeout=5)
    with pytest.raises(NoAnswer, match=r"^the TLS certificate of 127\.0\.0\.1:\d+ is not trusted \(.+\)$"):
        await untrusting.request("GET", "/x", None, {}, None)
    trusting = Connections(url, ssl.create_default_context(cafile=str(cert.ca_file)), timeout=5)
    try:
        assert (await trusting.request("GET", "/x", None, {}, None)).status == 200
    finally:
        await trusting.close()

    with pytest.raises(ValueError, match="a line break"):
        await trusting.request("GET", "/x", None, {"Authorization": "Bearer t\r\nX-Evil: 1"}, None)
    with pytest.raises(NoAnswer, match=r"^the client is closed$"):
        await trusting.request("GET", "/x", None, {}, None)
