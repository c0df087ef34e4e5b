"""SIGKILL an embedded API server in the middle of write bursts, 30 times, and start it again on the same state.

What a client relies on, checked after every restart:

- no acknowledged write is lost: each object is as its last acknowledged write left it, or as the one write to it
  still unanswered at the crash left it;
- resourceVersions are never handed out twice: every write acknowledged after a restart has a resourceVersion
  greater than any the server returned before the crash (in write responses, lists and watch events);
- a watch resumed from a resourceVersion of before the crash sees every later event: the events a watch saw
  before the crash, again, and one for every write acknowledged after that resourceVersion.

Seeded and bounded: each writer owns its objects and writes them one request at a time, so the outcome of every
acknowledged request is known exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
from pathlib import Path
from typing import Any

import pytest

from multiqueue.api.types import CONFIGMAPS, NAMESPACES
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import KubeError
from tests.support.localup import LocalUp

pytestmark = pytest.mark.robustness

SEED = 18
CYCLES = 30
WRITERS = 6
NAMES_PER_WRITER = 4
NAMESPACE = "crash"
CLUSTER = "one"
WATCH_TIMEOUT = 30.0


@dataclasses.dataclass
class Ledger:
    """What the clients were told, across every crash."""

    acked: dict[str, int | None] = dataclasses.field(default_factory=dict)  # name -> value (None: deleted)
    unanswered: dict[str, int | None] = dataclasses.field(default_factory=dict)  # in flight at the crash
    write_rvs: list[int] = dataclasses.field(default_factory=list)  # this cycle's acknowledged writes
    max_returned: int = 0  # the newest resourceVersion any response carried
    floor: int = 0  # max_returned at the last crash: every write after the restart must be newer
    burst: int = 0  # acknowledged writes this cycle before the crash
    burst_done: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    writes_acked: int = 0
    rvs_checked: int = 0
    events_checked: int = 0

    def returned(self, rv: int) -> None:
        self.max_returned = max(self.max_returned, rv)


def _rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def _value(obj: dict[str, Any]) -> int:
    return int(obj["data"]["v"])


async def _writer(
    client: KubeClient, names: list[str], ledger: Ledger, rng: random.Random, counter: list[int]
) -> None:
    """Create, update and delete ``names`` one request at a time until a request fails (the crash)."""
    while True:
        name = rng.choice(names)
        counter[0] += 1
        value = counter[0]
        current = ledger.acked.get(name)
        deleting = current is not None and rng.random() < 0.25
        ledger.unanswered[name] = None if deleting else value
        try:
            if current is None:
                body = {"metadata": {"name": name}, "data": {"v": str(value)}}
                obj = await client.create(CONFIGMAPS, body, NAMESPACE)
            elif deleting:
                obj = await client.delete(CONFIGMAPS, name, NAMESPACE)
            else:
                obj = await client.patch(CONFIGMAPS, name, {"data": {"v": str(value)}}, NAMESPACE)
        except KubeError:
            return  # unanswered: it may or may not have been written
        del ledger.unanswered[name]
        ledger.acked[name] = None if deleting else value
        ledger.writes_acked += 1
        if not deleting:
            assert _rv(obj) > ledger.floor, (
                f"{name}: resourceVersion {_rv(obj)} was handed out before the crash"
            )
            ledger.rvs_checked += ledger.floor > 0
            ledger.write_rvs.append(_rv(obj))
            ledger.returned(_rv(obj))
        if len(ledger.write_rvs) >= ledger.burst:
            ledger.burst_done.set()


async def _watch(client: KubeClient, since: int, seen: list[tuple[int, str, str]], ledger: Ledger) -> None:
    """Record every event after ``since`` until the stream breaks."""
    with contextlib.suppress(KubeError):
        async for event in client.watch(CONFIGMAPS, NAMESPACE, resource_version=str(since), bookmarks=False):
            obj = event["object"]
            seen.append((_rv(obj), event["type"], obj["metadata"]["name"]))
            ledger.returned(_rv(obj))


async def _resumed(client: KubeClient, since: int, marker: str) -> list[tuple[int, str, str]]:
    """The events after ``since``, up to the ADDED event of ``marker``."""
    events: list[tuple[int, str, str]] = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(WATCH_TIMEOUT):
            async for event in client.watch(
                CONFIGMAPS, NAMESPACE, resource_version=str(since), bookmarks=False
            ):
                obj = event["object"]
                events.append((_rv(obj), event["type"], obj["metadata"]["name"]))
                if obj["metadata"]["name"] == marker:
                    return events
    raise AssertionError(f"the watch from {since} never showed {marker}; it showed {events}")


async def _check_restart(client: KubeClient, ledger: Ledger, before_crash: int) -> dict[str, int | None]:
    """Every acknowledged write is there; the objects as they are now."""
    page = await client.list_page(CONFIGMAPS, NAMESPACE)
    found: dict[str, int | None] = {
        item["metadata"]["name"]: _value(item) for item in page["items"] if "v" in item.get("data", {})
    }
    for name, value in ledger.acked.items():
        allowed = {value} | ({ledger.unanswered[name]} if name in ledger.unanswered else set())
        assert found.get(name) in allowed, f"{name}: acknowledged {value}, found {found.get(name)}"
    for name in set(found) - set(ledger.acked):
        assert ledger.unanswered.get(name, -1) == found[name], (
            f"{name} was never written, found {found[name]}"
        )
    assert int(page["metadata"]["resourceVersion"]) >= before_crash
    return {name: found.get(name) for name in set(ledger.acked) | set(found)}


async def test_sigkill_during_write_bursts_loses_no_write_and_reuses_no_resource_version(
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED)
    up = LocalUp(tmp_path, {"clusters": [{"name": CLUSTER, "kubelet": "none"}], "controlPlane": "embedded"})
    ledger = Ledger()
    counter = [0]
    names = [[f"w{w}-{n}" for n in range(NAMES_PER_WRITER)] for w in range(WRITERS)]
    await up.start()
    try:
        client = await up.connect(CLUSTER)
        await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        await client.close()
        for cycle in range(CYCLES):
            client = await up.connect(CLUSTER)
            try:
                start = await client.list_page(CONFIGMAPS, NAMESPACE)
                since = int(start["metadata"]["resourceVersion"])
                ledger.returned(since)
                ledger.write_rvs = []
                ledger.burst = rng.randint(10, 60)
                ledger.burst_done.clear()
                seen: list[tuple[int, str, str]] = []
                watch = asyncio.create_task(_watch(client, since, seen, ledger))
                writers = [
                    asyncio.create_task(
                        _writer(client, names[w], ledger, random.Random(rng.random()), counter)
                    )
                    for w in range(WRITERS)
                ]
                await asyncio.wait_for(ledger.burst_done.wait(), WATCH_TIMEOUT)
                await up.crash()
                await asyncio.gather(*writers)
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch
            finally:
                await client.close()
            before_crash = ledger.floor = ledger.max_returned
            acked_this_cycle = sorted(ledger.write_rvs)

            await up.start()
            client = await up.connect(CLUSTER)
            try:
                now = await _check_restart(client, ledger, before_crash)
                marker = f"marker-{cycle}"
                created = await client.create(CONFIGMAPS, {"metadata": {"name": marker}}, NAMESPACE)
                assert _rv(created) > before_crash, f"cycle {cycle}: {_rv(created)} was handed out before"
                ledger.rvs_checked += 1
                resumed = await _resumed(client, since, marker)
                rvs = [rv for rv, _, _ in resumed]
                assert rvs == sorted(set(rvs)), f"cycle {cycle}: events out of order or repeated"
                missing_seen = [e for e in seen if e not in resumed]
                assert not missing_seen, f"cycle {cycle}: the resumed watch missed {missing_seen}"
                missing_acked = set(acked_this_cycle) - set(rvs)
                assert not missing_acked, f"cycle {cycle}: no event for acknowledged writes {missing_acked}"
                ledger.events_checked += len(resumed)
                await client.delete(CONFIGMAPS, marker, NAMESPACE)
            finally:
                await client.close()
            ledger.acked = {name: value for name, value in now.items() if not name.startswith("marker-")}
            ledger.unanswered = {}
    finally:
        await up.close()
    print(
        f"\ncrash test: {CYCLES} SIGKILL cycles, {ledger.writes_acked} acknowledged writes, "
        f"{ledger.rvs_checked} resourceVersions written after a restart checked newer than any returned before it, "
        f"{ledger.events_checked} resumed watch events checked"
    )
