"""What runs inside a local cluster besides its API server: the embedded controllers and the local kubelet.

They talk to the server through an ordinary client and kubeconfig-style credentials, exactly as they would talk
to a real cluster.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import Any

from opentelemetry.metrics import Meter

from multiqueue.controllers.cronjob import COMPONENT as CRONJOB_CONTROLLER
from multiqueue.controllers.cronjob import CronJobController
from multiqueue.controllers.job import COMPONENT as JOB_CONTROLLER
from multiqueue.controllers.job import JobController
from multiqueue.kube.client import KubeClient
from multiqueue.kube.config import load_credentials
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import InformerFactory
from multiqueue.local.config import LocalCluster
from multiqueue.local.kubelet import LocalKubelet
from multiqueue.loop.tasks import cancel_and_wait

log = logging.getLogger(__name__)


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
        self.job_controller: JobController | None = None
        self.cronjob_controller: CronJobController | None = None
        self.kubelet: LocalKubelet | None = None
        self._recorders: list[EventRecorder] = []
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        setup, cluster = self.setup, self.setup.cluster
        credentials = await load_credentials(config_dict=setup.kubeconfig, context=cluster.name)
        self.client = KubeClient(credentials, cluster.name)
        # The kubelet has its own connection, as a node's kubelet has its own credentials.
        self.kubelet_client = KubeClient(credentials, f"{cluster.name}-kubelet")
        self.factory = InformerFactory(self.client)
        if "job" in cluster.controllers:
            recorder = EventRecorder(self.client, JOB_CONTROLLER)
            self._recorders.append(recorder)
            self.job_controller = JobController(self.client, self.factory, recorder, meter=setup.meter)
        if "cronjob" in cluster.controllers:
            recorder = EventRecorder(self.client, CRONJOB_CONTROLLER)
            self._recorders.append(recorder)
            self.cronjob_controller = CronJobController(self.client, self.factory, recorder)
        self.kubelet = LocalKubelet(
            self.kubelet_client,
            self.factory,
            f"{cluster.name}-node",
            cluster.kubelet,
            setup.log_dir,
            capacity_pods=cluster.capacity_pods,
            bind_pods=setup.bind_pods,
        )
        self.factory.start()
        for recorder in self._recorders:
            recorder.start()
        runners = [self.kubelet.run()]
        for controller in (self.job_controller, self.cronjob_controller):
            if controller is not None:
                runners.append(controller.run())
        self._tasks = [asyncio.create_task(_logged(r, cluster.name)) for r in runners]

    async def stop(self, stop_pods: bool = False) -> None:
        """Stop the controllers and the kubelet. Pod processes go on running (a restarted kubelet adopts them, as
        a real node's containers outlive its kubelet) unless ``stop_pods``."""
        if stop_pods and self.kubelet is not None:
            await self.kubelet.stop_all_pods()
        await cancel_and_wait(self._tasks)
        for component in (self.job_controller, self.cronjob_controller, self.kubelet):
            if component is not None:
                await component.close()
        for recorder in self._recorders:
            await recorder.stop()
        if self.factory is not None:
            await self.factory.stop()
        for client in (self.client, self.kubelet_client):
            if client is not None:
                await client.close()


async def _logged(work: Any, cluster: str) -> None:
    try:
        await work
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("a component of local cluster %s stopped", cluster)
