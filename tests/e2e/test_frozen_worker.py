"""A worker that hangs instead of failing: its API server stays connected but answers nothing.

The manager reaches worker-1 through a TCP proxy of its own process (tests/support/tcpproxy.py); SIGSTOP freezes
the proxy, so every connection to worker-1 stalls with no error and no close, as behind a hung node or a network
path that drops packets. worker-1 itself keeps running its pods.

- Frozen for good: the manager must call worker-1 unhealthy within 15 s (``multiqueue_cluster_active`` on its
  /metrics), and once ``workerLostTimeout`` passes, worker-1's unfinished Jobs complete on worker-2.
- Frozen, then thawed before ``workerLostTimeout``: nothing moves, nothing runs twice.

``local up`` (clusters only), the proxy and ``multiqueue manager`` are each a process of their own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest

from multiqueue.api.types import EVENTS, JOBS, LEASES
from multiqueue.dispatch.config import load_manager_config
from multiqueue.dispatch.lossclock import lease_name, recorded_since
from multiqueue.kube.errors import NotFound
from multiqueue.local.config import ControlPlane
from tests.support.jobwatch import (
    ORIGIN_LABEL,
    JobsView,
    Obj,
    condition_true,
    marker_job,
    marker_lines,
    not_exactly_once,
    placed_on,
)
from tests.support.localup import LocalUp, ManagerProcess, clusters_config, manager_config
from tests.support.processes import Spawned

pytestmark = pytest.mark.e2e

NAMESPACE = "default"
WORKER_LOST_TIMEOUT = 20.0
# The requirement: a worker that stops answering is reported unhealthy within this.
DETECTION_LIMIT = 15.0
METRIC_POLL = 0.2
JOBS_PER_SCENARIO = 4
# Jobs created just after the freeze, while the manager still takes worker-1 for healthy.
LATE_JOBS = 2
# Once a worker is lost, its Jobs complete elsewhere within this: no request left hanging on the frozen worker
# (a mirror create sent just before the freeze is given up when the probe fails) holds a Job back.
MOVE_LIMIT = 15.0
# Lines of the manager's log a failure message shows.
LOG_LINES = 40
_SAMPLE = re.compile(r"^multiqueue_cluster_active\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclasses.dataclass
class Frozen:
    """The clusters, the proxy in front of worker-1 and the manager that talks to worker-1 through it."""

    local: LocalUp
    proxy: Spawned
    manager: ManagerProcess
    http: aiohttp.ClientSession
    users: JobsView
    markers: Path
    gate: Path

    async def worker_active(self, cluster: str) -> tuple[bool, str]:
        """Whether the manager's /metrics calls ``cluster`` active, and the samples it shows for it."""
        text = await self.manager.metrics(self.http)
        samples = []
        for found in _SAMPLE.finditer(text):
            labels = dict(_LABEL.findall(found.group("labels")))
            if labels.get("cluster") == cluster:
                samples.append((labels.get("reason", ""), float(found.group("value"))))
        shown = ", ".join(f'reason="{r}" {v:g}' for r, v in samples) or "no sample"
        return bool(samples) and all(v == 1 for _, v in samples), shown

    async def until_active_is(self, cluster: str, active: bool, within: float) -> tuple[float, str]:
        """Poll the manager's /metrics until ``cluster`` is (in)active; seconds it took and the last samples."""
        began = time.monotonic()
        shown = ""
        while time.monotonic() - began < within:
            now_active, shown = await self.worker_active(cluster)
            if now_active == active:
                return time.monotonic() - began, shown
            await asyncio.sleep(METRIC_POLL)
        raise TimeoutError(f"{cluster} still {'in' if active else ''}active after {within:.0f} s ({shown})")

    async def create_pinned(self, names: list[str]) -> None:
        client = await self.local.connect("management")
        try:
            for name in names:
                body = marker_job(name, self.markers, gate=self.gate, pin="worker-1")
                await client.create(JOBS, body, NAMESPACE)
        finally:
            await client.close()

    async def until_jobs(
        self, names: list[str], check: Callable[[Obj], bool], within: float, what: str
    ) -> None:
        def holds() -> bool:
            return all(name in self.users.latest and check(self.users.latest[name]) for name in names)

        def shown() -> str:
            log = self.manager.process.log.read_text(errors="replace").splitlines()[-LOG_LINES:]
            return f"{what}; {self.users.states(names)}\nthe manager's log ends:\n" + "\n".join(log)

        await self.users.until(holds, within=within, what=shown)

    async def redispatched_events(self, names: list[str]) -> dict[str, list[str]]:
        client = await self.local.connect("management")
        try:
            found: dict[str, list[str]] = {}
            for name in names:
                events, _ = await client.list(
                    EVENTS, NAMESPACE, field_selector=f"involvedObject.name={name},reason=Redispatched"
                )
                if events:
                    found[name] = [str(e.get("message")) for e in events]
            return found
        finally:
            await client.close()

    async def recorded_loss(self, worker: str) -> float | None:
        settings = load_manager_config(self.manager.config_path)
        client = await self.local.connect("management")
        try:
            lease = await client.get(LEASES, lease_name(settings.name, worker), settings.lease_namespace)
        except NotFound:
            return None
        finally:
            await client.close()
        return recorded_since(lease)


