"""What a local API server serves, behind its HTTP face: the store, the REST semantics over it, and the
controllers that run beside it (CustomResourceDefinitions, garbage collection, what every namespace holds,
service-account tokens, cordoned Nodes' taints). Opened and closed as one, so the HTTP layer holds one thing that
is either there or not."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from multiqueue.apiserver.crds import CrdController
from multiqueue.apiserver.gc import GarbageCollector
from multiqueue.apiserver.nodetaints import NodeTaintController
from multiqueue.apiserver.publishers import NamespacePublisher
from multiqueue.apiserver.registry import Registry
from multiqueue.apiserver.rest import Rest
from multiqueue.apiserver.store import Store
from multiqueue.apiserver.tokens import TokenController


@dataclasses.dataclass(frozen=True)
class Backend:
    store: Store
    rest: Rest
    crds: CrdController
    gc: GarbageCollector
    publisher: NamespacePublisher
    tokens: TokenController
    node_taints: NodeTaintController

    @classmethod
    async def open(
        cls,
        path: Path | None,
        window: tuple[int, int],
        registry: Registry,
        clock: Callable[[], datetime],
        ca_pem: str | None = None,
    ) -> Backend:
        """Open the store at ``path`` (None: in memory only), its watch window bounded by ``window`` (events,
        bytes), and start the controllers beside it; ``ca_pem`` is the CA published in every namespace and given to
        service-account token Secrets (none without TLS)."""
        store = await Store.open(path, *window)
        rest = Rest(store, registry, clock)
        crds = CrdController(store, registry, rest, clock)
        crds.start()
        gc = GarbageCollector(store, registry, rest)
        gc.start()
        publisher = NamespacePublisher(store, registry, rest, ca_pem)
        publisher.start()
        tokens = TokenController(store, registry, rest, ca_pem)
        tokens.start()
        node_taints = NodeTaintController(store, registry, rest, clock)
        node_taints.start()
        return cls(store, rest, crds, gc, publisher, tokens, node_taints)

    async def idle(self) -> None:
        """Wait until the server's own controllers have nothing queued (namespace contents published, tokens filled
        in, garbage collected): the writes a client did not ask for are done."""
        await self.publisher.runner.join()
        await self.tokens.runner.join()
        await self.gc.runner.join()
        await self.node_taints.runner.join()

    async def close(self) -> None:
        await self.node_taints.stop()
        await self.tokens.stop()
        await self.publisher.stop()
        await self.gc.stop()
        await self.crds.stop()
        await self.store.close()
