"""A local API server in a thread, with a kubeconfig, for kubectl and the official (blocking) Python client."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.support.servers import ThreadedServer, threaded_server, tls_config, write_kubeconfig


@dataclass
class Cluster:
    threaded: ThreadedServer
    kubeconfig: Path

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            pytest.skip("kubectl is not on PATH")
        result = subprocess.run(
            [kubectl, "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result

    def api_client(self) -> client.ApiClient:
        return config.new_client_from_config(config_file=str(self.kubeconfig))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("compat")
    with threaded_server(folder / "state", name="compat", **tls_config(folder, "compat")) as running:
        kubeconfig = write_kubeconfig(folder / "kubeconfig", {"compat": running.server})
        yield Cluster(running, kubeconfig)
