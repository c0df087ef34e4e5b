"""Keeps ``default/kubernetes`` as :mod:`multiqueue.apiserver.rules.apiservice` wants it: made before the server
says it is up, and made again or put back whenever someone deletes or changes it, as kube-apiserver's own
reconciler does (within seconds there; at once here)."""

from __future__ import annotations

import contextlib
import logging
from typing import Final

from multiqueue.api.meta import metadata
from multiqueue.apiserver.registry import Registry
from multiqueue.apiserver.rest import ApiError, Rest
from multiqueue.apiserver.rules import apiservice
from multiqueue.apiserver.store import Event, Store
from multiqueue.loop.controller import Controller
from multiqueue.loop.runner import Runner
from multiqueue.loop.source import Feed

log = logging.getLogger(__name__)

SERVICES: Final = "services"
MANAGER: Final = "kube-apiserver"


class ApiServicePublisher:
    def __init__(self, store: Store, registry: Registry, rest: Rest, port: int) -> None:
        self.store = store
        self.registry = registry
        self.rest = rest
        self.port = port
        self.runner: Runner[str] = Runner(
            Controller(
                "kubernetes-service",
                self.sync,
                feeds=[Feed(store, self._on_event)],
                cached=lambda: [apiservice.NAME],
            )
        )

    def start(self) -> None:
        self.runner.start()

    async def stop(self) -> None:
        await self.runner.stop()

    def _on_event(self, event: Event) -> None:
        meta = metadata(event.obj)
        if event.resource == SERVICES and (event.namespace, meta.get("name")) == (
            apiservice.NAMESPACE,
            apiservice.NAME,
        ):
            self.runner.add(apiservice.NAME)

    async def sync(self, _key: str = apiservice.NAME) -> None:
        existing = self.store.get(SERVICES, apiservice.NAMESPACE, apiservice.NAME)
        action = apiservice.decide(existing, self.port)
        if action is None:
            return None
        verb, body = action
        (rtype,) = self.registry.by_key(SERVICES)
        if verb == "update":
            # A conflict (changed meanwhile): the event of that change brings it here again.
            with contextlib.suppress(ApiError):
                await self.rest.update(rtype, apiservice.NAMESPACE, apiservice.NAME, body, manager=MANAGER)
            return None
        try:
            await self.rest.create(rtype, apiservice.NAMESPACE, body, manager=MANAGER)
        except ApiError as exc:
            if exc.code == 409:
                return None  # made meanwhile
            # Another Service holds the first address: let the allocator pick one.
            log.warning("default/kubernetes gets another cluster IP: %s", exc.status.get("message"))
            fallback = apiservice.wanted(self.port, cluster_ip=None)
            await self.rest.create(rtype, apiservice.NAMESPACE, fallback, manager=MANAGER)
        return None
