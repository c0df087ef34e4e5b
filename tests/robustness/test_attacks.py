"""Requests built to hurt the server are refused before they cost anything: a kilobyte JSON patch whose copies would
double a value 25 times (it once grew an object to 30 MB and the server by 200 MB) and bodies nested tens of
thousands deep (they were 500s, and objects nested 500 deep could no longer be deleted). Each is answered with
kube-apiserver's 4xx, nothing of it is stored, and 200 of them grow the server by less than 50 MB. What they cost
other clients' latency is measured by ``python -m tests.bench.attacks``."""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path

import pytest

from multiqueue.api.types import CONFIGMAPS
from tests.support.attacks import ATTACKS, TARGET, Attack, rss_mb, send, session_for
from tests.support.localup import one_cluster

pytestmark = pytest.mark.robustness

ROUNDS = 50  # of each attack: 200 requests
AT_ONCE = 4
GROWTH_LIMIT_MB = 50


async def test_amplifying_and_deeply_nested_requests_are_refused_and_cost_little_memory(
    tmp_path: Path,
) -> None:
    async with one_cluster(tmp_path) as (up, client):
        session, server = session_for(up.kubeconfig, "one")
        try:
            target = await client.create(
                CONFIGMAPS, {"metadata": {"name": TARGET}, "data": {"k": "v"}}, "default"
            )
            before = rss_mb(up.process.pid)
            answers: collections.Counter[tuple[str, int]] = collections.Counter()
            gate = asyncio.Semaphore(AT_ONCE)

            async def attack(one: Attack) -> None:
                async with gate:
                    answers[(one.name, await send(session, server, one))] += 1

            await asyncio.gather(*(attack(one) for _ in range(ROUNDS) for one in ATTACKS))
            grown = rss_mb(up.process.pid) - before
            after = await client.get(CONFIGMAPS, TARGET, "default")
            names = [m["metadata"]["name"] for m in (await client.list(CONFIGMAPS, "default"))[0]]
        finally:
            await session.close()
    print(f"\nattacks: {dict(answers)}; the server grew by {grown:.1f} MB ({before:.0f} MB before)")
    assert answers == {(one.name, one.refused_with): ROUNDS for one in ATTACKS}
    assert after == target, "a refused patch changed its object"
    assert "deep" not in names, "a refused create was stored"
    assert grown < GROWTH_LIMIT_MB
