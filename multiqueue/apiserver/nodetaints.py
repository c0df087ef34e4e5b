"""Keeps the unschedulable taint of each Node in step with ``spec.unschedulable`` (``kubectl cordon``,
``kubectl drain``), as kube-controller-manager's node lifecycle controller does; the rule is in
:mod:`multiqueue.apiserver.rules.nodetaints`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime

from multiqueue.api.meta import metadata
from multiqueue.apiserver.registry import Registry
from multiqueue.apiserver.rest import ApiError, Rest
from multiqueue.apiserver.rules.nodetaints import wanted_taints
from multiqueue.apiserver.store import Event, Store
from multiqueue.loop.controller import Controller
from multiqueue.loop.runner import Runner
from multiqueue.loop.source import Feed

NODES = "nodes"


class NodeTaintController:
    def __init__(self, store: Store, registry: Registry, rest: Rest, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.registry = registry
        self.rest = rest
        self.clock = clock
        self.runner: Runner[str] = Runner(
            Controller("node-taints", self.sync, feeds=[Feed(store, self._on_event)], cached=self._nodes)
        )

    def start(self) -> None:
        self.runner.start()

    async def stop(self) -> None:
        await self.runner.stop()

    def _nodes(self) -> list[str]:
        return [str(metadata(node).get("name")) for node in self.store.list_objects(NODES)]

    def _on_event(self, event: Event) -> None:
        if event.resource == NODES and event.type != "DELETED":
            self.runner.add(str(metadata(event.obj).get("name")))

    async def sync(self, name: str) -> None:
        node = self.store.get(NODES, "", name)
        if node is None:
            return None
        taints = wanted_taints(node, self.clock())
        if taints is None:
            return None
        (rtype,) = self.registry.by_key(NODES)
        spec = {**dict(node.get("spec") or {}), "taints": taints}
        if not taints:
            del spec["taints"]
        # A conflict (the Node changed meanwhile) or a Node gone: the next event says what to do.
        with contextlib.suppress(ApiError):
            await self.rest.update(rtype, "", name, {**node, "spec": spec}, manager="kube-controller-manager")
        return None
