"""The process kubelet after a crash or a restart: it adopts the pod processes it started instead of running them
again, reports the ones that ended meanwhile with their real exit codes, reports one it cannot locate as upstream
does (ContainerStatusUnknown, exit code 137), and still kills what it adopted when a pod is deleted.

Pod commands append "<pod> <pid>" to a marker file per pod (a second run would add a second line) and write the
same line to a named pipe the test reads, which is how it knows, without polling, that a command runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from multiqueue.api.types import JOBS, PODS
from multiqueue.apiserver.server import ApiServer
from multiqueue.kube.client import KubeClient
from multiqueue.kube.informer import Informer, InformerFactory
from multiqueue.local import containers
from multiqueue.local.kubelet import LocalKubelet
from tests.support.clients import client_for
from tests.support.pods import phase, pod_body
from tests.support.processes import REPO
from tests.support.waiting import Changes

Obj = dict[str, Any]
NODE = "node-1"
LOCAL_CONFIG = "clusters:\n  - name: management\n    controllers: [job]\n    kubelet: process\n"
STARTUP = 90.0  # seconds for `local up` to serve and for its kubelet to catch up, on a busy 2-core machine


# --- helpers --------------------------------------------------------------------------------------------------------


class Fifo:
    """A named pipe pod commands write "<pod> <pid>" lines to; read on the event loop, without polling."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.reader = asyncio.StreamReader()
        self._transport: asyncio.BaseTransport | None = None

    async def __aenter__(self) -> Fifo:
        os.mkfifo(self.path, 0o600)
        # Read and write: the pipe never reports end-of-file while commands come and go.
        pipe = os.fdopen(os.open(self.path, os.O_RDWR | os.O_NONBLOCK), "rb", buffering=0)
        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(self.reader), pipe
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._transport is not None:
            self._transport.close()

    async def started(self, count: int, within: float = STARTUP) -> dict[str, int]:
        """The next ``count`` commands to start: pod name -> pid of the command's shell."""
        found: dict[str, int] = {}
        async with asyncio.timeout(within):
            while len(found) < count:
                name, pid = (await self.reader.readline()).decode().split()
                assert name not in found, f"{name} ran twice"
                found[name] = int(pid)
        return found


def command(markers: Path, fifo: Path, gate: Path, code: int = 0) -> list[str]:
    """Record the run, then wait for ``gate`` (the test's signal to end) and exit with ``code``."""
    line = '"$HOSTNAME $$"'
    script = (
        f"echo {line} >> {markers}/$HOSTNAME; echo {line} > {fifo}; "
        f"while [ ! -e {gate} ]; do sleep 0.1; done; exit {code}"
    )
    return ["sh", "-c", script]


def finished(pod: Obj | None) -> bool:
    return phase(pod) in ("Succeeded", "Failed")


def terminated(pod: Obj | None) -> Obj:
    assert pod is not None
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return dict((statuses[0].get("state") or {}).get("terminated") or {})


