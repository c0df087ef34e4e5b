"""Leader election: one leader at a time; a successor within the lease duration when the leader dies."""

from __future__ import annotations

import asyncio
import contextlib
import time

from multiqueue.api.types import LEASES
from multiqueue.apiserver.server import ApiServer
from multiqueue.kube.leaderelection import LeaderElector, LeaseTimings
from tests.support.clients import client_for

TIMINGS = LeaseTimings(lease_duration=2.0, renew_deadline=1.5, retry_period=0.2)


async def test_one_leader_and_takeover_after_it_dies(apiserver: ApiServer) -> None:
    clients = [await client_for(apiserver, f"c{i}") for i in range(2)]
    electors = [
        LeaderElector(c, "kube-system", "multiqueue", f"candidate-{i}", timings=TIMINGS)
        for i, c in enumerate(clients)
    ]
    tasks = [asyncio.create_task(e.run()) for e in electors]
    try:
        async with asyncio.timeout(10):
            await asyncio.wait(
                [asyncio.create_task(e.wait_until_leading()) for e in electors],
                return_when=asyncio.FIRST_COMPLETED,
            )
        leader = next(i for i, e in enumerate(electors) if e.is_leader)
        other = 1 - leader
        # Watch the leader renew a few times; the other candidate must stay a follower all along.
        lease = await clients[other].get(LEASES, "multiqueue", "kube-system")
        renewals = 0
        async for event in clients[other].watch(
            LEASES, "kube-system", resource_version=lease["metadata"]["resourceVersion"], timeout_seconds=10
        ):
            assert not electors[other].is_leader
            if event["type"] == "MODIFIED":
                renewals += 1
                assert event["object"]["spec"]["holderIdentity"] == f"candidate-{leader}"
            if renewals == 3:
                break
        # The leader dies without releasing the lease: its connection is gone first.
        await clients[leader].close()
        died = time.monotonic()
        tasks[leader].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await tasks[leader]
        async with asyncio.timeout(TIMINGS.lease_duration + 3):
            await electors[other].wait_until_leading()
        assert time.monotonic() - died <= TIMINGS.lease_duration + 2 * TIMINGS.retry_period + 0.5
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for client in clients:
            await client.close()


async def test_clean_shutdown_releases_the_lease(apiserver: ApiServer) -> None:
    first_client, second_client = await client_for(apiserver, "a"), await client_for(apiserver, "b")
    slow = LeaseTimings(lease_duration=60.0, renew_deadline=40.0, retry_period=0.2)
    first = LeaderElector(first_client, "kube-system", "release", "first", timings=slow)
    second = LeaderElector(second_client, "kube-system", "release", "second", timings=slow)
    first_task = asyncio.create_task(first.run())
    try:
        async with asyncio.timeout(10):
            await first.wait_until_leading()
        second_task = asyncio.create_task(second.run())
        first_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first_task
        # Released: the successor need not wait out the 60 s lease.
        async with asyncio.timeout(10):
            await second.wait_until_leading()
        second_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await second_task
    finally:
        await first_client.close()
        await second_client.close()
