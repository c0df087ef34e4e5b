"""deploy/register-worker.sh against local clusters, as an admin runs it: a cluster the manager was not configured with
becomes a worker through the Secret the script writes, and runs a Job that selects it; a run that fails midway
leaves nothing behind. On ``--provider=local`` the embedded server's token controller fills in the token; on
``--provider=upstream`` kube-controller-manager's does, and RBAC holds the manager to the multiqueue-worker role."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from multiqueue.api.types import JOBS, NAMESPACES, SECRETS, Resource
from multiqueue.kube.errors import NotFound
from multiqueue.local.config import ControlPlane, LocalConfig
from multiqueue.local.up import LocalClusters
from tests.e2e.conftest import Clusters, has_condition, job_body
from tests.support.docblocks import named_files, shell_blocks
from tests.support.processes import REPO

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        shutil.which("bash") is None or shutil.which("kubectl") is None,
        reason="deploy/register-worker.sh needs bash and kubectl on PATH",
    ),
]

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "register-worker.sh"
MANAGED_BY = "multiqueue.dev/dispatcher"
SELECTOR_ANNOTATION = "multiqueue.dev/cluster-selector"
CLUSTER_LABEL = "multiqueue.dev/cluster"  # on the management Secret: the worker's name
SPARE = "spare"  # a cluster the manager's config does not name
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
SCRIPT_TIMEOUT = 180.0
GUIDE = "docs/admin-guide.md"
# The local clusters of the admin guide's example: a cluster no worker entry names.
CLUSTERS_YAML = named_files(GUIDE)["spare.yaml"]


def guide_registration(kubeconfig: Path) -> str:
    """The admin guide's register-worker.sh command as written, with the state directory of this run."""
    (block,) = shell_blocks(GUIDE, "### On local clusters")
    (command,) = [line for line in block.replace("\\\n", " ").splitlines() if "register-worker.sh" in line]
    return command.replace("/tmp/mq/kubeconfig", str(kubeconfig))


@pytest.fixture
async def clusters_with_a_spare(control_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[Clusters]:
    """management, worker-1 (the one configured worker) and spare, which no config names; the manager takes
    workers from Secrets too (``workerSecrets`` is on by default)."""
    config = LocalConfig.model_validate({**yaml.safe_load(CLUSTERS_YAML), "controlPlane": control_plane})
    local = LocalClusters(config, tmp_path / "state")
    await local.start()
    try:
        clients = {name: c.client for name, c in local.components.items() if c.client is not None}
        yield Clusters(
            clients, local.kubeconfig_path, local, "upstream" if control_plane == "upstream" else "local"
        )
    finally:
        await local.stop(stop_pods=True)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


async def register(clusters: Clusters, *args: str) -> Run:
    """The script, as a person runs it: kubectl on PATH, the local kubeconfig in KUBECONFIG."""
    process = await asyncio.create_subprocess_exec(
        "bash",
        str(SCRIPT),
        "--name", SPARE, "--worker-context", SPARE, "--management-context", "management",
        *args,
        env={**os.environ, "KUBECONFIG": str(clusters.kubeconfig)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(SCRIPT_TIMEOUT):
        out, err = await process.communicate()
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


async def whoami(kubeconfig: Path) -> str:
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(kubeconfig), "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_a_cluster_registered_by_the_script_runs_a_job_that_selects_it(
    clusters_with_a_spare: Clusters, tmp_path: Path
) -> None:
    clusters = clusters_with_a_spare
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", guide_registration(clusters.kubeconfig), cwd=str(REPO),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(SCRIPT_TIMEOUT):
        out, err = await process.communicate()
    run = Run(int(process.returncode or 0), out.decode(), err.decode())
    assert run.returncode == 0, run.stderr
    steps = run.stderr.splitlines()
    assert steps[0] == f"worker {SPARE}: ClusterRole multiqueue-worker on context {SPARE}"
    assert steps[-1] == f"worker {SPARE}: registered: the manager adds it from that Secret while it runs"
    assert all(line.startswith(f"worker {SPARE}: ") for line in steps), run.stderr

    # The kubeconfig it wrote names the worker's service account, whose token the cluster accepts.
    secret = await clusters.client().get(SECRETS, f"multiqueue-worker-{SPARE}", "multiqueue-system")
    assert secret["metadata"]["labels"] == {CLUSTER_LABEL: SPARE}
    kubeconfig = tmp_path / "registered.kubeconfig"
    kubeconfig.write_text(base64.b64decode(secret["data"]["kubeconfig"]).decode())
    assert yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    assert await whoami(kubeconfig) == "system:serviceaccount:multiqueue-system:multiqueue-manager"

    job = job_body("on-the-spare", "echo registered", managedBy=MANAGED_BY)
    job["metadata"]["annotations"] = {SELECTOR_ANNOTATION: "registered=by-script"}
    await clusters.client().create(JOBS, job, "default")
    await clusters.wait_for(
        JOBS, "default", "on-the-spare", has_condition("Complete"), cluster=SPARE, within=120
    )
    await clusters.wait_for(JOBS, "default", "on-the-spare", has_condition("Complete"), within=60)
    with pytest.raises(NotFound):
        await clusters.client("worker-1").get(JOBS, "on-the-spare", "default")


async def test_a_run_that_fails_midway_leaves_nothing_behind(clusters_with_a_spare: Clusters) -> None:
    """The management cluster has no such namespace: the worker side is all made (the token too) before the
    management Secret is refused, and then all of it goes."""
    clusters = clusters_with_a_spare
    run = await register(clusters, "--namespace", "mq-absent")
    assert run.returncode == 1, run.stderr
    assert 'namespaces "mq-absent" not found' in run.stderr
    removed = [line for line in run.stderr.splitlines() if line.startswith(f"worker {SPARE}: removed ")]
    assert removed == [
        f"worker {SPARE}: removed {what}"
        for what in (
            "secret/multiqueue-manager-token",
            "clusterrolebinding.rbac.authorization.k8s.io/multiqueue-worker",
            "serviceaccount/multiqueue-manager",
            "namespace/mq-absent",
            "clusterrole.rbac.authorization.k8s.io/multiqueue-worker",
        )
    ], run.stderr

    spare = clusters.client(SPARE)
    for resource, name in (
        (NAMESPACES, "mq-absent"),
        (CLUSTER_ROLE_BINDINGS, "multiqueue-worker"),
        (CLUSTER_ROLES, "multiqueue-worker"),
    ):
        with pytest.raises(NotFound):
            await spare.get(resource, name)
    written, _ = await clusters.client().list(SECRETS, None, label_selector=f"{CLUSTER_LABEL}={SPARE}")
    assert written == []
