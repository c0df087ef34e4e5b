"""`multiqueue local up --control-plane upstream`: each cluster served by real etcd, kube-apiserver,
kube-controller-manager and kube-scheduler (multiqueue/local/upstream.py), our kubelet as its node.

The tests that run the binaries skip, saying why and how to build them, where `bash hack/build-control-plane.sh`
has not built them (or KUBEBUILDER_ASSETS does not name a folder that has them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import stat
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from multiqueue.api.meta import as_dict, metadata
from multiqueue.api.types import JOBS, NODES, PODS, Obj
from multiqueue.kube.client import KubeClient
from multiqueue.kube.config import load_credentials
from multiqueue.kube.informer import Informer, InformerFactory
from multiqueue.local.upstream import (
    BINARIES,
    BUILD_COMMAND,
    KUBERNETES_VERSION,
    Binaries,
    MissingBinaries,
    cache_dir,
)
from tests.support.processes import REPO, Spawned, kill_processes_under, pids_under
from tests.support.waiting import Changes

KUBECTL = shutil.which("kubectl")
READY = r"^press Ctrl-C to stop"
# Two or three kube-apiservers starting at once on a 2-core machine (perhaps beside a Go build) take their time.
START_TIMEOUT = 300.0
STOP_TIMEOUT = 120.0
NODE = "worker-1-node"


def binaries_or_skip() -> Binaries:
    try:
        return Binaries.find()
    except MissingBinaries as exc:
        reason = f"upstream control plane binaries not available ({exc})"
        print(reason)
        pytest.skip(reason)


def etcd_or_skip() -> Path:
    """The built etcd alone (the start-failure tests fake the rest)."""
    etcd = Path(os.environ["KUBEBUILDER_ASSETS"]) / "etcd" if os.environ.get("KUBEBUILDER_ASSETS") else None
    etcd = etcd if etcd is not None and etcd.exists() else cache_dir() / "etcd"
    if not etcd.exists():
        reason = f"no etcd in {cache_dir()}: build it with `{BUILD_COMMAND}`"
        print(reason)
        pytest.skip(reason)
    return etcd


def local_up(workdir: Path, config: dict[str, Any], *extra: str) -> Spawned:
    config_path = workdir / "local.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    argv = [
        "-m",
        "multiqueue",
        "local",
        "up",
        "--config",
        str(config_path),
        "--state-dir",
        str(workdir / "state"),
    ]
    return Spawned.python(
        "local up", [*argv, "--control-plane", "upstream", *extra], workdir / "local-up.log"
    )


@asynccontextmanager
async def cleaned_up(process: Spawned, state: Path) -> AsyncIterator[Spawned]:
    """Whatever the test does, nothing it started outlives it."""
    try:
        yield process
    finally:
        await process.kill_group()
        kill_processes_under(state)


# --- processes and sockets, from /proc ------------------------------------------------------------------------------


def descendants(root: int) -> dict[int, str]:
    """The live processes under ``root``: pid -> the name of what it runs."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = _program(pid)
                frontier.append(pid)
    return found


def alive(pids: dict[int, str]) -> dict[int, str]:
    """Those of ``pids`` that still run (a zombie does not)."""
    running = {}
    for pid, name in pids.items():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z":
            running[pid] = name
    return running


async def ended(pids: dict[int, str], within: float) -> None:
    """Wait until every one of ``pids`` has ended (a pidfd turns readable when its process ends)."""
    loop = asyncio.get_running_loop()
    waits: list[asyncio.Future[None]] = []
    descriptors = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        descriptors.append(fd)
        done: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, lambda f=done: f.done() or f.set_result(None))
        waits.append(done)
    try:
        async with asyncio.timeout(within):
            await asyncio.gather(*waits)
    finally:
        for fd in descriptors:
            loop.remove_reader(fd)
            os.close(fd)
    assert alive(pids) == {}


def _program(pid: int) -> str:
    try:
        return Path(os.readlink(f"/proc/{pid}/exe")).name
    except OSError:
        return "?"


def rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        total += int(found.group(1)) if found else 0
    return total


def listening(pids: list[int]) -> dict[int, list[str]]:
    """Each process's listening TCP sockets, as "address:port"."""
    sockets: dict[str, str] = {}
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                sockets[fields[9]] = _address(fields[1])
    found: dict[int, list[str]] = {}
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        inodes = [link[8:-1] for link in links if link.startswith("socket:[")]
        found[pid] = [sockets[i] for i in inodes if i in sockets]
    return found


