"""Reviews a client creates to ask about itself (``kubectl auth can-i``, ``kubectl auth whoami``): answered as
kube-apiserver answers the admin token of an upstream local cluster, and never stored; whoami names whoever the
request authenticated as."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from multiqueue.apiserver.authentication import ADMIN
from multiqueue.apiserver.registry import Registry
from multiqueue.apiserver.rest import ApiError
from multiqueue.apiserver.reviews import answer

NOW = datetime(2026, 11, 25, 2, 0, 0, tzinfo=UTC)
REGISTRY = Registry()
ACCESS = REGISTRY.lookup("authorization.k8s.io", "v1", "selfsubjectaccessreviews")
WHOAMI = REGISTRY.lookup("authentication.k8s.io", "v1", "selfsubjectreviews")


def test_both_are_served_for_create_only() -> None:
    assert ACCESS is not None and WHOAMI is not None
    assert ACCESS.verbs == WHOAMI.verbs == ("create",)


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"resourceAttributes": {"namespace": "default", "verb": "create", "group": "batch", "resource": "jobs"}}, id="resource"),
        pytest.param({"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}, id="non-resource"),
    ],
)  # fmt: skip
def test_the_admin_may_do_anything(spec: dict[str, object]) -> None:
    assert ACCESS is not None
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": spec}
    assert answer(ACCESS, body, NOW, ADMIN) == {**body, "metadata": {}, "status": {"allowed": True}}


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({}, id="neither"),
        pytest.param({"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/", "verb": "get"}}, id="both"),
    ],
)  # fmt: skip
def test_an_access_review_asks_exactly_one_question(spec: dict[str, object]) -> None:
    assert ACCESS is not None
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": spec}
    with pytest.raises(ApiError) as refused:
        answer(ACCESS, body, NOW, ADMIN)
    detail = "exactly one of nonResourceAttributes or resourceAttributes must be specified"
    # As kube-apiserver v1.37.2 writes it, kind and name left empty.
    assert refused.value.status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'.authorization.k8s.io "" is invalid: spec: Invalid value: null: {detail}',
        "reason": "Invalid",
        "details": {
            "group": "authorization.k8s.io",
            "causes": [
                {"reason": "FieldValueInvalid", "message": f"Invalid value: null: {detail}", "field": "spec"}
            ],
        },
        "code": 422,
    }


def test_whoami_names_the_admin_and_its_groups() -> None:
    assert WHOAMI is not None
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    assert answer(WHOAMI, body, NOW, ADMIN) == {
        **body,
        "metadata": {"creationTimestamp": "2026-11-25T02:00:00Z"},
        "status": {
            "userInfo": {
                "username": "admin",
                "uid": "admin",
                "groups": ["system:masters", "system:authenticated"],
            }
        },
    }


def test_whoami_names_the_user_the_request_authenticated_as() -> None:
    assert WHOAMI is not None
    account = {
        "username": "system:serviceaccount:ns:runner",
        "uid": "sa-1",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"],
    }
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    assert answer(WHOAMI, body, NOW, account)["status"] == {"userInfo": account}
