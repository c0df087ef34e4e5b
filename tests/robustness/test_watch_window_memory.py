"""A large object written many times costs a bounded amount of memory: the watch window keeps at most its byte
budget of old versions, not every one (a 1 MB ConfigMap updated 300 times once grew the server by 276 MB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from multiqueue.api.types import CONFIGMAPS
from tests.support.attacks import rss_mb
from tests.support.localup import one_cluster

pytestmark = pytest.mark.robustness

UPDATES = 300
SIZE = 1_000_000
GROWTH_LIMIT_MB = 50


async def test_a_large_object_updated_many_times_grows_the_server_by_less_than_the_limit(
    tmp_path: Path,
) -> None:
    async with one_cluster(tmp_path) as (up, client):
        await client.create(CONFIGMAPS, {"metadata": {"name": "big"}, "data": {"i": "0"}}, "default")
        before = rss_mb(up.process.pid)
        payload = "x" * SIZE
        for i in range(UPDATES):
            await client.patch(
                CONFIGMAPS, "big", {"data": {"i": str(i), "v": payload[i:] + payload[:i]}}, "default"
            )
        grown = rss_mb(up.process.pid) - before
        await client.delete(CONFIGMAPS, "big", "default")
    print(
        f"\nwatch window memory: {UPDATES} updates of a {SIZE / 1e6:g} MB ConfigMap grew the server by {grown:.0f} MB"
    )
    assert grown < GROWTH_LIMIT_MB
