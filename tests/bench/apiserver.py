"""Local API server throughput and watch latency.

Figures: creates/s and gets/s with 16 concurrent clients, the time to list 10,000 objects (one request, and in
pages of 500 as kubectl does), and the delay from sending a write to its event arriving at each of 100 watchers.
Run: ``python -m tests.bench.apiserver``; figures go to tests/bench/results.json.
"""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp

from tests.bench.common import ServerProcess, record, summary_ms

CLIENTS = 16
OBJECTS = 10_000
WATCHERS = 100
WATCHED_WRITES = 200
PATH = "/api/v1/namespaces/default/configmaps"


async def _creates(session: aiohttp.ClientSession, total: int) -> float:
    names = iter(range(total))

    async def client() -> None:
        for i in names:
            async with session.post(PATH, json={"metadata": {"name": f"cm-{i}"}, "data": {"i": str(i)}}) as r:
                assert r.status == 201, await r.text()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return total / (time.perf_counter() - started)


async def _gets(session: aiohttp.ClientSession, total: int) -> float:
    names = iter(range(total))

    async def client() -> None:
        for i in names:
            async with session.get(f"{PATH}/cm-{i % OBJECTS}") as r:
                assert r.status == 200
                await r.read()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return total / (time.perf_counter() - started)


async def _list_seconds(session: aiohttp.ClientSession, page: int | None) -> float:
    started = time.perf_counter()
    token = ""
    count = 0
    while True:
        params = {"limit": str(page)} if page else {}
        if token:
            params["continue"] = token
        async with session.get(PATH, params=params) as r:
            body = await r.json()
        count += len(body["items"])
        token = body["metadata"].get("continue", "")
        if not token:
            break
    assert count >= OBJECTS
    return time.perf_counter() - started


async def _watch_latency(session: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> list[float]:
    async with session.get(PATH, params={"limit": "1"}) as r:
        rv = (await r.json())["metadata"]["resourceVersion"]
    sent: dict[str, float] = {}
    arrivals: list[tuple[str, float]] = []
    ready = asyncio.Semaphore(0)

    async def watcher() -> None:
        async with (
            aiohttp.ClientSession(url, headers=headers) as own,
            own.get(PATH, params={"watch": "1", "resourceVersion": rv, "timeoutSeconds": "120"}) as stream,
        ):
            ready.release()
            seen = 0
            async for line in stream.content:
                event = json.loads(line)
                name = event["object"]["metadata"]["name"]
                if name.startswith("w-"):
                    arrivals.append((name, time.perf_counter()))
                    seen += 1
                    if seen == WATCHED_WRITES:
                        return

    tasks = [asyncio.create_task(watcher()) for _ in range(WATCHERS)]
    for _ in range(WATCHERS):
        await ready.acquire()
    for i in range(WATCHED_WRITES):
        sent[f"w-{i}"] = time.perf_counter()
        async with session.post(PATH, json={"metadata": {"name": f"w-{i}"}}) as r:
            assert r.status == 201
    await asyncio.gather(*tasks)
    return [arrived - sent[name] for name, arrived in arrivals]


async def main() -> None:
    server = ServerProcess()
    try:
        connector = aiohttp.TCPConnector(limit=CLIENTS * 2)
        async with aiohttp.ClientSession(
            server.url, headers=server.headers(), connector=connector
        ) as session:
            creates = await _creates(session, OBJECTS)
            gets = await _gets(session, OBJECTS)
            list_all = await _list_seconds(session, None)
            list_paged = await _list_seconds(session, 500)
            delays = await _watch_latency(session, server.url, server.headers())
    finally:
        server.stop()
    record(
        "apiserver",
        {
            "clients": CLIENTS,
            "creates_per_s": round(creates, 1),
            "gets_per_s": round(gets, 1),
            "list_10000_one_request_s": round(list_all, 3),
            "list_10000_pages_of_500_s": round(list_paged, 3),
            "watch_event_delay_100_watchers": summary_ms(delays),
        },
    )


if __name__ == "__main__":
    asyncio.run(main())