def _address(hex_address: str) -> str:
    host, port = hex_address.split(":")
    text = ".".join(str(b) for b in reversed(bytes.fromhex(host))) if len(host) == 8 else "ipv6:" + host
    return f"{text}:{int(port, 16)}"


# --- kubectl and clients --------------------------------------------------------------------------------------------


async def kubectl(kubeconfig: Path, *args: str) -> str:
    assert KUBECTL is not None
    process = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def connect(kubeconfig: Path, context: str) -> KubeClient:
    return KubeClient(await load_credentials(kubeconfig, context), context)


@contextlib.asynccontextmanager
async def pods_of_worker_1(kubeconfig: Path) -> AsyncIterator[tuple[KubeClient, Informer, Changes]]:
    """A client of worker-1, a synced informer of its pods in ``default`` and the changes it sees."""
    client = await connect(kubeconfig, "worker-1")
    factory = InformerFactory(client)
    pods = factory.informer(PODS, "default")
    changes = Changes(pods)
    factory.start()
    try:
        await pods.wait_for_sync()
        yield client, pods, changes
    finally:
        await factory.stop()
        await client.close()


PLAIN_JOB: Obj = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "plain", "namespace": "default"},
    "spec": {
        "completions": 2,
        "parallelism": 2,
        "template": {
            "metadata": {"annotations": {"multiqueue.dev/simulate-duration": "1"}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
            },
        },
    },
}


def owned_by(pod: Obj, uid: str) -> bool:
    return any(
        ref.get("uid") == uid and ref.get("controller") for ref in metadata(pod).get("ownerReferences") or []
    )


def node_ready(node: Obj) -> bool:
    conditions = as_dict(node.get("status")).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


# --- tests ----------------------------------------------------------------------------------------------------------


def test_the_version_looked_for_is_the_one_hack_pins() -> None:
    go_mod = REPO / "hack" / "control-plane" / "go.mod"
    if not go_mod.exists():
        pytest.skip(f"{go_mod} is not in this tree")
    pinned = re.search(r"^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v\S+)", go_mod.read_text(), re.MULTILINE)
    assert pinned is not None, f"no k8s.io/kubernetes requirement in {go_mod}"
    assert pinned.group(1) == KUBERNETES_VERSION


@pytest.mark.parametrize("command", ["up", "demo"])
async def test_missing_binaries_are_one_line_naming_them_and_the_build_command_exit_2(
    tmp_path: Path, command: str
) -> None:
    assets = tmp_path / "assets"
    assets.mkdir()
    (assets / "etcd").write_text("#!/bin/sh\n")
    (assets / "etcd").chmod(0o755)
    (assets / "kube-scheduler").write_text("not executable")
    state = tmp_path / "state"
    environ = {k: v for k, v in os.environ.items() if k != "KUBEBUILDER_ASSETS"}
    cache = tmp_path / "cache" / KUBERNETES_VERSION
    some = ["kube-apiserver", "kube-controller-manager", "kube-scheduler"]
    cases = [
        (["--control-plane", "upstream", "--assets", str(assets)], assets, some),
        (["--control-plane", "upstream"], cache, list(BINARIES)),
    ]
    if command == "up":  # the config's default, no flag
        config = tmp_path / "local.yaml"
        config.write_text("controlPlane: upstream\nclusters:\n  - name: management\n")
        cases.append((["--config", str(config)], cache, list(BINARIES)))
    for extra, named, expected in cases:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "multiqueue", "local", command, "--state-dir", str(state), *extra,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO,
            env={**environ, "MULTIQUEUE_CONTROL_PLANE_CACHE": str(tmp_path / "cache")},
        )  # fmt: skip
        out, err = await process.communicate()
        assert process.returncode == 2, (extra, out, err)
        lines = err.decode().strip().splitlines()
        assert len(lines) == 1, lines
        missing = re.search(r"error: (.*) missing in (\S+?)[;\s]", lines[0])
        assert missing is not None, lines[0]
        assert missing.group(1).split(": ")[-1].split(", ") == expected
        assert missing.group(2) == str(named)
        assert f"`{BUILD_COMMAND}`" in lines[0]
        assert not state.exists(), "nothing is made before the binaries are found"


