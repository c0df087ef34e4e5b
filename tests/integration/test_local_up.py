"""`multiqueue local up`: serves every configured cluster, writes one kubeconfig, stops cleanly, restarts intact."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import yaml

from multiqueue.api.types import PODS
from multiqueue.kube.client import KubeClient
from multiqueue.kube.config import load_credentials

KUBECTL = shutil.which("kubectl")


@dataclass
class Running:
    process: asyncio.subprocess.Process
    printed: list[str]  # what it printed up to "press Ctrl-C"


@asynccontextmanager
async def local_up(state_dir: Path, *extra: str) -> AsyncIterator[Running]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "multiqueue",
        "local",
        "up",
        "--state-dir",
        str(state_dir),
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    running = Running(process, [])
    try:
        assert process.stdout is not None
        async with asyncio.timeout(60):
            while True:
                line = (await process.stdout.readline()).decode()
                if not line:
                    stderr = await process.stderr.read() if process.stderr else b""
                    raise AssertionError(f"local up exited early: {stderr.decode()}")
                running.printed.append(line)
                if line.startswith("press Ctrl-C"):
                    break
        yield running
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            async with asyncio.timeout(30):
                await process.wait()


async def kubectl(kubeconfig: Path, *args: str) -> str:
    if KUBECTL is None:
        pytest.skip("kubectl is not on PATH")
    process = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_local_up_serves_every_cluster_and_restarts_with_the_same_objects(tmp_path: Path) -> None:
    state = tmp_path / "mq"
    kubeconfig = state / "kubeconfig"
    async with local_up(state) as running:
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["current-context"] == "management"
        assert [c["name"] for c in config["contexts"]] == ["management", "worker-1", "worker-2"]
        assert (kubeconfig.stat().st_mode & 0o777) == 0o600
        namespaces = await kubectl(kubeconfig, "--context", "worker-1", "get", "ns", "-o", "name")
        assert "namespace/default" in namespaces.split()
        manifest = state.parent / "kept.yaml"
        manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kept}\ndata: {a: b}\n")
        await kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert running.process.returncode == 0
    async with local_up(state):
        kept = json.loads(await kubectl(kubeconfig, "get", "configmap", "kept", "-o", "json"))
        assert kept["data"] == {"a": "b"}


async def test_bad_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("clusters:\n  - name: Bad_Name\n")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "multiqueue", "local", "up", "--config", str(config), "--state-dir", str(tmp_path / "s"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await process.communicate()
    assert process.returncode == 2
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1
    assert "clusters.0.name" in lines[0]


async def test_a_port_in_use_is_one_line_naming_it_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "local.yaml"
        config.write_text(f"clusters:\n  - name: management\n    port: {port}\n")
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "multiqueue", "local", "up", "--config", str(config), "--state-dir", str(tmp_path / "s"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(60):
            _, err = await process.communicate()
    assert process.returncode == 2
    (line,) = err.decode().strip().splitlines()
    assert str(port) in line and "a port of the config is taken" in line and "choose another port" in line, (
        line
    )


async def test_the_managers_metrics_show_every_documented_family(tmp_path: Path) -> None:
    from multiqueue.telemetry import METRICS

    async with local_up(tmp_path / "state") as running:
        url = next(line.split()[1] for line in running.printed if line.strip().startswith("curl "))
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            assert response.status == 200
            assert response.content_type == "text/plain"
            text = await response.text()
    lines = text.splitlines()
    for name, family in METRICS.items():
        assert f"# TYPE {name} {family.kind}" in lines, name
    assert any(line.startswith('multiqueue_cluster_active{cluster="worker-1",reason="') for line in lines)
    assert 'multiqueue_managed_jobs{state="active"} 0.0' in lines


async def test_everything_under_the_state_dir_is_its_owners_alone_whatever_the_umask(tmp_path: Path) -> None:
    """Folders 0700 and files 0600 after a start with umask 000, a pod run (its log written) and a stop; a state
    directory and a kubeconfig an older version left open are put right."""
    state = tmp_path / "mq"
    state.mkdir(mode=0o755)
    (state / "kubeconfig").write_text("stale\n")
    (state / "kubeconfig").chmod(0o644)
    config = tmp_path / "local.yaml"
    config.write_text(yaml.safe_dump({"clusters": [{"name": "management"}]}))
    previous = os.umask(0)
    try:
        async with local_up(state, "--config", str(config)):
            os.umask(previous)
            client = KubeClient(await load_credentials(state / "kubeconfig", "management"), "management")
            try:
                pod = {
                    "metadata": {"name": "logged"},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "i", "command": ["sh", "-c", "echo hello"]}],
                    },
                }
                await client.create(PODS, pod, "default")
                async with asyncio.timeout(30):  # polling the pod's phase: no informer here
                    while True:
                        status = (await client.get(PODS, "logged", "default")).get("status", {})
                        if status.get("phase") == "Succeeded":
                            break
                        await asyncio.sleep(0.1)
            finally:
                await client.close()
    finally:
        os.umask(previous)
    # The database and its journal are journal.py's to make owner-only.
    seen = [p for p in [state, *state.rglob("*")] if not p.name.startswith("objects.db")]
    modes = {str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777) for p in seen if not p.is_fifo()}
    wrong = {
        path: mode
        for path, mode in modes.items()
        if mode != oct(0o700 if (tmp_path / path).is_dir() else 0o600)
    }
    logs = [p for p in seen if p.name.endswith(".log")]
    print(f"\n{len(modes)} paths under the state dir checked, {len(logs)} logs among them")
    assert logs and not wrong, wrong