def marker_lines(markers: Path, name: str) -> list[str]:
    return (markers / name).read_text().splitlines()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def ended(pid: int, within: float = 30.0) -> None:
    """Until process ``pid`` ends (its pidfd becomes readable)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    loop.add_reader(pidfd, done.set)
    try:
        async with asyncio.timeout(within):
            await done.wait()
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


@dataclass
class Watch:
    client: KubeClient
    pods: Informer
    jobs: Informer
    changes: Changes

    def pod(self, name: str) -> Obj | None:
        return self.pods.get(f"default/{name}")

    async def until(self, predicate: Callable[[], bool], within: float = 60.0) -> None:
        await self.changes.until(predicate, within)


@asynccontextmanager
async def watching(client: KubeClient) -> AsyncIterator[Watch]:
    factory = InformerFactory(client)
    pods, jobs = factory.informer(PODS), factory.informer(JOBS)
    watch = Watch(client, pods, jobs, Changes(pods, jobs))
    factory.start()
    try:
        await factory.wait_for_sync()
        yield watch
    finally:
        await factory.stop()


# --- `multiqueue local up` as a process group of its own -----------------------------------------------------------


async def start_local_up(config: Path, state: Path, stderr: Path) -> asyncio.subprocess.Process:
    with stderr.open("ab") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "multiqueue", "local", "up", "--config", str(config), "--state-dir", str(state),
            stdout=asyncio.subprocess.PIPE, stderr=err, start_new_session=True,
        )  # fmt: skip
    assert process.stdout is not None
    async with asyncio.timeout(STARTUP):
        while True:
            line = (await process.stdout.readline()).decode()
            if not line:
                raise AssertionError(f"local up exited early: {await asyncio.to_thread(stderr.read_text)}")
            if line.startswith("press Ctrl-C"):
                return process


async def sigkill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()


@asynccontextmanager
async def cluster_client(state: Path) -> AsyncIterator[KubeClient]:
    client = await KubeClient.connect(state / "kubeconfig", "management", "test")
    try:
        yield client
    finally:
        await client.close()


@dataclass
class Scene:
    tmp: Path
    state: Path
    config: Path
    markers: Path
    stderr: Path
    processes: list[asyncio.subprocess.Process]

    async def local_up(self) -> asyncio.subprocess.Process:
        process = await start_local_up(self.config, self.state, self.stderr)
        self.processes.append(process)
        return process


@pytest.fixture
async def scene(tmp_path: Path) -> AsyncIterator[Scene]:
    """What `local up` needs; at the end every `local up` and every pod process still running is killed."""
    config = tmp_path / "local.yaml"
    config.write_text(LOCAL_CONFIG)
    markers = tmp_path / "markers"
    markers.mkdir()
    state = tmp_path / "state"
    scene = Scene(tmp_path, state, config, markers, tmp_path / "local-up.stderr", [])
    try:
        yield scene
    finally:
        for process in scene.processes:
            if process.returncode is None:
                await sigkill_group(process)
        containers.kill_recorded(state / "management" / "logs")


# --- after SIGKILL and after Ctrl-C of `local up` -----------------------------------------------------------------


async def test_sigkill_of_local_up_runs_no_pod_twice_and_loses_no_exit_code(scene: Scene) -> None:
    gate, gate_while_down = scene.tmp / "gate", scene.tmp / "gate-while-down"
    running = ["run-0", "run-1", "run-2"]
    async with Fifo(scene.tmp / "fifo") as fifo:
        first = await scene.local_up()
        async with cluster_client(scene.state) as client, watching(client) as watch:
            for name in running:
                await client.create(PODS, pod_body(name, command(scene.markers, fifo.path, gate)), "default")
            for name, code in (("exits-3", 3), ("exits-0", 0)):
                argv = command(scene.markers, fifo.path, gate_while_down, code)
                await client.create(PODS, pod_body(name, argv), "default")
            job = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "batch"},
                "spec": {
                    "parallelism": 2,
                    "completions": 2,
                    "backoffLimit": 0,
                    "template": {"spec": pod_body("", command(scene.markers, fifo.path, gate))["spec"]},
                },
            }
            await client.create(JOBS, job, "default")
            pids = await fifo.started(7)
            await watch.until(lambda: all(phase(watch.pod(n)) == "Running" for n in pids), STARTUP)
        job_pods = sorted(n for n in pids if n.startswith("batch-"))
        assert len(job_pods) == 2

        await sigkill_group(first)
        assert all(alive(pid) for pid in pids.values()), "pod processes outlive the kubelet"
        gate_while_down.touch()
        await ended(pids["exits-3"])
        await ended(pids["exits-0"])

        await scene.local_up()
        async with cluster_client(scene.state) as client, watching(client) as watch:
            await watch.until(
                lambda: finished(watch.pod("exits-3")) and finished(watch.pod("exits-0")), STARTUP
            )
            assert (phase(watch.pod("exits-3")), phase(watch.pod("exits-0"))) == ("Failed", "Succeeded")
            assert terminated(watch.pod("exits-3"))["exitCode"] == 3
            assert terminated(watch.pod("exits-3"))["reason"] == "Error"
            assert terminated(watch.pod("exits-0"))["exitCode"] == 0
            adopted = [*running, *job_pods]
            assert all(phase(watch.pod(n)) == "Running" for n in adopted)
            assert all(alive(pids[n]) for n in adopted), "still the first processes"
            gate.touch()

            def job_finished() -> set[str]:
                batch = watch.jobs.get("default/batch") or {}
                conditions = (batch.get("status") or {}).get("conditions") or []
                return {c["type"] for c in conditions if c.get("status") == "True"} & {"Complete", "Failed"}

            await watch.until(lambda: all(finished(watch.pod(n)) for n in adopted) and bool(job_finished()))
            for name in adopted:
                assert phase(watch.pod(name)) == "Succeeded", name
                assert terminated(watch.pod(name))["exitCode"] == 0, name
            assert job_finished() == {"Complete"}
            batch = watch.jobs.get("default/batch")
            assert batch is not None and batch["status"]["succeeded"] == 2
            assert not batch["status"].get("failed")
            assert (
                sorted(
                    p["metadata"]["name"]
                    for p in watch.pods.objects("default")
                    if p["metadata"]["name"].startswith("batch-")
                )
                == job_pods
            ), "the Job controller saw no failure, so it made no new pod"
        for name in pids:
            assert len(marker_lines(scene.markers, name)) == 1, f"{name} ran more than once"
        assert scene.processes[-1].returncode is None
        scene.processes[-1].send_signal(signal.SIGINT)
        async with asyncio.timeout(30):
            assert await scene.processes[-1].wait() == 0


async def test_ctrl_c_leaves_pods_running_and_the_next_local_up_adopts_them(scene: Scene) -> None:
    gate = scene.tmp / "gate"
    async with Fifo(scene.tmp / "fifo") as fifo:
        first = await scene.local_up()
        async with cluster_client(scene.state) as client, watching(client) as watch:
            for name in ("a", "b"):
                await client.create(PODS, pod_body(name, command(scene.markers, fifo.path, gate)), "default")
            pids = await fifo.started(2)
            await watch.until(lambda: all(phase(watch.pod(n)) == "Running" for n in pids), STARTUP)
        first.send_signal(signal.SIGINT)
        async with asyncio.timeout(30):
            assert await first.wait() == 0
        assert all(alive(pid) for pid in pids.values()), "a clean stop leaves pods running"

        await scene.local_up()
        async with cluster_client(scene.state) as client, watching(client) as watch:
            gate.touch()
            await watch.until(lambda: all(finished(watch.pod(n)) for n in pids), STARTUP)
            for name in pids:
                assert phase(watch.pod(name)) == "Succeeded"
                assert terminated(watch.pod(name))["exitCode"] == 0
        for name in pids:
            assert len(marker_lines(scene.markers, name)) == 1, f"{name} ran more than once"


# --- the kubelet in-process, with faults injected between two of its lives ----------------------------------------


@asynccontextmanager
async def kubelet(
    apiserver: ApiServer, logs: Path, client: KubeClient | None = None
) -> AsyncIterator[LocalKubelet]:
    """A process kubelet for NODE (talking through ``client`` when given); leaving the block stops it as
    `local up` does (cancellation)."""
    client = client or await client_for(apiserver, "kubelet")
    factory = InformerFactory(client)
    running = LocalKubelet(client, factory, NODE, "process", logs)
    factory.start()
    task = asyncio.create_task(running.run())
    try:
        yield running
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await factory.stop()
        await client.close()


@pytest.fixture
async def api(apiserver: ApiServer, tmp_path: Path) -> AsyncIterator[Watch]:
    client = await client_for(apiserver)
    try:
        async with watching(client) as watch:
            yield watch
    finally:
        await client.close()
        containers.kill_recorded(tmp_path / "logs")


async def test_a_starting_record_with_no_process_runs_the_container_once_after_all(
    apiserver: ApiServer, api: Watch, tmp_path: Path
) -> None:
    logs, ran = tmp_path / "logs", tmp_path / "ran"
    pod = await api.client.create(
        PODS, pod_body("lost", ["sh", "-c", f"echo ran >> {ran}"], node=NODE), "default"
    )
    # The state a kubelet leaves when it dies between recording "starting" and starting the wrapper.
    records = containers.PodRecords(logs / "default" / "lost", pod["metadata"]["uid"])
    records.begin(NODE, "default", "lost", "2025-01-01T00:00:00Z")
    run_dir = records.container("main").start(1, "2025-01-01T00:00:01Z")

    async with kubelet(apiserver, logs):
        await api.until(lambda: finished(api.pod("lost")))
        assert phase(api.pod("lost")) == "Succeeded"
    assert terminated(api.pod("lost"))["exitCode"] == 0
    assert ran.read_text().splitlines() == ["ran"], "that attempt never ran; the next one ran once"

    # The wrapper that kubelet was starting, starting late, runs nothing: its attempt was taken.
    late = containers.spawn(run_dir, ["sh", "-c", f"echo ran >> {ran}"], tmp_path, {}, tmp_path / "late.log")
    async with asyncio.timeout(30):
        await late.wait()
    assert ran.read_text().splitlines() == ["ran"]


async def test_a_process_killed_while_the_kubelet_was_down_is_reported_lost(
    apiserver: ApiServer, api: Watch, tmp_path: Path
) -> None:
    logs, markers = tmp_path / "logs", tmp_path / "markers"
    markers.mkdir()
    async with Fifo(tmp_path / "fifo") as fifo:
        argv = command(markers, fifo.path, tmp_path / "never")
        await api.client.create(PODS, pod_body("killed", argv, node=NODE), "default")
        async with kubelet(apiserver, logs):
            pid = (await fifo.started(1))["killed"]
            await api.until(lambda: phase(api.pod("killed")) == "Running")
        assert alive(pid)
        os.killpg(os.getpgid(pid), signal.SIGKILL)  # the whole container, wrapper included: no exit code
        await ended(pid)
        async with kubelet(apiserver, logs):
            await api.until(lambda: finished(api.pod("killed")))
            assert phase(api.pod("killed")) == "Failed"
    state = terminated(api.pod("killed"))
    assert (state["exitCode"], state["reason"]) == (137, "ContainerStatusUnknown")
    assert len(marker_lines(markers, "killed")) == 1


async def test_deleting_pods_kills_what_the_restarted_kubelet_adopted_or_found(
    apiserver: ApiServer, api: Watch, tmp_path: Path
) -> None:
    logs, markers = tmp_path / "logs", tmp_path / "markers"
    markers.mkdir()
    gate, never = tmp_path / "gate", tmp_path / "never"
    async with Fifo(tmp_path / "fifo") as fifo:
        for name in ("adopted", "deleted-while-down", "force-deleted-while-down"):
            argv = command(markers, fifo.path, never)
            await api.client.create(PODS, pod_body(name, argv, node=NODE), "default")
        await api.client.create(
            PODS, pod_body("proof", command(markers, fifo.path, gate), node=NODE), "default"
        )
        async with kubelet(apiserver, logs):
            pids = await fifo.started(4)
            await api.until(lambda: all(phase(api.pod(n)) == "Running" for n in pids))
        assert all(alive(pid) for pid in pids.values())
        await api.client.delete(PODS, "deleted-while-down", "default")
        await api.client.delete(PODS, "force-deleted-while-down", "default", grace_period_seconds=0)
        await api.until(lambda: api.pod("force-deleted-while-down") is None)
        assert alive(pids["deleted-while-down"]) and alive(pids["force-deleted-while-down"])

        async with kubelet(apiserver, logs):
            # The new kubelet watches what it adopted: "proof" ends and is reported.
            gate.touch()
            await api.until(lambda: finished(api.pod("proof")))
            assert phase(api.pod("proof")) == "Succeeded"
            await ended(pids["force-deleted-while-down"])  # its pod is gone: stopped at start
            await api.until(lambda: api.pod("deleted-while-down") is None)
            await ended(pids["deleted-while-down"], within=5)
            await api.client.delete(PODS, "adopted", "default")
            await api.until(lambda: api.pod("adopted") is None)
            await ended(pids["adopted"], within=5)
    for name in pids:
        assert len(marker_lines(markers, name)) == 1


async def test_on_failure_restarts_continue_the_recorded_restart_count(
    apiserver: ApiServer, api: Watch, tmp_path: Path
) -> None:
    logs, ran = tmp_path / "logs", tmp_path / "ran"
    argv = ["sh", "-c", f"echo $$ >> {ran}"]
    pod = await api.client.create(PODS, pod_body("retry", argv, node=NODE, policy="OnFailure"), "default")
    # Two attempts failed (exit 1) an hour ago, before the kubelet went down: the back-off has passed.
    records = containers.PodRecords(logs / "default" / "retry", pod["metadata"]["uid"])
    records.begin(NODE, "default", "retry", "2025-01-01T00:00:00Z")
    record = records.container("main")
    for attempt in (1, 2):
        exit_file = record.start(attempt, "2025-01-01T00:00:00Z") / "exit"
        exit_file.write_text("1\n")
        hour_ago = exit_file.stat().st_mtime - 3600
        os.utime(exit_file, (hour_ago, hour_ago))

    async with kubelet(apiserver, logs):
        await api.until(lambda: finished(api.pod("retry")))
        assert phase(api.pod("retry")) == "Succeeded"
    status = (api.pod("retry") or {})["status"]["containerStatuses"][0]
    assert status["restartCount"] == 2
    assert status["state"]["terminated"]["exitCode"] == 0
    assert len(ran.read_text().splitlines()) == 1


async def test_stop_all_pods_stops_what_a_stopped_kubelet_left_running(
    apiserver: ApiServer, api: Watch, tmp_path: Path
) -> None:
    logs, markers = tmp_path / "logs", tmp_path / "markers"
    markers.mkdir()
    async with Fifo(tmp_path / "fifo") as fifo:
        for name in ("x", "y"):
            argv = command(markers, fifo.path, tmp_path / "never")
            await api.client.create(PODS, pod_body(name, argv, node=NODE), "default")
        async with kubelet(apiserver, logs) as stopped:
            pids = await fifo.started(2)
            await api.until(lambda: all(phase(api.pod(n)) == "Running" for n in pids))
        assert all(alive(pid) for pid in pids.values())
        await stopped.stop_all_pods(grace=5)
        for pid in pids.values():
            await ended(pid, within=1)


async def _proxy(listen: int, target: int) -> tuple[asyncio.subprocess.Process, int]:
    """The TCP proxy of tests/support in front of the API server; its process and the port it listens on."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.tcpproxy", str(listen), "127.0.0.1", str(target),
        stdout=asyncio.subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    assert process.stdout is not None
    async with asyncio.timeout(30):
        port = int((await process.stdout.readline()).decode().strip())
    return process, port


