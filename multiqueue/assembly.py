"""The manager process, put together in one place for every way it runs: ``multiqueue manager`` and the manager
of ``multiqueue local up`` both start it as a :class:`ManagerProcess`.

Its parts are named, guarded tasks: the dispatcher, the loss clock and, when the config asks for them, the
embedded Job and CronJob controllers of the management cluster run as leader work (``LeaderWork``), each started
under its name, a failure logged under that name, and stopped with the manager.
"""

from __future__ import annotations

from opentelemetry.metrics import Meter
from opentelemetry.trace import Tracer

from multiqueue.controllers.embedded import EmbeddedControllers
from multiqueue.dispatch.config import ManagerConfig
from multiqueue.dispatch.manager import Manager
from multiqueue.kube.client import KubeClient
from multiqueue.kube.informer import InformerFactory


class ManagerProcess:
    """A manager of ``config`` and the embedded controllers it runs on the management cluster (none before it
    starts, or when the config asks for none)."""

    def __init__(
        self, config: ManagerConfig, meter: Meter | None = None, tracer: Tracer | None = None
    ) -> None:
        self._meter = meter
        self.controllers = EmbeddedControllers()
        self.manager = Manager(config, meter, tracer)

    async def start(self) -> None:
        """Start every part: the manager's, then the embedded controllers as its leader work."""
        await self.manager.start(embed=self._embed)

    def _embed(self, client: KubeClient, factory: InformerFactory) -> EmbeddedControllers:
        names = self.manager.config.embedded_controllers
        self.controllers = EmbeddedControllers.build(client, factory, names, self._meter)
        return self.controllers