async def test_assets_without_the_upstream_control_plane_is_a_usage_error(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "multiqueue", "local", "up", "--assets", str(tmp_path), "--state-dir", str(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    _, err = await process.communicate()
    assert process.returncode == 2
    assert err.decode().strip().splitlines() == [
        "multiqueue: error: --assets names the upstream binaries: use it with --control-plane upstream"
    ]


def fake_assets(folder: Path, etcd: Path, apiserver_script: str) -> Path:
    """The real etcd and a kube-apiserver that is a shell script; the others are never reached."""
    folder.mkdir()
    (folder / "etcd").symlink_to(etcd)
    for name, script in (
        ("kube-apiserver", apiserver_script),
        ("kube-controller-manager", "exit 99"),
        ("kube-scheduler", "exit 99"),
    ):
        (folder / name).write_text(f"#!/bin/sh\n{script}\n")
        (folder / name).chmod(0o755)
    return folder


def local_up_on_fakes(tmp_path: Path, apiserver_script: str) -> tuple[Spawned, Path]:
    """``local up`` (not started) of one cluster on the built etcd and fake other binaries; its state folder."""
    assets = fake_assets(tmp_path / "assets", etcd_or_skip(), apiserver_script)
    config = {"clusters": [{"name": "management", "kubelet": "none"}]}
    return local_up(tmp_path, config, "--assets", str(assets)), tmp_path / "state"


async def test_a_process_that_dies_while_starting_fails_the_start_with_its_log_and_stops_the_rest(
    tmp_path: Path,
) -> None:
    process, state = local_up_on_fakes(tmp_path, 'echo "fake kube-apiserver: cannot start" >&2; exit 3')
    async with cleaned_up(process, state):
        await process.start()
        assert process.process is not None
        async with asyncio.timeout(60):
            code = await process.process.wait()
        await process.kill_group()  # drains its output
        output = "\n".join(process.lines)
        assert code == 1, output
        assert "kube-apiserver of management exited with code 3" in output
        assert "fake kube-apiserver: cannot start" in output
        etcd_log = (state / "management" / "control-plane" / "logs" / "etcd.log").read_text()
        assert "serving client traffic" in etcd_log or "ready to serve client requests" in etcd_log, etcd_log[
            -2000:
        ]
        assert pids_under(state) == [], "etcd was stopped with the rest"


async def test_ctrl_c_while_starting_stops_what_was_started(tmp_path: Path) -> None:
    process, state = local_up_on_fakes(tmp_path, "exec sleep 600")
    async with cleaned_up(process, state):
        await process.start()
        await process.wait_for_line(r"^management: waiting for kube-apiserver \(\d+s\): /readyz", within=90)
        started = descendants(process.pid)
        assert sorted(started.values()) == ["etcd", "sleep"], started
        process.signal(signal.SIGINT)
        assert process.process is not None
        async with asyncio.timeout(STOP_TIMEOUT):
            code = await process.process.wait()
        assert code == 130
        await process.wait_for_line(r"^interrupted while starting", within=10)
        assert alive(started) == {}
        assert pids_under(state) == []


@pytest.mark.timeout(1200)
async def test_local_up_serves_upstream_clusters_kube_controller_manager_runs_jobs_ctrl_c_leaves_nothing(
    tmp_path: Path,
) -> None:
    binaries = binaries_or_skip()
    if KUBECTL is None:
        pytest.skip("kubectl is not on PATH")
    state = tmp_path / "state"
    kubeconfig = state / "kubeconfig"
    config = {
        "clusters": [
            {"name": "management", "kubelet": "simulate"},
            {"name": "worker-1", "kubelet": "simulate"},
        ],
        "manager": {"management": "management", "workers": ["worker-1"]},
    }
    process = local_up(tmp_path, config)
    async with cleaned_up(process, state):
        began = time.monotonic()
        await process.start()
        await process.wait_for_line(READY, within=START_TIMEOUT)
        print(f"2 upstream clusters ready in {time.monotonic() - began:.1f}s")

        # One etcd, kube-apiserver, kube-controller-manager and kube-scheduler per cluster, all children of local
        # up, the binaries of the assets folder, every socket on loopback.
        children = descendants(process.pid)
        assert sorted(children.values()) == sorted(BINARIES * 2), children
        for pid in children:
            assert os.readlink(f"/proc/{pid}/exe").startswith(str(binaries.folder.resolve())), pid
        tree = [process.pid, *children]
        print(f"RSS of local up and its control planes: {rss_kib(tree) / 1024:.0f} MiB")
        sockets = listening(tree)
        assert sum(len(s) for s in sockets.values()) >= 2 * 5, sockets
        assert all(s.startswith("127.0.0.1:") for found in sockets.values() for s in found), sockets

        # The same kubeconfig as the embedded clusters: one context per cluster.
        written = yaml.safe_load(kubeconfig.read_text())
        assert [c["name"] for c in written["contexts"]] == ["management", "worker-1"]
        servers = {c["name"]: c["cluster"]["server"] for c in written["clusters"]}
        version = json.loads(await kubectl(kubeconfig, "--context", "worker-1", "get", "--raw", "/version"))
        assert version["gitVersion"] == KUBERNETES_VERSION

        # State under the state dir: owner-only.
        for cluster in ("management", "worker-1"):
            for path in [state / cluster, *(state / cluster / "control-plane").rglob("*")]:
                mode = stat.S_IMODE(path.stat().st_mode)
                assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))

        # A Job without managedBy on the worker: kube-controller-manager's Job controller makes its pods.
        async with pods_of_worker_1(kubeconfig) as (client, pods, changes):
            job = await client.create(JOBS, PLAIN_JOB, "default")
            uid = str(metadata(job)["uid"])

            def made() -> list[Obj]:
                return [p for p in pods.objects() if owned_by(p, uid)]

            await changes.until(lambda: len(made()) == 2, within=120)
            for pod in made():
                managers = {entry.get("manager") for entry in metadata(pod).get("managedFields") or []}
                assert "kube-controller-manager" in managers, managers
            # Our kubelet is the cluster's node: Ready, kube-scheduler binds the pods to it, and it runs them.
            node = await client.get(NODES, NODE)
            assert node_ready(node), node.get("status")
            await changes.until(
                lambda: all(as_dict(p.get("spec")).get("nodeName") == NODE for p in made()), 120
            )
            await changes.until(
                lambda: all(as_dict(p.get("status")).get("phase") == "Succeeded" for p in made()), 120
            )

        # Ctrl-C: every process stops, local up exits 0.
        process.signal(signal.SIGINT)
        assert process.process is not None
        async with asyncio.timeout(STOP_TIMEOUT):
            assert await process.process.wait() == 0
        assert alive(children) == {}
        assert pids_under(state) == []

        # Started again on the same state dir: the same objects (etcd's data), on the same addresses.
        await process.start()
        await process.wait_for_line(READY, within=START_TIMEOUT)
        written = yaml.safe_load(kubeconfig.read_text())
        assert {c["name"]: c["cluster"]["server"] for c in written["clusters"]} == servers
        kept = json.loads(
            await kubectl(kubeconfig, "--context", "worker-1", "get", "job", "plain", "-o", "json")
        )
        assert kept["metadata"]["uid"] == uid

        # A process that dies is reported with the last lines of its log.
        children = descendants(process.pid)
        scheduler = next(
            pid
            for pid, name in children.items()
            if name == "kube-scheduler"
            and os.readlink(f"/proc/{pid}/cwd").startswith(str((state / "worker-1").resolve()))
        )
        os.kill(scheduler, signal.SIGKILL)
        await process.wait_for_line(
            r"^kube-scheduler of worker-1 was killed by SIGKILL; the last lines of", 30
        )

        # local up killed outright (nothing of it runs): the kernel ends its control planes (PR_SET_PDEATHSIG),
        # and the next start finds etcd's data intact.
        children = descendants(process.pid)
        assert sorted(children.values()) == sorted([*BINARIES, *BINARIES[:-1]]), (
            children
        )  # the scheduler above
        os.kill(process.pid, signal.SIGKILL)
        async with asyncio.timeout(30):
            await process.process.wait()
        await ended(children, within=30)
        assert pids_under(state) == []
        await process.start()
        await process.wait_for_line(READY, within=START_TIMEOUT)
        kept = json.loads(
            await kubectl(kubeconfig, "--context", "worker-1", "get", "job", "plain", "-o", "json")
        )
        assert kept["metadata"]["uid"] == uid

        children = descendants(process.pid)
        process.signal(signal.SIGINT)
        assert process.process is not None
        async with asyncio.timeout(STOP_TIMEOUT):
            assert await process.process.wait() == 0
        assert sorted(children.values()) == sorted(BINARIES * 2), children
        assert alive(children) == {}
        assert pids_under(state) == []


