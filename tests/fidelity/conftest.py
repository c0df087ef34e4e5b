"""Two clusters side by side for differential tests: one served by the embedded API server and controllers, one by
upstream etcd, kube-apiserver, kube-controller-manager and kube-scheduler. Both are called ``fidelity`` (so node
names and the like compare equal), each runs the local kubelet, and each is a ``multiqueue local up`` process of its
own for the whole session.

Upstream is the oracle. Where its binaries are not built the tests skip, naming the build command; CI builds them.
Every test on the pair carries the ``fidelity`` mark and runs as its own step (``pytest -m fidelity tests/fidelity``),
as the robustness suite does, so the everyday suite stays quick; the comparison logic's own tests stay in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO

import pytest
import yaml

from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.kube.config import load_credentials
from multiqueue.local.upstream import Binaries, MissingBinaries
from tests.support.processes import REPO, kill_processes_under

CLUSTER = "fidelity"
READY = re.compile(r"^press Ctrl-C to stop")
# An upstream control plane starting on a 2-core machine (perhaps beside another test run) takes its time.
START_TIMEOUT = 300.0
STOP_TIMEOUT = 60.0


@dataclasses.dataclass(frozen=True)
class Side:
    """One of the two clusters: which control plane serves it, and its kubeconfig (context ``fidelity``)."""

    name: str  # "embedded" or "upstream"
    kubeconfig: Path

    async def client(self) -> KubeClient:
        """A client that reports every answer as it comes: no retries, so a 5xx or a timeout is seen as such."""
        credentials = await load_credentials(self.kubeconfig, CLUSTER)
        return KubeClient(credentials, self.name, ClientOptions(max_attempts=1, request_timeout=30.0))


@dataclasses.dataclass(frozen=True)
class Pair:
    embedded: Side
    upstream: Side

    @property
    def sides(self) -> tuple[Side, Side]:
        return (self.embedded, self.upstream)

    @contextlib.asynccontextmanager
    async def clients(self) -> AsyncIterator[tuple[KubeClient, KubeClient]]:
        """A client of each side, (embedded, upstream), closed on the way out."""
        embedded, upstream = await self.embedded.client(), await self.upstream.client()
        try:
            yield embedded, upstream
        finally:
            await asyncio.gather(embedded.close(), upstream.close())


def _copy_rest(stream: IO[str], log: IO[str]) -> None:
    for line in stream:
        log.write(line)
        log.flush()


@dataclasses.dataclass
class _LocalUp:
    """``multiqueue local up`` of one cluster in a process of its own, started at once, ready when it says so."""

    side: Side
    state_dir: Path
    process: subprocess.Popen[str]
    log_path: Path

    @classmethod
    def start(cls, folder: Path, control_plane: str) -> _LocalUp:
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "local.yaml"
        config.write_text(yaml.safe_dump({"clusters": [{"name": CLUSTER}], "controlPlane": control_plane}))
        state_dir = folder / "state"
        argv = [sys.executable, "-m", "multiqueue", "local", "up", "--config", str(config)]
        argv += ["--state-dir", str(state_dir)]
        process = subprocess.Popen(
            argv,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        return cls(Side(control_plane, state_dir / "kubeconfig"), state_dir, process, folder / "local-up.log")

    def wait_ready(self) -> None:
        """Read its output until it says it serves; its later output goes on into the log file."""
        assert self.process.stdout is not None
        log = self.log_path.open("a", encoding="utf-8")
        timer = threading.Timer(START_TIMEOUT, self.process.kill)
        timer.start()
        try:
            for line in self.process.stdout:
                log.write(line)
                log.flush()
                if READY.search(line):
                    break
            else:
                log.close()
                raise RuntimeError(
                    f"{self.side.name} cluster exited ({self.process.wait()}) before serving; "
                    f"see {self.log_path}:\n" + self.log_path.read_text()[-3000:]
                )
        finally:
            timer.cancel()
        threading.Thread(target=_copy_rest, args=(self.process.stdout, log), daemon=True).start()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        kill_processes_under(self.state_dir)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents and "pair" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.fidelity)


@pytest.fixture(scope="session")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """The embedded and the upstream cluster, started together, for the whole session."""
    try:
        Binaries.find()
    except MissingBinaries as exc:
        reason = f"differential tests need the upstream control plane: {exc}"
        print(reason)
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("fidelity")
    started = [_LocalUp.start(folder / name, name) for name in ("embedded", "upstream")]
    try:
        for local in started:
            local.wait_ready()
        yield Pair(started[0].side, started[1].side)
    finally:
        for local in started:
            local.stop()
