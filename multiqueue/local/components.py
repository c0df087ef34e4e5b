"""What runs inside a local cluster besides its API server: the embedded controllers and the local kubelet.

They talk to the server through an ordinary client and kubeconfig-style credentials, exactly as they would talk
to a real cluster.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from opentelemetry.metrics import Meter

from multiqueue.controllers.embedded import EmbeddedControllers
from multiqueue.kube.client import KubeClient
from multiqueue.kube.config import load_credentials
from multiqueue.kube.informer import InformerFactory
from multiqueue.local.config import LocalCluster
from multiqueue.local.kubelet import LocalKubelet
from multiqueue.loop.tasks import cancel_and_wait, start_guarded


@dataclasses.dataclass(frozen=True)
class ComponentsSetup:
    """What the components of one local cluster are made from, fixed for their lifetime."""

    cluster: LocalCluster
    kubeconfig: dict[str, Any]  # with a context named after the cluster
    log_dir: Path  # where the kubelet writes container logs
    meter: Meter | None = None
    # The kubelet binds unscheduled pods itself where no kube-scheduler runs (the embedded server).
    bind_pods: bool = True


class ClusterComponents:
    """The controllers and kubelet of one local cluster, started and stopped together."""

    def __init__(
        self,
        cluster: LocalCluster,
        kubeconfig: dict[str, Any],
        log_dir: Path,
        meter: Meter | None = None,
        *,
        bind_pods: bool = True,
    ) -> None:
        self.setup = ComponentsSetup(cluster, kubeconfig, log_dir, meter, bind_pods)
        self.client: KubeClient | None = None
        self.kubelet_client: KubeClient | None = None
        self.factory: InformerFactory | None = None
        self.controllers = EmbeddedControllers()
        self.kubelet: LocalKubelet | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        setup, cluster = self.setup, self.setup.cluster
        credentials = await load_credentials(config_dict=setup.kubeconfig, context=cluster.name)
        self.client = KubeClient(credentials, cluster.name)
        # The kubelet has its own connection, as a node's kubelet has its own credentials.
        self.kubelet_client = KubeClient(credentials, f"{cluster.name}-kubelet")
        self.factory = InformerFactory(self.client)
        self.controllers = EmbeddedControllers.build(
            self.client, self.factory, cluster.controllers, setup.meter
        )
        self.kubelet = LocalKubelet(
            self.kubelet_client,
            self.factory,
            f"{cluster.name}-node",
            cluster.kubelet,
            setup.log_dir,
            capacity_pods=cluster.capacity_pods,
            capacity_cpu=cluster.capacity_cpu,
            bind_pods=setup.bind_pods,
        )
        self.factory.start()
        self.controllers.start()
        parts = {"kubelet": self.kubelet.run, **self.controllers.work()}
        self._tasks = [start_guarded(f"{cluster.name}/{name}", work) for name, work in parts.items()]

    async def stop(self, stop_pods: bool = False) -> None:
        """Stop the controllers and the kubelet. Pod processes go on running (a restarted kubelet adopts them, as
        a real node's containers outlive its kubelet) unless ``stop_pods``."""
        if stop_pods and self.kubelet is not None:
            await self.kubelet.stop_all_pods()
        await cancel_and_wait(self._tasks)
        await self.controllers.close()
        if self.kubelet is not None:
            await self.kubelet.close()
        if self.factory is not None:
            await self.factory.stop()
        for client in (self.client, self.kubelet_client):
            if client is not None:
                await client.close()
