"""Service-account tokens kept in Secrets, as upstream treats them: its token controller (kube-controller-manager's
``serviceaccount-token``) and kube-apiserver's check of such a token. Pure steps on plain dicts, so every case is a
row of a table; the embedded API server runs them (``multiqueue/apiserver/tokens.py`` and
``authentication.py``).

What upstream does, and so what this does:

- A Secret of type ``kubernetes.io/service-account-token`` whose annotation ``kubernetes.io/service-account.name``
  names a ServiceAccount of its namespace gets ``data.token``, ``data.namespace`` and, on a cluster with a CA,
  ``data.ca.crt`` (put back whenever it differs), and the annotation ``kubernetes.io/service-account.uid``.
- A token Secret whose ServiceAccount does not exist (or is another one: its UID differs) is deleted, and when a
  ServiceAccount goes, so do its token Secrets. A token Secret that goes is dropped from its account's ``secrets``.
- A token authenticates while its Secret and ServiceAccount exist and are not being deleted, the Secret still
  holds that token and names that account's UID; as ``system:serviceaccount:<namespace>:<name>``. A Secret
  labelled ``kubernetes.io/legacy-token-invalid-since`` refuses its token; a token in use gets the label
  ``kubernetes.io/legacy-token-last-used`` (the day, UTC) once a day.

The token itself is not a JWT. Upstream signs one with the service-account key, so that its API servers can check it
without a lookup; but with the lookup on (its default, and the only way to revoke such a token) every request reads
the Secret anyway and compares the token with the Secret's copy, and that comparison is the whole check here. A
client passes the token as an opaque bearer credential (kubectl, client-go, the dispatcher; none reads its claims).
So a token is 256 random bits, URL-safe, after the Secret's namespace and name base64url-encoded (the way a
bootstrap token starts with the id of its Secret): finding the Secret is one read, with no index to keep and no key
pair to keep beside the store. What that gives up: a tool that decodes a token's claims finds none, and a token
written into a Secret by hand authenticates too (upstream's would fail the signature check); on a server where every
authenticated request is allowed, that admits no one who could not already write that Secret.
"""

from __future__ import annotations

import base64
import binascii
import copy
import dataclasses
import hmac
from datetime import date, timedelta
from typing import Final

from multiqueue.api.meta import (
    annotations_of,
    as_dict,
    as_list,
    is_deleting,
    labels_of,
    metadata,
    name_of,
    namespace_of,
    uid_of,
)
from multiqueue.api.types import Obj
from multiqueue.apiserver.rules.configs import SERVICE_ACCOUNT_NAME, SERVICE_ACCOUNT_TOKEN

SECRETS: Final = "secrets"
SERVICE_ACCOUNTS: Final = "serviceaccounts"
UID_ANNOTATION: Final = "kubernetes.io/service-account.uid"
TOKEN_KEY: Final = "token"
NAMESPACE_KEY: Final = "namespace"
CA_KEY: Final = "ca.crt"
LAST_USED_LABEL: Final = "kubernetes.io/legacy-token-last-used"
INVALID_SINCE_LABEL: Final = "kubernetes.io/legacy-token-invalid-since"
ALL_SERVICE_ACCOUNTS: Final = "system:serviceaccounts"
AUTHENTICATED: Final = "system:authenticated"


# --- work items: what an event says, kept after the object is gone --------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SecretKey:
    """A token Secret as an event showed it: enough to find it again, or to clean up after it once it is gone."""

    namespace: str
    name: str
    uid: str
    account: str
    account_uid: str  # empty until the controller filled the annotation in


@dataclasses.dataclass(frozen=True)
class AccountKey:
    namespace: str
    name: str
    uid: str


