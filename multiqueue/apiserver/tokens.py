"""The service-account token controller of one local API server: kube-controller-manager's ``serviceaccount-token``
controller, run beside the store as the garbage collector is, so that a ``kubernetes.io/service-account-token``
Secret gets its token on a local cluster as on a real one (``deploy/register-worker.sh`` waits for exactly that).

Store events put work items on a queue (a token Secret's, a ServiceAccount's: :mod:`multiqueue.apiserver.rules.serviceaccounts`
says what each holds and decides what to do); the shared reconcile loop takes them, reads the objects as committed
and performs what the decide step returned. A write that loses a race (409) or finds its object gone (404) is
dropped, as upstream drops it: the event of the write in between brings the item back. Anything else is raised, and
the loop retries the item after its back-off.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator

from multiqueue.api.meta import metadata
from multiqueue.api.types import Obj
from multiqueue.apiserver.registry import Registry
from multiqueue.apiserver.resources import ResourceType
from multiqueue.apiserver.rest import ApiError, Rest
from multiqueue.apiserver.rules import serviceaccounts
from multiqueue.apiserver.rules.serviceaccounts import (
    SECRETS,
    SERVICE_ACCOUNTS,
    AccountKey,
    Action,
    Delete,
    SecretKey,
    Write,
)
from multiqueue.apiserver.store import Event, Store
from multiqueue.loop.controller import Controller
from multiqueue.loop.runner import Runner
from multiqueue.loop.source import Feed

log = logging.getLogger(__name__)

MANAGER = "kube-controller-manager"  # the field manager of its writes, as upstream's shows in managedFields
TOKEN_BYTES = 32

WorkItem = SecretKey | AccountKey


def _keys(resource: str, obj: Obj) -> list[WorkItem]:
    """The work item an object of ``resource`` stands for: a token Secret's, a ServiceAccount's, or none."""
    if resource == SECRETS:
        key = serviceaccounts.secret_key(obj)
        return [] if key is None else [key]
    if resource == SERVICE_ACCOUNTS:
        return [serviceaccounts.account_key(obj)]
    return []


class TokenController:
    """Fills in token Secrets and removes those whose account is gone; ``ca_pem`` is the cluster's CA (None on a
    server without TLS: the Secrets then get no ``ca.crt``)."""

    def __init__(self, store: Store, registry: Registry, rest: Rest, ca_pem: str | None) -> None:
        self.store = store
        self.registry = registry
        self.rest = rest
        self.ca_pem = ca_pem
        self.runner: Runner[WorkItem] = Runner(
            Controller(
                "serviceaccount-tokens",
                self._sync,
                feeds=[Feed(store, self._on_event)],
                cached=self._cached,
            )
        )

    def start(self) -> None:
        """Look at every token Secret and ServiceAccount once (what changed while the server was down), then
        follow the store's events."""
        self.runner.start()

    async def stop(self) -> None:
        await self.runner.stop()

    def _on_event(self, event: Event) -> None:
        for key in _keys(event.resource, event.obj):
            self.runner.add(key)

    def _cached(self) -> Iterator[WorkItem]:
        for resource in (SECRETS, SERVICE_ACCOUNTS):
            for obj in self.store.list_objects(resource):
                yield from _keys(resource, obj)

    async def _sync(self, item: WorkItem) -> None:
        if isinstance(item, AccountKey):
            actions = serviceaccounts.decide_account(
                item,
                self.store.get(SERVICE_ACCOUNTS, item.namespace, item.name),
                self.store.list_objects(SECRETS, item.namespace),
            )
        else:
            actions = serviceaccounts.decide_secret(
                item,
                self.store.get(SECRETS, item.namespace, item.name),
                self.store.get(SERVICE_ACCOUNTS, item.namespace, item.account),
                self.ca_pem,
                secrets.token_urlsafe(TOKEN_BYTES),
            )
        for action in actions:
            await self._perform(action)

    async def _perform(self, action: Action) -> None:
        try:
            if isinstance(action, Delete):
                log.debug(
                    "deleting token Secret %s/%s: its ServiceAccount is gone", action.namespace, action.name
                )
                options = {"preconditions": {"uid": action.uid}}
                await self.rest.delete(self._rtype(SECRETS), action.namespace, action.name, options)
            elif isinstance(action, Write):
                meta = metadata(action.obj)
                namespace, name = str(meta.get("namespace") or ""), str(meta.get("name"))
                await self.rest.update(
                    self._rtype(action.resource), namespace, name, action.obj, manager=MANAGER
                )
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise

    def _rtype(self, key: str) -> ResourceType:
        (rtype,) = self.registry.by_key(key)
        return rtype
