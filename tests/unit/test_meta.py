"""Object metadata rules: names, labels, immutability on update, conditions, timestamps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from multiqueue.api import meta


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        pytest.param("my-name", True, id="simple"),
        pytest.param("a" * 63, True, id="63-chars"),
        pytest.param("a" * 64, False, id="64-chars"),
        pytest.param("My-Name", False, id="upper-case"),
        pytest.param("-name", False, id="leading-dash"),
        pytest.param("a.b", False, id="dot-not-in-label"),
    ],
)
def test_dns1123_label(value: str, ok: bool) -> None:
    assert (meta.dns1123_label_errors(value) == []) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        pytest.param("example.com", True, id="subdomain"),
        pytest.param("a" * 253, True, id="253-chars"),
        pytest.param("a" * 254, False, id="254-chars"),
        pytest.param("a..b", False, id="empty-part"),
    ],
)
def test_dns1123_subdomain(value: str, ok: bool) -> None:
    assert (meta.dns1123_subdomain_errors(value) == []) is ok


@pytest.mark.parametrize(
    ("labels", "problem"),
    [
        pytest.param({"app": "web", "example.com/tier": "front_end.1"}, None, id="valid"),
        pytest.param({"": "x"}, "name part must be non-empty", id="empty-key"),
        pytest.param({"/x": "y"}, "prefix part must be non-empty", id="empty-prefix"),
        pytest.param({"Bad_Prefix/x": "y"}, "prefix part a lowercase RFC 1123 subdomain", id="bad-prefix"),
        pytest.param({"app": "-web"}, "a valid label must be an empty string", id="bad-value"),
        pytest.param({"app": "x" * 64}, "must be no more than 63 bytes", id="long-value"),
        pytest.param({"app": 3}, "must be a string", id="non-string-value"),
    ],
)
def test_validate_labels(labels: dict[str, object], problem: str | None) -> None:
    errs = meta.validate_labels(labels, "metadata.labels")
    if problem is None:
        assert errs == []
    else:
        assert any(problem in e.message() for e in errs), errs
        assert all(e.field.startswith("metadata.labels") for e in errs)


def test_object_meta_requires_name_or_generate_name() -> None:
    errs = meta.validate_object_meta({"namespace": "default"}, namespaced=True)
    assert [e.message() for e in errs] == ["metadata.name: Required value: name or generateName is required"]
    assert meta.validate_object_meta({"generateName": "x-", "namespace": "default"}, namespaced=True) == []


def test_object_meta_namespace_rules() -> None:
    assert [e.field for e in meta.validate_object_meta({"name": "x"}, namespaced=True)] == [
        "metadata.namespace"
    ]
    cluster_scoped = meta.validate_object_meta({"name": "x", "namespace": "a"}, namespaced=False)
    assert [e.message() for e in cluster_scoped] == [
        "metadata.namespace: Forbidden: not allowed on this type"
    ]


def test_object_meta_update_keeps_identity() -> None:
    old = {"name": "x", "namespace": "ns", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"}
    assert meta.validate_object_meta_update(dict(old, labels={"a": "b"}), old) == []
    errs = meta.validate_object_meta_update(dict(old, uid="u2"), old)
    assert [e.message() for e in errs] == ['metadata.uid: Invalid value: "u2": field is immutable']


def test_malformed_meta_never_raises() -> None:
    for garbage in (None, [], "x", 3, {"name": 5, "labels": [1], "annotations": "a"}):
        meta.validate_object_meta(garbage, namespaced=True)
        meta.validate_object_meta_update(garbage, garbage)
        assert isinstance(meta.key_of(garbage), str)


def test_set_condition_moves_transition_time_only_on_flip() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    conds: list[dict[str, object]] = []
    assert meta.set_condition(conds, "Suspended", "True", "JobSuspended", "Job suspended", t0)
    assert not meta.set_condition(
        conds, "Suspended", "True", "JobSuspended", "Job suspended", t0 + timedelta(1)
    )
    assert meta.set_condition(conds, "Suspended", "False", "JobResumed", "Job resumed", t0 + timedelta(2))
    assert conds[0]["lastTransitionTime"] == "2026-01-03T00:00:00Z"
    assert not meta.condition_is_true(conds, "Suspended")
    assert meta.find_condition(conds, "Complete") is None


def test_owner_references() -> None:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "uid": "u"}}
    child = {"metadata": {"ownerReferences": [meta.owner_reference(owner)]}}
    assert meta.is_controlled_by(child, owner)
    assert not meta.is_controlled_by(child, {"metadata": {"uid": "other"}})
    assert meta.controller_ref({"metadata": {"ownerReferences": "bad"}}) is None


def test_time_round_trip() -> None:
    moment = datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    assert meta.parse_time(meta.format_time(moment)) == moment
    assert meta.parse_time("not a time") is None
    assert meta.parse_time(None) is None