def secret_key(secret: Obj) -> SecretKey | None:
    """The work item of a Secret; None for a Secret the token controller leaves alone (another type, or one that
    names no account: validation refuses that, so only a malformed object)."""
    account = annotations_of(secret).get(SERVICE_ACCOUNT_NAME, "")
    if secret.get("type") != SERVICE_ACCOUNT_TOKEN or not account:
        return None
    account_uid = annotations_of(secret).get(UID_ANNOTATION, "")
    return SecretKey(namespace_of(secret), name_of(secret), uid_of(secret), account, account_uid)


def account_key(account: Obj) -> AccountKey:
    return AccountKey(namespace_of(account), name_of(account), uid_of(account))


def is_token_of(secret: Obj, account: str, account_uid: str) -> bool:
    """Whether ``secret`` is a token of the account with this name and UID (a Secret not yet given the UID
    annotation counts for any account of that name)."""
    annotations = annotations_of(secret)
    return (
        secret.get("type") == SERVICE_ACCOUNT_TOKEN
        and annotations.get(SERVICE_ACCOUNT_NAME) == account
        and annotations.get(UID_ANNOTATION, "") in ("", account_uid)
    )


# --- what the token controller does ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Delete:
    """Delete this token Secret, only if it is still the one with this UID."""

    namespace: str
    name: str
    uid: str


@dataclasses.dataclass(frozen=True)
class Write:
    """Update ``obj`` (a Secret or a ServiceAccount, with the resourceVersion it was read at: a write in between is
    a conflict, and the event of that write brings the item back to be decided again)."""

    resource: str
    obj: Obj


Action = Delete | Write


def decide_secret(
    key: SecretKey, secret: Obj | None, account: Obj | None, ca_pem: str | None, fresh: str
) -> list[Action]:
    """What to do for a token Secret's work item. ``secret`` is the Secret of that name now, ``account`` the
    ServiceAccount the item names, ``ca_pem`` the cluster's CA (None: it has none), ``fresh`` random text for a new
    token (used only if the Secret needs one)."""
    if secret is None or uid_of(secret) != key.uid:
        # The Secret went: its account, if it is the same one, stops listing it.
        if account is None or not _same_account(account, key.account_uid):
            return []
        return (
            [Write(SERVICE_ACCOUNTS, updated)] if (updated := _without_reference(account, key.name)) else []
        )
    if secret_key(secret) != key:
        return []  # an older version's item: the newest version's is queued too, and decides
    if account is None or not _same_account(account, key.account_uid):
        return [Delete(key.namespace, key.name, key.uid)]
    populated = populated_token(secret, account, ca_pem, fresh)
    return [Write(SECRETS, populated)] if populated is not None else []


def decide_account(key: AccountKey, account: Obj | None, secrets: list[Obj]) -> list[Action]:
    """What to do for a ServiceAccount's work item: once that account (name and UID) is gone, delete its token
    Secrets among ``secrets`` (those of its namespace)."""
    if account is not None and uid_of(account) == key.uid:
        return []
    return [
        Delete(key.namespace, name_of(s), uid_of(s)) for s in secrets if is_token_of(s, key.name, key.uid)
    ]


def populated_token(secret: Obj, account: Obj, ca_pem: str | None, fresh: str) -> Obj | None:
    """The Secret with what it lacks filled in (token, namespace, a CA that differs from the cluster's) and both
    account annotations set; None when it lacks nothing."""
    data = as_dict(secret.get("data"))
    needs_ca = bool(ca_pem) and _decoded(data.get(CA_KEY)) != str(ca_pem).encode()
    needs_namespace = not data.get(NAMESPACE_KEY)
    needs_token = not data.get(TOKEN_KEY)
    if not (needs_ca or needs_namespace or needs_token):
        return None
    updated = copy.deepcopy(secret)
    filled = dict(as_dict(updated.get("data")))
    if needs_ca:
        filled[CA_KEY] = _encoded(str(ca_pem))
    if needs_namespace:
        filled[NAMESPACE_KEY] = _encoded(namespace_of(secret))
    if needs_token:
        filled[TOKEN_KEY] = _encoded(token_for(namespace_of(secret), name_of(secret), fresh))
    updated["data"] = filled
    meta = metadata(updated)
    meta["annotations"] = {
        **as_dict(meta.get("annotations")),
        SERVICE_ACCOUNT_NAME: name_of(account),
        UID_ANNOTATION: uid_of(account),
    }
    return updated


