"""The embedded controllers one cluster runs, built in one place for the manager process and for local clusters."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Coroutine
from typing import Any

from opentelemetry.metrics import Meter

from multiqueue.controllers.cronjob import COMPONENT as CRONJOB_CONTROLLER
from multiqueue.controllers.cronjob import CronJobController
from multiqueue.controllers.job import COMPONENT as JOB_CONTROLLER
from multiqueue.controllers.job import JobController
from multiqueue.kube.client import KubeClient
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import InformerFactory

Work = Callable[[], Coroutine[Any, Any, None]]


@dataclasses.dataclass
class EmbeddedControllers:
    """The Job and CronJob controllers a cluster is asked for ("job", "cronjob"), each with its Event recorder.

    Built before the informer factory starts, so their informers start with it."""

    job: JobController | None = None
    cronjob: CronJobController | None = None
    recorders: list[EventRecorder] = dataclasses.field(default_factory=list)

    @classmethod
    def build(
        cls, client: KubeClient, factory: InformerFactory, names: Collection[str], meter: Meter | None = None
    ) -> EmbeddedControllers:
        made = cls()
        if "job" in names:
            recorder = EventRecorder(client, JOB_CONTROLLER)
            made.recorders.append(recorder)
            made.job = JobController(client, factory, recorder, meter=meter)
        if "cronjob" in names:
            recorder = EventRecorder(client, CRONJOB_CONTROLLER)
            made.recorders.append(recorder)
            made.cronjob = CronJobController(client, factory, recorder)
        return made

    def work(self) -> dict[str, Work]:
        """Each controller's loop by its component name: a term of it runs until cancelled."""
        named: dict[str, Work] = {}
        if self.job is not None:
            named[JOB_CONTROLLER] = self.job.run
        if self.cronjob is not None:
            named[CRONJOB_CONTROLLER] = self.cronjob.run
        return named

    def start(self) -> None:
        for recorder in self.recorders:
            recorder.start()

    async def close(self) -> None:
        """For good: the controllers unsubscribed and their queues shut down, pending Events sent."""
        for controller in (self.job, self.cronjob):
            if controller is not None:
                await controller.close()
        for recorder in self.recorders:
            await recorder.stop()