async def test_a_stopped_upstream_cluster_serves_the_same_objects_on_the_same_address_again(
    tmp_path: Path,
) -> None:
    """``LocalClusters.stop_server``/``start_server`` (the e2e suite's unreachable cluster) on an upstream cluster:
    kube-apiserver alone goes down and comes back; etcd, and with it every object, stays."""
    from multiqueue.api.types import CONFIGMAPS
    from multiqueue.kube.client import ClientOptions
    from multiqueue.local.config import LocalCluster, LocalConfig
    from multiqueue.local.up import LocalClusters

    binaries_or_skip()
    said: list[str] = []
    config = LocalConfig(clusters=[LocalCluster(name="solo", kubelet="none")], control_plane="upstream")
    clusters = LocalClusters(config, tmp_path / "state", say=said.append)
    await clusters.start()
    try:
        assert [line.split(":")[0] for line in said] == ["solo"]
        # kube-scheduler binds pods there: the kubelet only runs what is bound to its node.
        assert clusters.components["solo"].setup.bind_pods is False
        plane = clusters.control_planes["solo"]
        first = plane.processes["kube-apiserver"].process
        assert first is not None
        credentials = await load_credentials(clusters.kubeconfig_path, "solo")
        client = KubeClient(credentials, "solo", ClientOptions(max_attempts=1, request_timeout=5.0))
        try:
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept"}, "data": {"a": "b"}}
            created = await client.create(CONFIGMAPS, body, "default")
            await clusters.stop_server("solo")
            assert first.returncode is not None
            assert plane.processes["etcd"].running
            with pytest.raises(Exception):  # noqa: B017 - refused connection, whatever the client calls it
                await client.get(CONFIGMAPS, "kept", "default")
            await clusters.start_server("solo")
            assert plane.url == clusters.urls()["solo"]
            again = await client.get(CONFIGMAPS, "kept", "default")
            assert metadata(again)["uid"] == metadata(created)["uid"]
            assert not any("killed" in line or "exited" in line for line in said), said
        finally:
            await client.close()
    finally:
        await clusters.stop()
    assert pids_under(tmp_path / "state") == []