def running_on_worker_1(job: Obj) -> bool:
    return placed_on(job) == "worker-1" and int((job.get("status") or {}).get("active") or 0) >= 1


def complete_once(job: Obj) -> bool:
    return condition_true(job, "Complete") and (job.get("status") or {}).get("succeeded") == 1


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
async def frozen(control_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[Frozen]:
    local = LocalUp(
        tmp_path, clusters_config("management", "worker-1", "worker-2", control_plane=control_plane)
    )
    proxy: Spawned | None = None
    manager: ManagerProcess | None = None
    users: JobsView | None = None
    http = aiohttp.ClientSession()
    try:
        await local.start()
        target = local.server_url("worker-1").removeprefix("https://")
        host, _, port = target.rpartition(":")
        proxy = Spawned.python(
            "tcpproxy", ["-m", "tests.support.tcpproxy", "0", host, port], tmp_path / "tcpproxy.log"
        )
        await proxy.start()
        proxy_port = int((await proxy.wait_for_line(r"^(\d+)$", within=30)).group(1))
        through_proxy = local.write_kubeconfig_via(
            "worker-1", proxy_port, tmp_path / "worker-1-via-proxy.kubeconfig"
        )
        config = manager_config(
            local.kubeconfig,
            {"worker-1": (through_proxy, "worker-1"), "worker-2": (local.kubeconfig, "worker-2")},
            placement="Ordered",
            workerLostTimeout=WORKER_LOST_TIMEOUT,
            gcInterval=5,
            workerSecrets={"enabled": False},
            metricsAddress=f"127.0.0.1:{free_port()}",
        )  # fmt: skip
        manager = ManagerProcess(tmp_path, config)
        await manager.start()
        print(
            f"\nworker-1 at {target}, through the proxy at 127.0.0.1:{proxy_port}; manager: {manager.metrics_url}"
        )
        users = JobsView(lambda: local.connect("management"), NAMESPACE, server_up=local.wait_ready)
        users.start()
        markers = tmp_path / "markers"
        markers.mkdir()
        yield Frozen(local, proxy, manager, http, users, markers, tmp_path / "gate")
    finally:
        if users is not None:
            await users.stop()
        await http.close()
        if manager is not None:
            await manager.close()
        if proxy is not None:
            await proxy.kill_group()
        left = await local.close()
        print(f"pod processes killed at teardown: {len(left)}")


async def test_a_frozen_worker_is_unhealthy_within_15s_and_its_jobs_finish_elsewhere(frozen: Frozen) -> None:
    began = time.monotonic()
    running = [f"frozen-{i}" for i in range(JOBS_PER_SCENARIO)]
    await frozen.create_pinned(running)
    await frozen.until_jobs(running, running_on_worker_1, 60, "the Jobs to run on worker-1")
    active, shown = await frozen.worker_active("worker-1")
    assert active, f"worker-1 is not active before the freeze: {shown}"

    frozen.proxy.signal(signal.SIGSTOP)
    stopped = time.monotonic()
    print(f"proxy to worker-1 frozen (SIGSTOP) {stopped - began:.1f} s into the test")
    # Placed on worker-1 before the manager can tell it froze: creating their mirrors hangs in the proxy.
    late = [f"late-{i}" for i in range(LATE_JOBS)]
    await frozen.create_pinned(late)
    names = running + late
    try:
        took, shown = await frozen.until_active_is("worker-1", False, within=DETECTION_LIMIT)
    except TimeoutError as exc:
        raise AssertionError(
            f"the manager did not report worker-1 unhealthy within {DETECTION_LIMIT:.0f} s of its API server "
            f"freezing: {exc}"
        ) from None
    print(f"worker-1 reported unhealthy {took:.1f} s after the freeze ({shown})")

    # worker-1 finishes its pods now, but the manager cannot hear it; the pods on worker-2 finish at once.
    frozen.gate.touch()
    within = WORKER_LOST_TIMEOUT + MOVE_LIMIT
    await frozen.until_jobs(
        names,
        lambda j: complete_once(j) and placed_on(j) == "worker-2",
        within,
        f"every Job Complete on worker-2 within {within:.0f} s of worker-1 being reported unhealthy "
        f"(workerLostTimeout + {MOVE_LIMIT:.0f} s)",
    )
    moved = time.monotonic()
    print(f"all Jobs Complete on worker-2 {moved - stopped:.1f} s after the freeze (workerLostTimeout {WORKER_LOST_TIMEOUT:.0f} s)")  # fmt: skip
    assert moved - stopped >= WORKER_LOST_TIMEOUT, "Jobs moved before workerLostTimeout passed"
    events = await frozen.redispatched_events(names)
    assert sorted(events) == names, f"Redispatched Events only for {sorted(events)}"
    # The manager made its namespace on a management cluster that had none, and keeps the loss clock there (a
    # restarted manager goes on counting from it).
    assert await frozen.recorded_loss("worker-1") is not None, "no loss clock recorded for worker-1"
    lines = marker_lines(frozen.markers, names)
    on_worker_2 = {
        n: sum(1 for line in found if line.startswith("worker-2-node ")) for n, found in lines.items()
    }
    assert all(count == 1 for count in on_worker_2.values()), (
        f"runs on worker-2 per Job: {on_worker_2}; {lines}"
    )
    print(f"test took {time.monotonic() - began:.1f} s")


async def test_a_worker_frozen_briefly_keeps_its_jobs_and_runs_nothing_twice(frozen: Frozen) -> None:
    began = time.monotonic()
    names = [f"thawed-{i}" for i in range(JOBS_PER_SCENARIO)]
    worker_2 = JobsView(
        lambda: frozen.local.connect("worker-2"), None, label_selector=ORIGIN_LABEL, server_up=frozen.local.wait_ready
    )  # fmt: skip
    worker_2.start()
    try:
        await frozen.create_pinned(names)
        await frozen.until_jobs(names, running_on_worker_1, 60, "the Jobs to run on worker-1")

        frozen.proxy.signal(signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            took, shown = await frozen.until_active_is("worker-1", False, within=DETECTION_LIMIT)
            print(f"\nworker-1 reported unhealthy {took:.1f} s after the freeze ({shown})")
        except TimeoutError as exc:
            print(f"\nthawing anyway: {exc}")
        frozen.proxy.signal(signal.SIGCONT)
        frozen_for = time.monotonic() - stopped
        print(f"proxy thawed (SIGCONT) after {frozen_for:.1f} s frozen (workerLostTimeout {WORKER_LOST_TIMEOUT:.0f} s)")  # fmt: skip
        assert frozen_for < WORKER_LOST_TIMEOUT
        try:
            back, shown = await frozen.until_active_is("worker-1", True, within=30)
        except TimeoutError as exc:
            raise AssertionError(f"worker-1 not active again 30 s after the thaw: {exc}") from None
        print(f"worker-1 active again {back:.1f} s after the thaw ({shown})")

        frozen.gate.touch()
        await frozen.until_jobs(names, complete_once, 60, "every Job Complete")
        labels = {n: placed_on(frozen.users.latest[n]) for n in names}
        assert all(w == "worker-1" for w in labels.values()), f"Jobs moved: {labels}"
        events = await frozen.redispatched_events(names)
        assert events == {}, f"Redispatched after a freeze shorter than workerLostTimeout: {events}"
        on_worker_2 = sorted(k for k in worker_2.uids_seen if k.split("/")[-1] in names)
        assert on_worker_2 == [], f"mirrors made on worker-2: {on_worker_2}"
        twice = not_exactly_once(frozen.markers, names)
        assert not twice, twice
        print(f"test took {time.monotonic() - began:.1f} s")
    finally:
        await worker_2.stop()
