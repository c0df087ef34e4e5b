"""A plain TCP proxy, run as its own process so a test can freeze it (SIGSTOP) and thaw it (SIGCONT): every
connection through it then stalls without being closed, as behind a hung node or a dropped network path.

    python -m tests.support.tcpproxy LISTEN_PORT TARGET_HOST TARGET_PORT

Listens on 127.0.0.1 (port 0: any free one) and prints the port it listens on, alone on one line, once it
accepts connections. TLS passes through untouched, so clients keep checking the target's certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

CHUNK = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy one direction until its end closes, then close the other end's write side."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


async def _serve_one(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    target_host: str,
    target_port: int,
) -> None:
    try:
        target_reader, target_writer = await asyncio.open_connection(target_host, target_port)
    except OSError:
        client_writer.close()
        return
    try:
        await asyncio.gather(_pipe(client_reader, target_writer), _pipe(target_reader, client_writer))
    finally:
        for writer in (client_writer, target_writer):
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()


async def serve(listen_port: int, target_host: str, target_port: int) -> None:
    server = await asyncio.start_server(
        lambda r, w: _serve_one(r, w, target_host, target_port), "127.0.0.1", listen_port
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    async with server:
        await stop.wait()


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m tests.support.tcpproxy LISTEN_PORT TARGET_HOST TARGET_PORT", file=sys.stderr)
        return 2
    asyncio.run(serve(int(argv[0]), argv[1], int(argv[2])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