def test_the_build_script_run_again_builds_nothing_and_names_the_folder() -> None:
    """`bash hack/build-control-plane.sh` on a built cache: no Go at work, the folder (KUBEBUILDER_ASSETS) printed."""
    if not all((cache_dir() / name).exists() for name in BINARIES):
        reason = f"the build cache {cache_dir()} is not complete: build it with `{BUILD_COMMAND}`"
        print(reason)
        pytest.skip(reason)
    import subprocess

    result = subprocess.run(
        ["bash", str(REPO / "hack" / "build-control-plane.sh")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip().splitlines()[-1]) == cache_dir()
    assert "up to date" in result.stderr, result.stderr


async def test_kubectl_shows_the_node_ready_and_the_logs_of_a_worker_pod(tmp_path: Path) -> None:
    """Through the real kube-apiserver: `kubectl get nodes` lists our kubelet's node Ready, and `kubectl logs`
    reaches the kubelet API for a pod's output."""
    binaries_or_skip()
    if KUBECTL is None:
        pytest.skip("kubectl is not on PATH")
    state = tmp_path / "state"
    kubeconfig = state / "kubeconfig"
    process = local_up(tmp_path, {"clusters": [{"name": "worker-1"}]})
    async with cleaned_up(process, state):
        await process.start()
        await process.wait_for_line(READY, within=START_TIMEOUT)
        nodes = await kubectl(kubeconfig, "--context", "worker-1", "get", "nodes", "--no-headers")
        assert re.search(rf"^{NODE}\s+Ready\s", nodes, re.MULTILINE), nodes
        async with pods_of_worker_1(kubeconfig) as (client, pods, changes):
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "talker"},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["sh", "-c", "echo hello from upstream"],
                        }
                    ],
                },
            }
            await client.create(PODS, body, "default")
            await changes.until(
                lambda: as_dict((pods.get("default/talker") or {}).get("status")).get("phase") == "Succeeded",
                120,
            )
        logs = await kubectl(kubeconfig, "--context", "worker-1", "logs", "talker")
        assert logs.strip() == "hello from upstream"
