"""Unknown fields in request bodies, found against each kind's Go type as kube-apiserver's decoder finds them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from multiqueue.apiserver.decoding import (
    check_directive,
    decode,
    decode_apply,
    drop_unknown,
    read_yaml,
    strict_error,
    warning,
)
from multiqueue.apiserver.registry import Registry
from multiqueue.apiserver.rest import ApiError

REGISTRY = Registry()
CONFIGMAPS = REGISTRY.lookup("", "v1", "configmaps")
JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "j", "labels": {"any-key": "is fine"}},
    "spec": {
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": 1}}}],
            }
        }
    },
}


@pytest.mark.parametrize(
    ("where", "key", "path"),
    [
        pytest.param((), "extra", "extra", id="top-level"),
        pytest.param(("metadata",), "labelz", "metadata.labelz", id="typo-in-metadata"),
        pytest.param(("spec",), "parallelizm", "spec.parallelizm", id="typo-in-spec"),
        pytest.param(("spec", "template", "spec", "containers", 0), "bogus", "spec.template.spec.containers[0].bogus", id="in-a-list-item"),
        pytest.param(("spec", "template", "spec", "containers", 0, "resources"), "limitz", "spec.template.spec.containers[0].resources.limitz", id="deep"),
    ],
)  # fmt: skip
def test_an_unknown_field_is_named_by_its_path_and_dropped(
    where: tuple[Any, ...], key: str, path: str
) -> None:
    body = copy.deepcopy(JOB)
    target: Any = body
    for step in where:
        target = target[step]
    target[key] = 1
    assert drop_unknown("V1Job", body) == [path]
    assert body == JOB


def test_maps_take_any_key_and_known_fields_stay() -> None:
    body = copy.deepcopy(JOB)
    assert drop_unknown("V1Job", body) == []
    assert body == JOB


def test_several_are_named_in_document_order() -> None:
    body = {"metadata": {"name": "x", "labelz": {}}, "extra": 1, "data": {"a": "b"}, "spec": {"foo": 2}}
    assert drop_unknown("V1ConfigMap", body) == ["metadata.labelz", "extra", "spec"]


def test_strict_names_every_unknown_field_as_upstream_does() -> None:
    # kube-apiserver v1.37.2's answer to the same body under fieldValidation=Strict.
    assert strict_error("ConfigMap", "v1", ["metadata.labelz", "extra", "spec"])["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
        'unknown field "metadata.labelz", unknown field "extra", unknown field "spec"'
    )


@pytest.mark.parametrize(
    ("directive", "warned"),
    [
        pytest.param("", [warning('unknown field "extra"')], id="default-warns"),
        pytest.param("Warn", [warning('unknown field "extra"')], id="warn"),
        pytest.param("Ignore", [], id="ignore"),
    ],
)
def test_warn_and_ignore_drop_the_field(directive: str, warned: list[str]) -> None:
    assert CONFIGMAPS is not None
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "extra": 1}
    assert decode(CONFIGMAPS, body, directive) == warned
    assert "extra" not in body
    assert warned == [] or warned == ['299 - "unknown field \\"extra\\""']


@pytest.mark.parametrize(
    ("directive", "code", "reason"),
    [
        pytest.param("Strict", 400, "BadRequest", id="strict-refuses"),
        pytest.param("strict", 422, "Invalid", id="directives-are-case-sensitive"),
    ],
)
def test_strict_and_unsupported_directives_are_refused(directive: str, code: int, reason: str) -> None:
    assert CONFIGMAPS is not None
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "extra": 1}
    with pytest.raises(ApiError) as refused:
        check_directive(directive, "CreateOptions")
        decode(CONFIGMAPS, body, directive)
    assert (refused.value.code, refused.value.status["reason"]) == (code, reason)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(b"kind: ConfigMap\ndata:\n  a: '1'\n", {"kind": "ConfigMap", "data": {"a": "1"}}, id="plain"),
        pytest.param(b"a: 2024-01-01T00:00:00Z\nb: 2024-01-01\n", {"a": "2024-01-01T00:00:00Z", "b": "2024-01-01"}, id="timestamps-stay-strings"),
        pytest.param(b"2: x\ntrue: y\n~: z\n", {"2": "x", "true": "y", "null": "z"}, id="keys-become-strings"),
        pytest.param(b"a: yes\nb: 1.5\nc: [1, two]\n", {"a": True, "b": 1.5, "c": [1, "two"]}, id="yaml-1.1-scalars"),
        pytest.param(b"- a\n", ["a"], id="not-an-object-is-left-to-the-caller"),
    ],
)  # fmt: skip
def test_yaml_bodies_read_as_the_json_they_stand_for(raw: bytes, expected: Any) -> None:
    assert read_yaml(raw, "ConfigMap") == expected


@pytest.mark.parametrize(
    ("raw", "complaint"),
    [
        pytest.param(b"a: b: c", "yaml: mapping values are not allowed in this context (613a20623a2063)", id="first-line-has-no-number"),
        pytest.param(b"x: 1\na: b: c\n", "yaml: line 2: mapping values are not allowed in this context (783a20310a613a20623a20630a)", id="scanner-error"),
        pytest.param(b"kind: ConfigMap\nmetadata:\n  name: y\n data: x\n", "yaml: line 3: did not find expected key (6b696e643a20436f6e6669674d61700a6d657461646174613a0a20206e61 ...)", id="parser-error"),
        pytest.param(b'a: "x', "yaml: found unexpected end of stream (613a202278)", id="unterminated"),
        pytest.param(b"a: \x0f", "yaml: control characters are not allowed (613a200f)", id="control-character"),
        pytest.param(b"a: " + b"[" * 201 + b"]" * 201, "exceeded max depth of 200 (613a205b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b ...)", id="too-deep"),
        pytest.param(b"a: " + b"[" * 5000 + b"]" * 5000, "exceeded max depth of 200 (613a205b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b ...)", id="past-the-parsers-recursion"),
    ],
)  # fmt: skip
def test_broken_yaml_is_refused_in_upstreams_words(raw: bytes, complaint: str) -> None:
    with pytest.raises(ApiError) as refused:
        read_yaml(raw, "ConfigMap")
    assert refused.value.status["code"] == 400
    assert refused.value.status["reason"] == "BadRequest"
    assert (
        refused.value.status["message"]
        == f"the object provided is unrecognized (must be of type ConfigMap): {complaint}"
    )


REPEATED = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  a: '1'\n  a: '2'\n  when: 2026-01-01T00:00:00Z\n"


@pytest.mark.parametrize(
    ("directive", "warned"),
    [
        pytest.param("", [], id="default-ignores"),
        pytest.param("Ignore", [], id="ignore"),
        pytest.param("Warn", ['299 - "line 6: key \\"a\\" already set in map"'], id="warn"),
    ],
)
def test_apply_bodies_are_yaml_whose_last_repeated_key_wins(directive: str, warned: list[str]) -> None:
    config, warnings = decode_apply(REPEATED, directive)
    assert config["data"] == {"a": "2", "when": "2026-01-01T00:00:00Z"}, "timestamps stay strings"
    assert warnings == warned


@pytest.mark.parametrize(
    ("body", "directive", "message"),
    [
        pytest.param(REPEATED, "Strict", 'error strict decoding patch: error converting YAML to JSON: yaml: '
                     'unmarshal errors:\n  line 6: key "a" already set in map', id="strict-refuses-repeats"),
        pytest.param("data: [", "", "error encoding patch: yaml: line 1: expected the node content, but found "
                     "'<stream end>'", id="not-yaml"),
        pytest.param("- a", "", "error decoding patch: json: cannot unmarshal array into Go value of type "
                     "map[string]interface {}", id="not-an-object"),
        pytest.param("a: \x17", "", "error encoding patch: yaml: control characters are not allowed",
                     id="control-character"),
        pytest.param("a: " + "[" * 300 + "]" * 300, "", "error decoding patch: exceeded max depth of 200",
                     id="too-deep"),
    ],
)  # fmt: skip
def test_apply_bodies_that_are_refused(body: str, directive: str, message: str) -> None:
    with pytest.raises(ApiError) as refused:
        decode_apply(body, directive)
    assert (refused.value.code, refused.value.status["message"]) == (400, message)
