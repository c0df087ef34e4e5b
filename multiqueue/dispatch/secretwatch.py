"""Workers from Secrets, followed at runtime: a labelled Secret in the manager's namespace adds a worker, a changed
one reconnects it, a deleted one drains it. Reading one Secret is ``workersecrets``; this is the watching."""

from __future__ import annotations

import logging
from collections.abc import Callable

from multiqueue.api.meta import metadata
from multiqueue.api.types import SECRETS, Obj
from multiqueue.dispatch.connections import WorkerConnections
from multiqueue.dispatch.mirror import CLUSTER_LABEL
from multiqueue.dispatch.workersecrets import SecretWorker, WorkerSecretError, worker_from_secret
from multiqueue.kube.config import KubeconfigError, load_credentials
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import Handlers, InformerFactory
from multiqueue.loop.controller import Controller
from multiqueue.loop.runner import Runner
from multiqueue.loop.source import Feed

log = logging.getLogger(__name__)


def _name(secret: Obj) -> str:
    return str(metadata(secret).get("name"))


class SecretWorkers:
    def __init__(
        self,
        factory: InformerFactory,
        namespace: str,
        connections: WorkerConnections,
        recorder: EventRecorder,
        *,
        allow_insecure: bool,
        leading: Callable[[], bool],
    ) -> None:
        self.namespace = namespace
        self.connections = connections
        self.recorder = recorder
        self.allow_insecure = allow_insecure
        self.leading = leading
        # Why a Secret did not make a worker, by Secret name (shown by status and metrics).
        self.refused: dict[str, WorkerSecretError] = {}
        self.secrets = factory.informer(SECRETS, namespace, label_selector=CLUSTER_LABEL)
        handlers = Handlers(
            on_add=self._changed, on_update=lambda _o, s: self._changed(s), on_delete=self._changed
        )
        self.runner: Runner[str] = Runner(
            Controller(
                "worker-secrets",
                self.sync,
                feeds=[Feed(self.secrets, handlers)],
                cached=lambda: [_name(secret) for secret in self.secrets.objects()],
            )
        )
        self.runner.start()

    async def close(self) -> None:
        await self.runner.stop()

    def _changed(self, secret: Obj) -> None:
        self.runner.add(_name(secret))

    async def sync(self, name: str) -> None:
        secret = self.secrets.get(f"{self.namespace}/{name}")
        current = self.connections.by_secret(name)
        if secret is None or metadata(secret).get("deletionTimestamp"):
            self.refused.pop(name, None)
            if current is not None:
                self.connections.drain(current)
            return
        try:
            found = worker_from_secret(secret, allow_unsafe=self.allow_insecure)
            taken = self.connections.by_name.get(found.name)
            if taken is not None and taken.secret != name:
                where = f"Secret {taken.secret}" if taken.secret else "the config file"
                raise WorkerSecretError(
                    "DuplicateWorker", f"worker {found.name} is already defined by {where}"
                )
            if current is not None and current != found.name:
                self.connections.drain(current)  # the Secret now names another worker
            if (
                taken is None
                or taken.fingerprint != found.fingerprint
                or self.connections.retiring(found.name)
            ):
                await self._connect(name, found)
        except (WorkerSecretError, KubeconfigError) as exc:
            refusal = (
                exc if isinstance(exc, WorkerSecretError) else WorkerSecretError("BadKubeConfig", str(exc))
            )
            self.refused[name] = refusal
            log.warning("Secret %s/%s makes no worker: %s", self.namespace, name, refusal)
            if self.leading():
                self.recorder.warning(
                    {**secret, "apiVersion": "v1", "kind": "Secret"}, refusal.reason, str(refusal)
                )
            return
        self.refused.pop(name, None)

    async def _connect(self, secret: str, found: SecretWorker) -> None:
        credentials = await load_credentials(config_dict=found.kubeconfig, allow_exec=self.allow_insecure)
        await self.connections.connect(found.name, credentials, found.settings, secret, found.fingerprint)
        log.info("worker %s added from Secret %s/%s", found.name, self.namespace, secret)
