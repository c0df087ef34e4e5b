"""Custom resources against their structural schema: pruning, defaults and validation in upstream's words.

The messages were compared with kube-apiserver 1.37 serving the same schema.
"""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.api.types import Obj
from multiqueue.apiserver.rules import structural

SPEC: Obj = {
    "type": "object",
    "required": ["size"],
    "properties": {
        "size": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number", "exclusiveMaximum": True, "maximum": 1.5, "multipleOf": 0.5},
        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
        "name": {"type": "string", "minLength": 3, "maxLength": 5, "pattern": "^[a-z]+$"},
        "tags": {"type": "array", "maxItems": 2, "minItems": 1, "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 1},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "port": {"x-kubernetes-int-or-string": True},
        "nested": {
            "type": "object",
            "properties": {"deep": {"type": "boolean", "default": True}},
            "default": {},
        },
        "maybe": {"type": "string", "nullable": True},
        "notnull": {"type": "string"},
    },
}
SCHEMA: Obj = {
    "type": "object",
    "properties": {"spec": SPEC, "status": {"type": "object", "properties": {"phase": {"type": "string"}}}},
}


def _widget(**spec: Any) -> Obj:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}


def test_prune_reports_unknown_fields_sorted() -> None:
    obj = {**_widget(size=2, zzz=1, nested={"q": 1}, free={"kept": {"x": 1}}, labels={"a": 1}), "extra": 1}
    assert structural.prune(obj, SCHEMA) == ["extra", "spec.nested.q", "spec.zzz"]
    assert obj == _widget(size=2, nested={}, free={"kept": {"x": 1}}, labels={"a": 1})


def test_prune_keeps_type_meta_and_reports_everything_without_a_schema() -> None:
    obj = _widget(size=2)
    assert structural.prune(obj, None) == ["spec"]
    assert obj == {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}


def test_defaults_fill_absent_fields_and_drop_forbidden_nulls() -> None:
    obj = _widget(size=2, maybe=None, notnull=None)
    structural.apply_defaults(obj, SCHEMA)
    assert obj["spec"] == {"size": 2, "maybe": None, "color": "red", "nested": {"deep": True}}


TYPE = "FieldValueTypeInvalid"
INVALID = "FieldValueInvalid"


@pytest.mark.parametrize(
    ("spec", "errors"),
    [
        pytest.param({"size": 3, "port": "http", "free": {"a": [1]}}, [], id="valid"),
        pytest.param(
            {"size": "big"},
            [
                (
                    TYPE,
                    "spec.size",
                    'Invalid value: "string": spec.size in body must be of type integer: "string"',
                )
            ],
            id="type",
        ),
        pytest.param(
            {"size": 2.5},
            [
                (
                    TYPE,
                    "spec.size",
                    'Invalid value: "number": spec.size in body must be of type integer: "number"',
                ),
                (
                    INVALID,
                    "<nil>",
                    'Invalid value: "": Checked value must be of type integer (default format) in spec.size',
                ),
            ],
            id="fraction-for-integer",
        ),
        pytest.param({"size": 2.0}, [], id="whole-float-is-an-integer"),
        pytest.param(
            {"size": 3, "color": 3},
            [
                (
                    TYPE,
                    "spec.color",
                    'Invalid value: "integer": spec.color in body must be of type string: "integer"',
                ),
                (
                    "FieldValueNotSupported",
                    "spec.color",
                    'Unsupported value: 3: supported values: "red", "blue"',
                ),
            ],
            id="type-and-enum",
        ),
        pytest.param(
            {"size": 11},
            [
                (
                    INVALID,
                    "spec.size",
                    "Invalid value: 11: spec.size in body should be less than or equal to 10",
                )
            ],
            id="maximum",
        ),
        pytest.param(
            {"size": 0},
            [
                (
                    INVALID,
                    "spec.size",
                    "Invalid value: 0: spec.size in body should be greater than or equal to 1",
                )
            ],
            id="minimum",
        ),
        pytest.param(
            {"size": 3, "ratio": 1.5},
            [(INVALID, "spec.ratio", "Invalid value: 1.5: spec.ratio in body should be less than 1.5")],
            id="exclusive-maximum",
        ),
        pytest.param(
            {"size": 3, "ratio": 0.7},
            [(INVALID, "spec.ratio", "Invalid value: 0.7: spec.ratio in body should be a multiple of 0.5")],
            id="multiple-of",
        ),
        pytest.param(
            {"size": 3, "name": "ab"},
            [
                (
                    INVALID,
                    "spec.name",
                    'Invalid value: "ab": spec.name in body should be at least 3 chars long',
                )
            ],
            id="min-length",
        ),
        pytest.param(
            {"size": 3, "name": "abcdef"},
            [("FieldValueTooLong", "spec.name", "Too long: may not be more than 5 bytes")],
            id="max-length",
        ),
        pytest.param(
            {"size": 3, "name": "AB1"},
            [(INVALID, "spec.name", "Invalid value: \"AB1\": spec.name in body should match '^[a-z]+$'")],
            id="pattern",
        ),
        pytest.param(
            {"size": 3, "tags": []},
            [(INVALID, "spec.tags", "Invalid value: 0: spec.tags in body should have at least 1 items")],
            id="min-items",
        ),
        pytest.param(
            {"size": 3, "tags": ["a", "b", "c"]},
            [("FieldValueTooMany", "spec.tags", "Too many: 3: must have at most 2 items")],
            id="max-items",
        ),
        pytest.param(
            {"size": 3, "labels": {"a": 1, "b": 2}},
            [("FieldValueTooMany", "spec.labels", "Too many: 2: must have at most 1 item")],
            id="max-properties",
        ),
        pytest.param(
            {"size": 3, "labels": {"a": "x"}},
            [
                (
                    TYPE,
                    "spec.labels.a",
                    'Invalid value: "string": spec.labels.a in body must be of type integer: "string"',
                )
            ],
            id="additional-properties",
        ),
        pytest.param(
            {"size": 3, "port": True},
            [
                (
                    TYPE,
                    "spec.port",
                    'Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"',
                )
            ],
            id="int-or-string",
        ),
        pytest.param({}, [("FieldValueRequired", "spec.size", "Required value")], id="required"),
    ],
)
def test_validate(spec: Obj, errors: list[tuple[str, str, str]]) -> None:
    found = structural.validate(_widget(**spec), SCHEMA)
    assert [(str(e.type), e.field, e.body()) for e in found] == errors


def test_status_alone_is_named_from_the_status_down() -> None:
    status_schema = SCHEMA["properties"]["status"]
    [error] = structural.validate({"phase": 5}, status_schema, under="status")
    assert (
        error.message()
        == 'status.phase: Invalid value: "integer": phase in body must be of type string: "integer"'
    )


def test_stored_schema_drops_false_flags() -> None:
    schema: Obj = {
        "type": "object",
        "nullable": False,
        "properties": {
            "a": {"type": "array", "uniqueItems": False, "items": {"type": "integer", "nullable": True}}
        },
    }
    structural.stored_schema(schema)
    assert schema == {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "integer", "nullable": True}}},
    }
