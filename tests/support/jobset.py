"""The real JobSet controller as a test dependency: the binary and CRD hack/build-jobset.sh builds from the Go
module pinned in hack/jobset/go.mod, run as a local process against one cluster.

Out of a cluster it runs without leader election, without its internal certificate management and without
metrics; its webhook server must still listen, so it gets a self-signed pair on a free loopback port, where nothing
calls it (no cluster here registers the webhook): a JobSet must carry what the webhook would default
(``spec.network``, ``spec.successPolicy``, an Indexed completion mode and a restart policy).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from multiqueue.api.types import CRDS
from multiqueue.kube.client import KubeClient
from multiqueue.local.certs import serving_cert
from tests.support.dispatching import condition_true
from tests.support.processes import REPO, Spawned

ASSETS_VARIABLE: Final = "MULTIQUEUE_JOBSET_ASSETS"
BUILD_COMMAND: Final = "bash hack/build-jobset.sh"
CRD_FILE: Final = "jobset.x-k8s.io_jobsets.yaml"
READY_LINE: Final = r'"msg":"Starting workers".*"controller":"jobset"'


def version() -> str:
    found = re.search(r"sigs\.k8s\.io/jobset (v\S+)", (REPO / "hack" / "jobset" / "go.mod").read_text())
    assert found is not None, "hack/jobset/go.mod pins no sigs.k8s.io/jobset version"
    return found.group(1)


def assets() -> Path | None:
    """The folder with the controller and its CRD ($MULTIQUEUE_JOBSET_ASSETS, else the build cache), or None."""
    folder = Path(
        os.environ.get(ASSETS_VARIABLE) or Path.home() / ".cache" / "multiqueue" / "jobset" / version()
    )
    built = (folder / "jobset-controller").is_file() and (folder / CRD_FILE).is_file()
    return folder if built else None


def built_or_skip() -> Path:
    """The assets folder; the scenario skips, printing how to build them, when they are not built."""
    folder = assets()
    if folder is None:
        reason = f"the JobSet controller is not built: run {BUILD_COMMAND}"
        print(reason)
        pytest.skip(reason)
    return folder


async def install_crd(client: KubeClient, folder: Path, within: float = 30.0) -> None:
    """The JobSet CRD on the cluster, served (Established) before this returns."""
    crd = yaml.safe_load((folder / CRD_FILE).read_text())
    await client.create(CRDS, crd)
    selector = f"metadata.name={crd['metadata']['name']}"
    async with asyncio.timeout(within):
        while True:
            items, version_ = await client.list(CRDS, field_selector=selector)
            if items and condition_true(items[0], "Established"):
                return
            async for event in client.watch(CRDS, field_selector=selector, resource_version=version_):
                if condition_true(event["object"], "Established"):
                    break


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class JobSetController:
    """One JobSet controller process, for the cluster of ``context`` in ``kubeconfig``."""

    def __init__(self, folder: Path, kubeconfig: Path, context: str, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        certs = workdir / "certs"
        certs.mkdir(exist_ok=True)
        pair = serving_cert(workdir, f"jobset-{context}", "127.0.0.1")
        shutil.copy(pair.cert_file, certs / "tls.crt")
        shutil.copy(pair.key_file, certs / "tls.key")
        config: dict[str, Any] = {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": _free_port(), "certDir": str(certs)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": "0"},
        }
        (workdir / "config.yaml").write_text(yaml.safe_dump(config))
        # controller-runtime takes the kubeconfig's current context: a copy with this cluster's current.
        own = yaml.safe_load(kubeconfig.read_text())
        own["current-context"] = context
        (workdir / "kubeconfig").write_text(yaml.safe_dump(own))
        (workdir / "kubeconfig").chmod(0o600)
        argv = [
            str(folder / "jobset-controller"),
            f"--config={workdir / 'config.yaml'}",
            f"--kubeconfig={workdir / 'kubeconfig'}",
            "--zap-devel=false",
        ]
        self.process = Spawned(f"jobset-controller-{context}", argv, workdir / "controller.log")

    async def start(self, within: float = 60.0) -> None:
        await self.process.start()
        await self.process.wait_for_line(READY_LINE, within)

    async def stop(self) -> None:
        await self.process.kill_group()
