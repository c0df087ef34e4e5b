"""Field sets and their FieldsV1 form: what managedFields store, key for key as upstream writes them."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.apiserver.rules.fieldsets import (
    EMPTY,
    FieldsError,
    FieldSet,
    Path,
    field,
    from_paths,
    index,
    key,
    parse_path,
    path_string,
    value,
)

F = field


@pytest.mark.parametrize(
    ("paths", "fields"),
    [
        pytest.param([(F("data"), F("k"))], {"f:data": {"f:k": {}}}, id="leaf-below-a-struct"),
        pytest.param([(F("data"),), (F("data"), F("k"))], {"f:data": {".": {}, "f:k": {}}}, id="member-with-children"),
        pytest.param([(F("b"),), (F("a"),)], {"f:a": {}, "f:b": {}}, id="sorted-by-name"),
        pytest.param([(F("c"), key({"name": "main"}), F("image"))],
                     {"f:c": {'k:{"name":"main"}': {"f:image": {}}}}, id="keyed-item"),
        pytest.param([(F("p"), key({"protocol": "TCP", "containerPort": 80}),)],
                     {"f:p": {'k:{"containerPort":80,"protocol":"TCP"}': {}}}, id="keys-in-name-order"),
        pytest.param([(F("f"), value("a<b"))], {"f:f": {'v:"a\\u003cb"': {}}}, id="value-escaped-as-go"),
        pytest.param([(F("l"), index(2))], {"f:l": {"i:2": {}}}, id="position"),
        pytest.param([(F("x"), value(1)), (F("x"), F("y"))], {"f:x": {"f:y": {}, "v:1": {}}},
                     id="fields-before-values"),
    ],
)  # fmt: skip
def test_fields_v1_encoding(paths: list[Path], fields: dict[str, Any]) -> None:
    encoded = from_paths(*paths).to_fields()
    assert encoded == fields
    assert list(encoded) == list(fields), "keys in upstream's order"
    assert FieldSet.from_fields(fields) == from_paths(*paths)


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param([], id="not-an-object"),
        pytest.param({"fx": {}}, id="no-colon"),
        pytest.param({"k:[1]": {}}, id="key-not-an-object"),
        pytest.param({"i:one": {}}, id="bad-position"),
    ],
)
def test_unreadable_fields_v1_is_an_error(fields: Any) -> None:
    with pytest.raises(FieldsError):
        FieldSet.from_fields(fields)


def test_unknown_element_kinds_are_skipped_as_upstream_does() -> None:
    assert FieldSet.from_fields({"z:x": {}, "f:a": {}}) == from_paths((F("a"),))


A = (F("a"),)
AB = (F("a"), F("b"))
AC = (F("a"), F("c"))


@pytest.mark.parametrize(
    ("left", "right", "union", "difference", "recursive", "intersection"),
    [
        pytest.param([AB], [AC], [AB, AC], [AB], [AB], [], id="siblings"),
        pytest.param([A, AB], [AB], [A, AB], [A], [A], [AB], id="child-removed-parent-kept"),
        pytest.param([AB], [A], [A, AB], [AB], [], [], id="member-removes-below-only-recursively"),
        pytest.param([], [A], [A], [], [], [], id="empty"),
    ],
)  # fmt: skip
def test_set_operations(
    left: list[Path],
    right: list[Path],
    union: list[Path],
    difference: list[Path],
    recursive: list[Path],
    intersection: list[Path],
) -> None:
    a, b = from_paths(*left), from_paths(*right)
    assert a.union(b) == from_paths(*union)
    assert a.difference(b) == from_paths(*difference)
    assert a.recursive_difference(b) == from_paths(*recursive)
    assert a.intersection(b) == from_paths(*intersection)


def test_paths_list_members_before_children_and_has_finds_them() -> None:
    fieldset = from_paths(AB, A, (F("b"),))
    assert list(fieldset.paths()) == [A, (F("b"),), AB]
    assert fieldset.has(AB) and fieldset.has(A) and not fieldset.has(AC) and not EMPTY.has(A)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        pytest.param(parse_path("data.greeting"), ".data.greeting", id="fields"),
        pytest.param((F("spec"), F("containers"), key({"name": "main"}), F("image")),
                     '.spec.containers[name="main"].image', id="key"),
        pytest.param((F("ports"), key({"containerPort": 80, "protocol": "TCP"})),
                     '.ports[containerPort=80,protocol="TCP"]', id="two-keys"),
        pytest.param((F("finalizers"), value("a")), '.finalizers[="a"]', id="value"),
        pytest.param((F("args"), index(0)), ".args[0]", id="index"),
    ],
)  # fmt: skip
def test_paths_print_as_upstream_conflicts_name_them(path: Path, text: str) -> None:
    assert path_string(path) == text


def test_values_compare_as_json_not_python() -> None:
    assert value(1) == value(1.0)
    assert value(True) != value(1)
