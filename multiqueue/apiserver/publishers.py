"""What every namespace holds on a real cluster, put there by the local API server itself: the ``default``
ServiceAccount (what a pod runs as unless it names another) and, when the server serves TLS, the
``kube-root-ca.crt`` ConfigMap (the CA its certificate chains to, for clients inside pods).

Upstream's serviceaccount and root-ca-cert-publisher controllers in kube-controller-manager do this, and so does
this: after the namespace appears, and again whenever one of them is deleted, never in a namespace that is going.
"""

from __future__ import annotations

import contextlib
from typing import Final

from multiqueue.api.meta import metadata
from multiqueue.api.types import Obj
from multiqueue.apiserver.registry import Registry
from multiqueue.apiserver.rest import ApiError, Rest
from multiqueue.apiserver.store import Event, Store
from multiqueue.loop.controller import Controller
from multiqueue.loop.runner import Runner
from multiqueue.loop.source import Feed

SERVICE_ACCOUNTS: Final = "serviceaccounts"
CONFIGMAPS: Final = "configmaps"
DEFAULT_SERVICE_ACCOUNT: Final = "default"
ROOT_CA_CONFIGMAP: Final = "kube-root-ca.crt"
ROOT_CA_DESCRIPTION: Final = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the "
    "internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of "
    "Kubernetes clusters."
)


def published(ca_pem: str | None) -> list[tuple[str, Obj]]:
    """(resource, object) for what every namespace gets."""
    wanted: list[tuple[str, Obj]] = [
        (
            SERVICE_ACCOUNTS,
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEFAULT_SERVICE_ACCOUNT}},
        )
    ]
    if ca_pem is not None:
        configmap = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": ROOT_CA_CONFIGMAP,
                "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION},
            },
            "data": {"ca.crt": ca_pem},
        }
        wanted.append((CONFIGMAPS, configmap))
    return wanted


class NamespacePublisher:
    """Keeps :func:`published` in every namespace that is not terminating."""

    def __init__(self, store: Store, registry: Registry, rest: Rest, ca_pem: str | None) -> None:
        self.store = store
        self.registry = registry
        self.rest = rest
        self.wanted = published(ca_pem)
        self.runner: Runner[str] = Runner(
            Controller(
                "namespace-publisher", self.sync, feeds=[Feed(store, self._on_event)], cached=self._namespaces
            )
        )

    def start(self) -> None:
        self.runner.start()

    async def stop(self) -> None:
        await self.runner.stop()

    def _namespaces(self) -> list[str]:
        return [str(metadata(namespace).get("name")) for namespace in self.store.list_objects("namespaces")]

    def _on_event(self, event: Event) -> None:
        name = str(metadata(event.obj).get("name"))
        if event.resource == "namespaces" and event.type == "ADDED":
            self.runner.add(name)
        elif event.type == "DELETED" and (event.resource, name) in (
            (r, metadata(o)["name"]) for r, o in self.wanted
        ):
            self.runner.add(event.namespace)

    async def sync(self, namespace: str) -> None:
        found = self.store.get("namespaces", "", namespace)
        if found is None or metadata(found).get("deletionTimestamp"):
            return None
        for resource, body in self.wanted:
            if self.store.get(resource, namespace, str(metadata(body)["name"])) is not None:
                continue
            (rtype,) = self.registry.by_key(resource)
            # Refused (it was made meanwhile, or the namespace started going): the next event says what to do.
            with contextlib.suppress(ApiError):
                await self.rest.create(
                    rtype,
                    namespace,
                    {**body, "metadata": dict(metadata(body))},
                    manager="kube-controller-manager",
                )
        return None