async def test_a_container_that_ends_while_the_api_server_is_out_of_reach_is_reported_once_it_is_back(
    apiserver: ApiServer, api: Watch, tmp_path: Path
) -> None:
    """The kubelet's status write fails (its connection to the API server is gone when the container ends): the
    pod is synced again, and once the server is reachable its end is reported, with the real exit code."""
    from multiqueue.kube.client import ClientOptions
    from multiqueue.kube.config import load_credentials
    from tests.support.servers import kubeconfig_dict

    logs, markers, gate = tmp_path / "logs", tmp_path / "markers", tmp_path / "gate"
    markers.mkdir()
    given_up = asyncio.Event()
    loop = asyncio.get_running_loop()

    class Noticed(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "default/cut" in record.getMessage() and "syncing it again" in record.getMessage():
                loop.call_soon_threadsafe(given_up.set)

    noticed = Noticed()
    logging.getLogger("multiqueue.local.kubelet").addHandler(noticed)
    proxy, port = await _proxy(0, apiserver.port)
    try:
        config = kubeconfig_dict(apiserver, "kubelet")
        for entry in config["clusters"]:
            entry["cluster"]["server"] = f"{entry['cluster']['server'].rsplit(':', 1)[0]}:{port}"
        # One attempt per request: the write fails at once while the proxy is down, rather than after retries.
        client = KubeClient(
            await load_credentials(config_dict=config), "kubelet", ClientOptions(max_attempts=1)
        )
        async with kubelet(apiserver, logs, client), Fifo(tmp_path / "fifo") as fifo:
            await api.client.create(
                PODS, pod_body("cut", command(markers, fifo.path, gate), node=NODE), "default"
            )
            pid = (await fifo.started(1))["cut"]
            await api.until(lambda: phase(api.pod("cut")) == "Running")
            proxy.kill()  # the kubelet's connections drop, and new ones are refused
            await proxy.wait()
            gate.touch()
            await ended(pid)
            async with asyncio.timeout(30):
                await given_up.wait()  # its status write failed: the pod is to be synced again
            proxy, _ = await _proxy(port, apiserver.port)
            await api.until(lambda: finished(api.pod("cut")))
    finally:
        logging.getLogger("multiqueue.local.kubelet").removeHandler(noticed)
        if proxy.returncode is None:
            proxy.kill()
            await proxy.wait()
    assert phase(api.pod("cut")) == "Succeeded"
    assert terminated(api.pod("cut"))["exitCode"] == 0
    assert len(marker_lines(markers, "cut")) == 1
