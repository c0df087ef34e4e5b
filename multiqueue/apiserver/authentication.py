"""Who sends a request to a local API server: the holder of the cluster's admin token, or a ServiceAccount whose
token a Secret holds (:mod:`multiqueue.apiserver.rules.serviceaccounts` says which token is whose).

Authorization stays what it was: every authenticated request is allowed, a ServiceAccount's bindings are stored and
not enforced. Who the caller is shows in SelfSubjectReview (``kubectl auth whoami``); and since each request reads
the Secret and the ServiceAccount, deleting either revokes the token at once (kube-apiserver caches a token's
answer for up to 10 s).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Final

from multiqueue.api.meta import annotations_of, metadata
from multiqueue.api.types import Obj
from multiqueue.apiserver.registry import Registry
from multiqueue.apiserver.rest import MERGE_PATCH, ApiError, Rest
from multiqueue.apiserver.rules import serviceaccounts
from multiqueue.apiserver.rules.configs import SERVICE_ACCOUNT_NAME
from multiqueue.apiserver.rules.serviceaccounts import SECRETS, SERVICE_ACCOUNTS
from multiqueue.apiserver.store import Store

log = logging.getLogger(__name__)

# The admin token's user: the same user and groups the upstream control plane's token file gives that token
# (multiqueue/local/upstream.py).
ADMIN: Final[Obj] = {
    "username": "admin",
    "uid": "admin",
    "groups": ["system:masters", "system:authenticated"],
}
MANAGER: Final = (
    "kube-apiserver"  # the field manager of the last-used label, as upstream's shows in managedFields
)


class Authenticator:
    def __init__(
        self, admin_token: str, store: Store, rest: Rest, registry: Registry, clock: Callable[[], datetime]
    ) -> None:
        self.admin_token = admin_token.encode()
        self.store = store
        self.rest = rest
        self.registry = registry
        self.clock = clock
        self._labelling: set[tuple[str, str]] = set()  # Secrets whose last-used label is being written

    async def user(self, authorization: str) -> Obj | None:
        """The user an ``Authorization`` header names, as SelfSubjectReview reports it; None: not authenticated."""
        scheme, _, credential = authorization.partition(" ")
        token = credential.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        if hmac.compare_digest(token.encode(), self.admin_token):
            return ADMIN
        location = serviceaccounts.token_location(token)
        if location is None:
            return None
        namespace, name = location
        secret = self.store.get(SECRETS, namespace, name)
        if secret is None:
            return None
        account_name = annotations_of(secret).get(SERVICE_ACCOUNT_NAME, "")
        account = self.store.get(SERVICE_ACCOUNTS, namespace, account_name) if account_name else None
        if account is None or not serviceaccounts.authentic(token, secret, account):
            return None
        await self._mark_used(secret)
        return serviceaccounts.user_of(secret, account)

    async def _mark_used(self, secret: Obj) -> None:
        """Label the Secret with the day its token was last used, as kube-apiserver does; a failure only logs (the
        request goes on), as there."""
        patch = serviceaccounts.last_used_patch(secret, self.clock().date())
        meta = metadata(secret)
        where = (str(meta.get("namespace")), str(meta.get("name")))
        if patch is None or where in self._labelling:
            return
        self._labelling.add(where)
        try:
            (rtype,) = self.registry.by_key(SECRETS)
            await self.rest.patch(rtype, *where, MERGE_PATCH, patch, manager=MANAGER)
        except ApiError as exc:
            log.warning("could not label token Secret %s/%s as used today: %s", *where, exc)
        finally:
            self._labelling.discard(where)
