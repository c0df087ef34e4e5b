"""Service-account token Secrets, decided as upstream's token controller and token check decide them
(multiqueue/apiserver/rules/serviceaccounts.py): tables of cases, no server."""

from __future__ import annotations

import base64
from datetime import date
from typing import Any

import pytest

from multiqueue.apiserver.rules.serviceaccounts import (
    AccountKey,
    Delete,
    SecretKey,
    Write,
    account_key,
    authentic,
    decide_account,
    decide_secret,
    last_used_patch,
    secret_key,
    token_for,
    token_location,
    user_of,
)

Obj = dict[str, Any]
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
TOKEN_TYPE = "kubernetes.io/service-account-token"
NAME_ANNOTATION = "kubernetes.io/service-account.name"
UID_ANNOTATION = "kubernetes.io/service-account.uid"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def account(name: str = "runner", uid: str = "sa-1", **fields: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": "7"},
        **fields,
    }


def secret(
    name: str = "runner-token",
    uid: str = "s-1",
    account_name: str = "runner",
    account_uid: str | None = None,
    data: Obj | None = None,
    type_: str = TOKEN_TYPE,
    labels: Obj | None = None,
) -> Obj:
    annotations = {NAME_ANNOTATION: account_name}
    if account_uid is not None:
        annotations[UID_ANNOTATION] = account_uid
    meta: Obj = {
        "name": name,
        "namespace": "ns",
        "uid": uid,
        "resourceVersion": "9",
        "annotations": annotations,
    }
    if labels is not None:
        meta["labels"] = labels
    body: Obj = {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": type_}
    if data is not None:
        body["data"] = data
    return body


def filled(token: str = "ns/runner-token") -> Obj:
    return {"token": b64(token), "namespace": b64("ns"), "ca.crt": b64(CA)}


def test_work_items_carry_what_is_needed_once_the_object_is_gone() -> None:
    assert secret_key(secret(account_uid="sa-1")) == SecretKey("ns", "runner-token", "s-1", "runner", "sa-1")
    assert secret_key(secret()) == SecretKey("ns", "runner-token", "s-1", "runner", "")
    assert secret_key(secret(type_="Opaque")) is None
    assert secret_key(secret(account_name="")) is None
    assert account_key(account()) == AccountKey("ns", "runner", "sa-1")


def test_a_new_token_secret_gets_token_namespace_ca_and_the_account_uid() -> None:
    new = secret(data={"extra": b64("kept")})
    [action] = decide_secret(secret_key(new) or pytest.fail(), new, account(), CA, "r4nd0m")
    assert isinstance(action, Write) and action.resource == "secrets"
    written = action.obj
    token = base64.b64decode(written["data"]["token"]).decode()
    assert token == token_for("ns", "runner-token", "r4nd0m")
    assert token_location(token) == ("ns", "runner-token")
    assert written["data"]["namespace"] == b64("ns")
    assert written["data"]["ca.crt"] == b64(CA)
    assert written["data"]["extra"] == b64("kept")
    assert written["metadata"]["annotations"] == {NAME_ANNOTATION: "runner", UID_ANNOTATION: "sa-1"}
    assert written["metadata"]["resourceVersion"] == "9", (
        "written over the version read: a race is a conflict"
    )
    assert "data" not in new or "token" not in new["data"], "the input is left alone"


@pytest.mark.parametrize(
    ("data", "ca", "changed"),
    [
        pytest.param(filled(), CA, None, id="complete"),
        pytest.param({**filled(), "ca.crt": b64("another CA")}, CA, {"ca.crt": b64(CA)}, id="ca-differs"),
        pytest.param({k: v for k, v in filled().items() if k != "ca.crt"}, None, None, id="no-ca-no-tls"),
        pytest.param({**filled(), "namespace": ""}, CA, {"namespace": b64("ns")}, id="namespace-empty"),
        pytest.param({**filled(), "token": b64("given")}, CA, None, id="token-given-kept"),
    ],
)
def test_only_what_is_missing_or_wrong_is_written(data: Obj, ca: str | None, changed: Obj | None) -> None:
    current = secret(account_uid="sa-1", data=data)
    actions = decide_secret(secret_key(current) or pytest.fail(), current, account(), ca, "r4nd0m")
    if changed is None:
        assert actions == []
        return
    [action] = actions
    assert isinstance(action, Write)
    assert action.obj["data"] == {**data, **changed}


@pytest.mark.parametrize(
    ("the_account", "account_uid"),
    [
        pytest.param(None, None, id="no-such-account"),
        pytest.param(account(uid="sa-2"), "sa-1", id="account-recreated"),
    ],
)
def test_a_token_secret_whose_account_is_missing_is_deleted(
    the_account: Obj | None, account_uid: str | None
) -> None:
    current = secret(account_uid=account_uid)
    actions = decide_secret(secret_key(current) or pytest.fail(), current, the_account, CA, "r4nd0m")
    assert actions == [Delete("ns", "runner-token", "s-1")]


def test_an_item_of_an_older_version_of_the_secret_decides_nothing() -> None:
    old_key = SecretKey("ns", "runner-token", "s-1", "runner", "")
    now = secret(account_uid="sa-1", data={"namespace": ""})
    assert decide_secret(old_key, now, account(), CA, "r4nd0m") == []


@pytest.mark.parametrize(
    ("current", "references", "kept"),
    [
        pytest.param(
            None, [{"name": "runner-token"}, {"name": "other"}], [{"name": "other"}], id="one-of-two"
        ),
        pytest.param(None, [{"name": "runner-token"}], None, id="the-only-one"),
        pytest.param(secret(uid="s-2"), [{"name": "runner-token"}], None, id="recreated-under-the-name"),
    ],
)
def test_a_deleted_token_secret_leaves_its_accounts_list(
    current: Obj | None, references: list[Obj], kept: list[Obj] | None
) -> None:
    key = SecretKey("ns", "runner-token", "s-1", "runner", "sa-1")
    [action] = decide_secret(key, current, account(secrets=references), CA, "r4nd0m")
    assert isinstance(action, Write) and action.resource == "serviceaccounts"
    assert action.obj.get("secrets") == kept
    assert "secrets" in action.obj or kept is None


@pytest.mark.parametrize(
    "the_account",
    [
        pytest.param(None, id="account-gone-too"),
        pytest.param(account(uid="sa-2", secrets=[{"name": "runner-token"}]), id="another-account"),
        pytest.param(account(secrets=[{"name": "other"}]), id="not-listed"),
    ],
)
def test_a_deleted_token_secret_otherwise_changes_nothing(the_account: Obj | None) -> None:
    key = SecretKey("ns", "runner-token", "s-1", "runner", "sa-1")
    assert decide_secret(key, None, the_account, CA, "r4nd0m") == []


def test_an_accounts_token_secrets_go_with_it() -> None:
    key = AccountKey("ns", "runner", "sa-1")
    secrets = [
        secret("mine", "s-1", account_uid="sa-1"),
        secret("mine-not-filled-yet", "s-2"),
        secret("of-a-newer-runner", "s-3", account_uid="sa-2"),
        secret("of-another", "s-4", account_name="other"),
        secret("opaque", "s-5", type_="Opaque"),
    ]
    mine = [Delete("ns", "mine", "s-1"), Delete("ns", "mine-not-filled-yet", "s-2")]
    assert decide_account(key, None, secrets) == mine
    # Re-created under the same name: the old one's tokens go (a Secret without the UID yet too, as upstream).
    assert decide_account(key, account(uid="sa-2"), secrets) == mine
    assert decide_account(key, account(), secrets) == []


@pytest.mark.parametrize(
    "token",
    [
        "",
        "no-dot",
        "bnMvcnVubmVyLXRva2Vu.",
        "!!!.abc",
        f"{base64.urlsafe_b64encode(b'no-slash').decode()}.abc",
        "\u00e9.x",
    ],
)
def test_a_token_of_another_shape_names_no_secret(token: str) -> None:
    assert token_location(token) is None


TOKEN = token_for("ns", "runner-token", "r4nd0m")
GOOD = secret(account_uid="sa-1", data=filled(TOKEN))


@pytest.mark.parametrize(
    ("token", "the_secret", "the_account", "ok"),
    [
        pytest.param(TOKEN, GOOD, account(), True, id="authentic"),
        pytest.param(TOKEN + "x", GOOD, account(), False, id="another-token"),
        pytest.param(TOKEN, None, account(), False, id="secret-deleted"),
        pytest.param(TOKEN, GOOD, None, False, id="account-deleted"),
        pytest.param(TOKEN, GOOD, account(uid="sa-2"), False, id="account-recreated"),
        pytest.param(TOKEN, {**GOOD, "metadata": {**GOOD["metadata"], "deletionTimestamp": "x"}}, account(), False, id="secret-deleting"),
        pytest.param(TOKEN, GOOD, account(metadata={"name": "runner", "namespace": "ns", "uid": "sa-1", "deletionTimestamp": "x"}), False, id="account-deleting"),
        pytest.param(TOKEN, secret(account_uid="sa-1", data=filled(TOKEN), type_="Opaque"), account(), False, id="not-a-token-secret"),
        pytest.param(TOKEN, secret(data=filled(TOKEN)), account(), False, id="uid-not-filled-in"),
        pytest.param(TOKEN, secret(account_uid="sa-1", data={}), account(), False, id="no-token-yet"),
    ],
)  # fmt: skip
def test_a_token_is_authentic_while_its_secret_and_account_hold_it(
    token: str, the_secret: Obj | None, the_account: Obj | None, ok: bool
) -> None:
    assert authentic(token, the_secret, the_account) is ok


def test_the_user_is_the_service_account_in_its_groups() -> None:
    assert user_of(GOOD, account()) == {
        "username": "system:serviceaccount:ns:runner",
        "uid": "sa-1",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"],
    }
    invalid = secret(
        account_uid="sa-1",
        data=filled(TOKEN),
        labels={"kubernetes.io/legacy-token-invalid-since": "2026-01-01"},
    )
    assert user_of(invalid, account()) is None


@pytest.mark.parametrize(
    ("labels", "patched"),
    [
        pytest.param(None, True, id="never-used"),
        pytest.param({"kubernetes.io/legacy-token-last-used": "2026-11-24"}, True, id="used-before"),
        pytest.param({"kubernetes.io/legacy-token-last-used": "2026-11-25"}, False, id="used-today"),
        pytest.param({"kubernetes.io/legacy-token-last-used": "2026-11-26"}, False, id="a-clock-ahead"),
    ],
)
def test_a_used_token_is_labelled_once_a_day(labels: Obj | None, patched: bool) -> None:
    used = secret(account_uid="sa-1", data=filled(TOKEN), labels=labels)
    expected = {"metadata": {"uid": "s-1", "labels": {"kubernetes.io/legacy-token-last-used": "2026-11-25"}}}
    assert last_used_patch(used, date(2026, 11, 25)) == (expected if patched else None)
