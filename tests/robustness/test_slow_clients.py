"""Slow clients cannot hold the embedded API server's connections: 50 that trickle their request headers (no token
needed for that) and 50 that send headers and trickle the body are all closed within the configured timeouts, while
a normal client keeps getting answers on its kept-alive connection."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from multiqueue.apiserver.server import ApiServer
from tests.support.servers import server_config

pytestmark = pytest.mark.robustness

CONNECTIONS = 50  # of each kind
HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 2.0
TRICKLE = 0.2  # seconds between two bytes of a slow client
SLACK = 1.5  # the event loop of a busy 2-core machine
GIVE_UP = 15.0


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    config = server_config(
        tmp_path / "state", request_header_timeout=HEADER_TIMEOUT, request_body_timeout=BODY_TIMEOUT
    )
    running = ApiServer(config)
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


async def _slow_client(server: ApiServer, head: bytes, trickled: bytes) -> tuple[float, bytes]:
    """Send ``head`` at once, then ``trickled`` a byte at a time; return when the server closed the connection
    (seconds after connecting) and what it answered."""
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)

    async def trickle() -> None:
        writer.write(head)
        for byte in trickled:
            await writer.drain()
            await asyncio.sleep(TRICKLE)  # the client's own pace, not a wait for state
            writer.write(bytes([byte]))

    sender = asyncio.create_task(trickle())
    answer = b""
    try:
        async with asyncio.timeout(GIVE_UP):
            while chunk := await reader.read(65536):
                answer += chunk
    except (ConnectionResetError, BrokenPipeError):
        pass
    closed_after = time.monotonic() - started
    sender.cancel()
    await asyncio.gather(sender, return_exceptions=True)
    writer.close()
    return closed_after, answer


async def _normal_client(server: ApiServer, stop: asyncio.Event) -> list[float]:
    """GETs one after another on one kept-alive connection until ``stop``; each one's latency."""
    latencies = []
    headers = {"Authorization": f"Bearer {server.config.token}"}
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(server.url, headers=headers, connector=connector) as session:
        while not stop.is_set():
            started = time.monotonic()
            async with session.get("/api/v1/namespaces/default") as response:
                assert response.status == 200
                await response.read()
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(0.05)
    return latencies


async def test_slow_clients_are_closed_within_the_timeouts(server: ApiServer) -> None:
    slow_header = b"GET /api/v1/namespaces HTTP/1.1\r\nHost: localhost\r\n"
    endless_header = b"X-Slow: " + b"a" * 1000
    body = b'{"metadata":{"name":"slow"}}'.ljust(1000)
    slow_body = (
        b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: localhost\r\n"
        + f"Authorization: Bearer {server.config.token}\r\n".encode()
        + f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    )
    stop = asyncio.Event()
    normal = asyncio.create_task(_normal_client(server, stop))
    headers_group = [_slow_client(server, slow_header, endless_header) for _ in range(CONNECTIONS)]
    body_group = [_slow_client(server, slow_body, body) for _ in range(CONNECTIONS)]
    results = await asyncio.gather(*headers_group, *body_group)
    stop.set()
    latencies = await normal
    by_headers, by_body = results[:CONNECTIONS], results[CONNECTIONS:]

    header_times = sorted(t for t, _ in by_headers)
    body_times = sorted(t for t, _ in by_body)
    print(
        f"\n{CONNECTIONS} slow-header connections closed after {header_times[0]:.2f}-{header_times[-1]:.2f} s "
        f"(header timeout {HEADER_TIMEOUT} s); {CONNECTIONS} slow-body connections closed after "
        f"{body_times[0]:.2f}-{body_times[-1]:.2f} s (body timeout {BODY_TIMEOUT} s); "
        f"normal client: {len(latencies)} answers, slowest {max(latencies) * 1000:.0f} ms"
    )
    # Closed without an answer, as Go closes a connection whose headers are late.
    assert all(answer == b"" for _, answer in by_headers)
    assert header_times[0] >= HEADER_TIMEOUT and header_times[-1] <= HEADER_TIMEOUT + SLACK
    # Answered upstream's 504 Timeout Status, then closed.
    assert all(
        answer.startswith(b"HTTP/1.1 504 ") and b'"reason":"Timeout"' in answer for _, answer in by_body
    )
    assert body_times[0] >= BODY_TIMEOUT and body_times[-1] <= BODY_TIMEOUT + SLACK
    assert len(latencies) >= 10 and max(latencies) < 1.0