def _same_account(account: Obj, wanted_uid: str) -> bool:
    return not wanted_uid or uid_of(account) == wanted_uid


def _without_reference(account: Obj, secret_name: str) -> Obj | None:
    """The account without ``secret_name`` in its ``secrets``; None if it does not list it."""
    references = as_list(account.get("secrets"))
    kept = [r for r in references if as_dict(r).get("name") != secret_name]
    if len(kept) == len(references):
        return None
    updated = copy.deepcopy(account)
    if kept:
        updated["secrets"] = kept
    else:
        updated.pop("secrets", None)  # an empty list is not written, as Go's omitempty drops it
    return updated


# --- tokens and who they name ----------------------------------------------------------------------------------


def token_for(namespace: str, name: str, fresh: str) -> str:
    """The token a Secret gets: where the Secret is, then the random part (see the module's docstring)."""
    return f"{_b64url(f'{namespace}/{name}')}.{fresh}"


def token_location(token: str) -> tuple[str, str] | None:
    """The (namespace, name) of the Secret a token says it comes from; None if it is not such a token."""
    where, dot, fresh = token.partition(".")
    if not dot or not fresh:
        return None
    try:
        text = base64.urlsafe_b64decode(where + "=" * (-len(where) % 4)).decode()
    except (binascii.Error, ValueError):
        return None
    namespace, slash, name = text.partition("/")
    return (namespace, name) if slash and namespace and name else None


def authentic(token: str, secret: Obj | None, account: Obj | None) -> bool:
    """Whether ``token`` is the one ``secret`` holds, for ``account`` (the one its annotation names), both there
    and neither being deleted: what upstream checks of a Secret's token on every request."""
    if secret is None or account is None or is_deleting(secret) or is_deleting(account):
        return False
    if secret.get("type") != SERVICE_ACCOUNT_TOKEN:
        return False
    if annotations_of(secret).get(UID_ANNOTATION) != uid_of(account) or not uid_of(account):
        return False
    held = _decoded(as_dict(secret.get("data")).get(TOKEN_KEY))
    return bool(held) and hmac.compare_digest(held, token.encode())


def user_of(secret: Obj, account: Obj) -> Obj | None:
    """The user an authentic token is, as SelfSubjectReview shows it; None when its Secret is labelled invalid."""
    if labels_of(secret).get(INVALID_SINCE_LABEL):
        return None
    namespace = namespace_of(account)
    return {
        "username": f"system:serviceaccount:{namespace}:{name_of(account)}",
        "uid": uid_of(account),
        "groups": [ALL_SERVICE_ACCOUNTS, f"{ALL_SERVICE_ACCOUNTS}:{namespace}", AUTHENTICATED],
    }


def last_used_patch(secret: Obj, today: date) -> Obj | None:
    """The merge patch that labels a used token's Secret with today's date (UTC); None while the label already
    says today (or tomorrow: a clock a little ahead elsewhere), so a token costs one write a day."""
    current = labels_of(secret).get(LAST_USED_LABEL)
    if current in (today.isoformat(), (today + timedelta(days=1)).isoformat()):
        return None
    return {"metadata": {"uid": uid_of(secret), "labels": {LAST_USED_LABEL: today.isoformat()}}}


def _b64url(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _decoded(value: object) -> bytes:
    """A Secret's base64 value as bytes; what does not decode (validation refuses it) as empty."""
    try:
        return base64.b64decode(str(value or ""), validate=True)
    except (binascii.Error, ValueError):
        return b""
