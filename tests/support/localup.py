"""``multiqueue local up`` and ``multiqueue manager`` as real processes a test can crash and start again.

The test reaches the clusters the way a person would: through the kubeconfig ``local up`` writes into its state
directory, read again at every connection (a restart may move a cluster to another port).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import yaml

from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.kube.config import load_credentials
from tests.support.processes import Spawned, kill_processes_under

# What ``local up`` and ``manager`` print once they serve (cli.py).
LOCAL_UP_READY = r"press Ctrl-C to stop"
MANAGER_READY = r"^manager \S+: dispatching .* metrics on (?P<url>http://\S+)/metrics"
START_TIMEOUT = 90.0
# The test's own requests fail at once instead of retrying for a minute: it knows when it crashed a server and
# waits for the restart itself.
TEST_CLIENT_OPTIONS = ClientOptions(max_attempts=1, request_timeout=15.0)


def clusters_config(
    *names: str, manager_workers: list[str] | None = None, control_plane: str = "embedded", **manager: Any
) -> dict[str, Any]:
    """A ``local up`` config: these clusters (process kubelets) served by ``control_plane``, and a manager when
    ``manager_workers`` is given."""
    config: dict[str, Any] = {
        "clusters": [{"name": n, "kubelet": "process"} for n in names],
        "controlPlane": control_plane,
    }
    if manager_workers is not None:
        config["manager"] = {"management": "management", "workers": manager_workers, **manager}
    return config


@contextlib.asynccontextmanager
async def one_cluster(workdir: Path) -> AsyncIterator[tuple[LocalUp, KubeClient]]:
    """``local up`` serving one embedded cluster, ``one``, with no kubelet (the server alone is under test), and a
    client of it; both gone afterwards."""
    up = LocalUp(workdir, {"clusters": [{"name": "one", "kubelet": "none"}], "controlPlane": "embedded"})
    await up.start()
    try:
        client = await up.connect("one")
        try:
            yield up, client
        finally:
            await client.close()
    finally:
        await up.close()


class LocalUp:
    """One ``multiqueue local up --config ... --state-dir ...`` process, started again on the same state dir."""

    def __init__(self, workdir: Path, config: dict[str, Any]) -> None:
        self.workdir = workdir
        self.state_dir = workdir / "state"
        self.config_path = workdir / "local.yaml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.process = Spawned.python(
            "local up",
            ["-m", "multiqueue", "local", "up", "--config", str(self.config_path), "--state-dir", str(self.state_dir)],
            workdir / "local-up.log",
        )  # fmt: skip
        self.ready = asyncio.Event()
        self.starts = 0

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    async def start(self) -> float:
        """Start it and wait until it says it serves; how long that took."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        await self.process.start()
        await self.process.wait_for_line(LOCAL_UP_READY, within=START_TIMEOUT)
        self.starts += 1
        self.ready.set()
        return loop.time() - began

    async def crash(self) -> None:
        """SIGKILL its whole process group, as a node losing the process would. Pods it started live on."""
        self.ready.clear()
        await self.process.kill_group()

    async def wait_ready(self) -> None:
        await self.ready.wait()

    async def connect(self, cluster: str) -> KubeClient:
        """A client of ``cluster`` through the kubeconfig as it is now."""
        credentials = await load_credentials(self.kubeconfig, cluster)
        return KubeClient(credentials, cluster, TEST_CLIENT_OPTIONS)

    def kubeconfig_dict(self) -> dict[str, Any]:
        loaded = yaml.safe_load(self.kubeconfig.read_text())
        assert isinstance(loaded, dict)
        return loaded

    def server_url(self, cluster: str) -> str:
        entry = next(c for c in self.kubeconfig_dict()["clusters"] if c["name"] == cluster)
        return str(entry["cluster"]["server"])

    def write_kubeconfig_via(self, cluster: str, port: int, path: Path) -> Path:
        """A kubeconfig with only ``cluster``, its server moved to ``port`` on the same host (the serving
        certificate names 127.0.0.1, so the host stays)."""
        full = self.kubeconfig_dict()
        only = copy.deepcopy(full)
        only["clusters"] = [c for c in full["clusters"] if c["name"] == cluster]
        only["users"] = [u for u in full["users"] if u["name"] == cluster]
        only["contexts"] = [c for c in full["contexts"] if c["name"] == cluster]
        only["current-context"] = cluster
        server = urlsplit(only["clusters"][0]["cluster"]["server"])
        moved = server._replace(netloc=f"{server.hostname}:{port}")
        only["clusters"][0]["cluster"]["server"] = urlunsplit(moved)
        path.write_text(yaml.safe_dump(only, sort_keys=False))
        path.chmod(0o600)
        return path

    async def close(self) -> list[int]:
        """Kill it and every pod process it left behind; the pids of those pods."""
        self.ready.clear()
        await self.process.kill_group()
        return kill_processes_under(self.state_dir)


class ManagerProcess:
    """One ``multiqueue manager --config ...`` process, started again after each crash."""

    def __init__(self, workdir: Path, config: dict[str, Any]) -> None:
        self.config_path = workdir / "manager.yaml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.process = Spawned.python(
            "manager",
            ["-m", "multiqueue", "manager", "--config", str(self.config_path)],
            workdir / "manager.log",
        )
        self.metrics_url = ""
        self.starts = 0

    async def start(self) -> float:
        loop = asyncio.get_running_loop()
        began = loop.time()
        await self.process.start()
        found = await self.process.wait_for_line(MANAGER_READY, within=START_TIMEOUT)
        self.metrics_url = found.group("url") + "/metrics"
        self.starts += 1
        return loop.time() - began

    async def crash(self) -> None:
        await self.process.kill_group()

    async def close(self) -> None:
        await self.process.kill_group()

    async def metrics(self, session: aiohttp.ClientSession) -> str:
        async with session.get(self.metrics_url, timeout=aiohttp.ClientTimeout(total=5)) as response:
            response.raise_for_status()
            return await response.text()


def manager_config(kubeconfig: Path, workers: dict[str, tuple[Path, str]], **settings: Any) -> dict[str, Any]:
    """A manager config for local clusters: the management context of ``kubeconfig``, and each worker's
    (kubeconfig, context)."""
    return {
        "management": {"kubeconfig": str(kubeconfig), "context": "management"},
        "workers": [
            {"name": name, "kubeconfig": str(path), "context": context}
            for name, (path, context) in workers.items()
        ],
        **settings,
    }
