"""What hostile requests cost everyone else: GET latency of a well-behaved client while the server is idle, while
one connection sends the attacks of tests/support/attacks.py (patch amplification, deep nesting) ten times a
second, and while four connections send them back to back; and how much the server grew. One ``multiqueue local
up`` process with one cluster.

Run: ``python -m tests.bench.attacks``; figures go to tests/bench/results.json.
"""

from __future__ import annotations

import asyncio
import collections
import tempfile
import time
from pathlib import Path

import aiohttp

from multiqueue.api.types import CONFIGMAPS
from multiqueue.kube.client import KubeClient
from tests.bench.common import percentile, record, summary_ms
from tests.support.attacks import ATTACKS, TARGET, rss_mb, send, session_for
from tests.support.localup import one_cluster

GETS = 400
ATTACKERS = 4
PACE = 0.1


async def _get_latencies(client: KubeClient) -> list[float]:
    latencies = []
    for _ in range(GETS):
        started = time.perf_counter()
        await client.get(CONFIGMAPS, TARGET, "default")
        latencies.append(time.perf_counter() - started)
    return latencies


async def _attacked(
    client: KubeClient,
    session: aiohttp.ClientSession,
    server: str,
    answers: collections.Counter[int],
    attackers: int,
    pause: float,
) -> list[float]:
    """GET latencies while ``attackers`` connections send attacks, each waiting ``pause`` after every answer."""
    attacking = True

    async def attacker(offset: int) -> None:
        turn = offset
        while attacking:
            answers[await send(session, server, ATTACKS[turn % len(ATTACKS)])] += 1
            turn += 1
            await asyncio.sleep(pause)  # the attacker's own pace

    tasks = [asyncio.create_task(attacker(i)) for i in range(attackers)]
    latencies = await _get_latencies(client)
    attacking = False
    await asyncio.gather(*tasks)
    return latencies


async def main() -> None:
    with tempfile.TemporaryDirectory() as workdir:
        async with one_cluster(Path(workdir)) as (up, client):
            session, server = session_for(up.kubeconfig, "one")
            try:
                await client.create(CONFIGMAPS, {"metadata": {"name": TARGET}, "data": {"k": "v"}}, "default")
                await _get_latencies(client)  # warm up: connections, caches
                idle = await _get_latencies(client)
                before = rss_mb(up.process.pid)
                answers: collections.Counter[int] = collections.Counter()
                paced = await _attacked(client, session, server, answers, attackers=1, pause=PACE)
                flooded = await _attacked(client, session, server, answers, attackers=ATTACKERS, pause=0.0)
                grown = rss_mb(up.process.pid) - before
            finally:
                await session.close()
    record(
        "attacks",
        {
            "gets": GETS,
            "attackers_back_to_back": ATTACKERS,
            "attack_answers": {str(code): n for code, n in sorted(answers.items())},
            "get_idle": summary_ms(idle),
            "get_attacked_10_per_s": summary_ms(paced),
            "get_attacked_back_to_back": summary_ms(flooded),
            "p99_ratio_10_per_s": round(percentile(paced, 99) / percentile(idle, 99), 2),
            "p99_ratio_back_to_back": round(percentile(flooded, 99) / percentile(idle, 99), 2),
            "server_growth_mb": round(grown, 1),
        },
    )


if __name__ == "__main__":
    asyncio.run(main())
