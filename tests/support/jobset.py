"""The real JobSet controller as a test dependency: the binary and CRD hack/build-jobset.sh builds from the Go
module pinned in hack/jobset/go.mod, run as a local process against one cluster (local and upstream providers), or
installed on kind clusters as an admin does (:func:`install_on_kind`): the image that script builds, loaded into
each worker, with the upstream install manifest, webhooks and all, and the CRD alone on the management cluster
(:func:`remove_from_kind` takes it away again).

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
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from multiqueue.api.types import CRDS, Resource
from multiqueue.dispatch.adapters.declared import JOBSET
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import ServerError
from multiqueue.kube.informer import Informer
from multiqueue.local.certs import serving_cert
from tests.support.dispatching import condition_true
from tests.support.docblocks import run_block, shell_blocks
from tests.support.processes import REPO, Spawned
from tests.support.waiting import Changes, saying_on_timeout

ASSETS_VARIABLE: Final = "MULTIQUEUE_JOBSET_ASSETS"
BUILD_COMMAND: Final = "bash hack/build-jobset.sh"
CRD_FILE: Final = "jobset.x-k8s.io_jobsets.yaml"
READY_LINE: Final = r'"msg":"Starting workers".*"controller":"jobset"'
# What hack/build-jobset.sh renders: the upstream install manifest with the controller's image built here.
LOCAL_MANIFEST: Final = "manifests-local.yaml"
# The admin guide's section whose command block installs JobSet on the kind clusters of clusters/.
GUIDE: Final = "docs/admin-guide.md"
KIND_SECTION: Final = "### JobSet on kind and on real clusters"
# Where the upstream manifest puts the controller and its webhooks.
SYSTEM_NAMESPACE: Final = "jobset-system"
WEBHOOK_SERVICE: Final = "jobset-webhook-service"
WEBHOOK_RETRY: Final = 0.5  # seconds between dry runs while the API server cannot reach the webhooks yet
ENDPOINT_SLICES: Final = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
WEBHOOK_CONFIGURATIONS: Final = (
    Resource(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        namespaced=False,
    ),
    Resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        namespaced=False,
    ),
)


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


def local_image(folder: Path) -> str | None:
    """The controller's image the local manifest runs (None: the manifest is not rendered)."""
    manifest = folder / LOCAL_MANIFEST
    if not manifest.is_file():
        return None
    for document in yaml.safe_load_all(manifest.read_text()):
        if document and document.get("kind") == "Deployment":
            return str(document["spec"]["template"]["spec"]["containers"][0]["image"])
    return None


def image_or_skip() -> Path:
    """The assets folder with the local manifest and, in Docker, the image it runs (kind load takes it from there;
    nothing is pulled); the scenario skips, printing how to build them, when they are not there."""
    folder = built_or_skip()
    image = local_image(folder)
    found = image is not None and (
        subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True, check=False
        ).returncode
        == 0
    )
    if not found:
        reason = (
            f"the JobSet controller's image or its manifest is not built: run {BUILD_COMMAND} with Docker "
            f"running (bash hack/docker-up.sh)"
        )
        print(reason)
        pytest.skip(reason)
    return folder


def install_on_kind(kind_kubeconfig: Path, kind_folder: Path) -> None:
    """JobSet on the kind clusters of clusters/ by the admin guide's own commands, run as written: the CRD alone
    on the management cluster; the image, controller and webhooks on each worker, their rollout waited for."""
    install, _ = shell_blocks(GUIDE, KIND_SECTION)
    _run_guide_block(install, kind_kubeconfig, kind_folder)


def remove_from_kind(kind_kubeconfig: Path, kind_folder: Path) -> None:
    """JobSet taken away from the kind clusters again, by the admin guide's commands for that."""
    _, remove = shell_blocks(GUIDE, KIND_SECTION)
    _run_guide_block(remove, kind_kubeconfig, kind_folder)


def _run_guide_block(block: str, kind_kubeconfig: Path, kind_folder: Path) -> None:
    """One of the guide's command blocks, as written, with kind's kubeconfig and command."""
    path = f"{kind_folder}{os.pathsep}{os.environ.get('PATH', '')}"
    run_block(block, {**os.environ, "KUBECONFIG": str(kind_kubeconfig), "PATH": path})


async def until_webhooks_answer(client: KubeClient, within: float = 120.0) -> None:
    """Watch until the API server can call the controller's webhooks (each one given the CA of the certificate
    the controller made, a ready endpoint behind their Service), then until it does: a JobSet created with dryRun
    goes through them."""
    slices = Informer(
        client,
        ENDPOINT_SLICES,
        SYSTEM_NAMESPACE,
        label_selector=f"kubernetes.io/service-name={WEBHOOK_SERVICE}",
    )
    configurations = [
        Informer(client, resource, field_selector=f"metadata.name=jobset-{kind}-webhook-configuration")
        for resource, kind in zip(WEBHOOK_CONFIGURATIONS, ("mutating", "validating"), strict=True)
    ]
    informers = [slices, *configurations]
    changes = Changes(*informers)

    def endpoint_ready() -> bool:
        return any(
            (endpoint.get("conditions") or {}).get("ready") is True
            for item in slices.objects()
            for endpoint in item.get("endpoints") or []
        )

    def ca_injected() -> bool:
        found = [item for informer in configurations for item in informer.objects()]
        return len(found) == len(configurations) and all(
            (webhook.get("clientConfig") or {}).get("caBundle")
            for item in found
            for webhook in item.get("webhooks") or []
        )

    for informer in informers:
        informer.start()
    try:
        async with saying_on_timeout(
            lambda: (
                f"JobSet's webhooks not callable within {within:.0f} s: ready endpoint {endpoint_ready()}, "
                f"CA in the webhook configurations {ca_injected()}"
            )
        ):
            await changes.until(lambda: endpoint_ready() and ca_injected(), within)
    finally:
        for informer in informers:
            await informer.stop()
    probe = yaml.safe_load((REPO / "examples" / "jobset.yaml").read_text())
    probe["metadata"]["name"] = "webhook-probe"
    refused: list[str] = []
    async with saying_on_timeout(
        lambda: f"JobSet's webhooks still not called within {within:.0f} s: {refused[-1:]}"
    ):
        async with asyncio.timeout(within):
            while True:
                try:
                    # Both webhooks fail closed: a dry run that goes through is the proof.
                    await client.create(JOBSET.resource, probe, "default", dry_run=True)
                    return
                except ServerError as exc:
                    if "failed calling webhook" not in str(exc):
                        raise
                    refused.append(str(exc))
                # The node's kube-proxy routes the Service's address to the ready endpoint a moment later, and no
                # API tells when: the API server's own call is the only test, so it is tried again.
                await asyncio.sleep(WEBHOOK_RETRY)


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
