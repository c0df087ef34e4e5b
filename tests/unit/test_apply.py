"""Server-side apply's algorithm on a small schema: field sets, comparison, merge, prune, conflicts, checks."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.apiserver.rules import apply
from multiqueue.apiserver.rules.apply import ABSENT, Conflicts, VersionedSet
from multiqueue.apiserver.rules.fieldsets import FieldSet, path_string
from multiqueue.apiserver.rules.schemas import Schema

REF = "#/components/schemas/"
DEFINITIONS: dict[str, Any] = {
    "Widget": {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
            "spec": {"$ref": REF + "Spec"},
        },
    },
    "Spec": {
        "type": "object",
        "properties": {
            "size": {"type": "integer"},
            "color": {"type": "string"},
            "enabled": {"type": "boolean"},
            "items": {
                "type": "array",
                "items": {"$ref": REF + "Item"},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
            "ports": {
                "type": "array",
                "items": {"$ref": REF + "Port"},
                "x-kubernetes-patch-strategy": "merge",
                "x-kubernetes-patch-merge-key": "port",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["port", "protocol"],
            },
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "args": {"type": "array", "items": {"type": "string"}},
            "selector": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "x-kubernetes-map-type": "atomic",
            },
            "ref": {"$ref": REF + "Ref"},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    },
    "Item": {"type": "object", "properties": {"name": {"type": "string"}, "value": {"type": "string"}}},
    "Port": {
        "type": "object",
        "properties": {"port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}},
    },
    "Ref": {
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "properties": {"kind": {"type": "string"}, "name": {"type": "string"}},
    },
}
WIDGET = Schema(DEFINITIONS).root("Widget")


def spec(**fields: Any) -> dict[str, Any]:
    return {"spec": fields}


@pytest.mark.parametrize(
    ("obj", "fields"),
    [
        pytest.param(spec(size=1), {"f:spec": {"f:size": {}}}, id="struct-fields-are-not-members"),
        pytest.param({"metadata": {"labels": {"a": "b"}}}, {"f:metadata": {"f:labels": {"f:a": {}}}},
                     id="map-entries-are-members"),
        pytest.param(spec(items=[{"name": "x", "value": "1"}]),
                     {"f:spec": {"f:items": {'k:{"name":"x"}': {".": {}, "f:name": {}, "f:value": {}}}}},
                     id="keyed-items-are-members"),
        pytest.param(spec(ports=[{"port": 80}]),
                     {"f:spec": {"f:ports": {'k:{"port":80,"protocol":"TCP"}': {".": {}, "f:port": {}}}}},
                     id="missing-key-takes-its-default"),
        pytest.param(spec(tags=["b", "a"]), {"f:spec": {"f:tags": {'v:"a"': {}, 'v:"b"': {}}}}, id="set"),
        pytest.param(spec(args=["x"], selector={"a": "b"}, ref={"name": "n"}),
                     {"f:spec": {"f:args": {}, "f:ref": {}, "f:selector": {}}}, id="atomic-values-are-leaves"),
        pytest.param(spec(extra={"deep": {"er": 1}}), {"f:spec": {"f:extra": {"f:deep": {".": {}, "f:er": {}}}}},
                     id="preserved-unknown-fields-are-granular-entries"),
        pytest.param({"metadata": {"labels": {}}, "spec": None}, {"f:metadata": {"f:labels": {}}, "f:spec": {}},
                     id="empty-and-null-are-members"),
        pytest.param(spec(tags=[]), {}, id="empty-granular-list-is-nothing"),
    ],
)  # fmt: skip
def test_object_fields(obj: dict[str, Any], fields: dict[str, Any]) -> None:
    assert apply.object_fields(obj, WIDGET).to_fields() == fields


@pytest.mark.parametrize(
    ("old", "new", "added", "modified", "removed"),
    [
        pytest.param(spec(size=1), spec(size=2), {}, {"f:spec": {"f:size": {}}}, {}, id="modified"),
        pytest.param({}, spec(size=2), {"f:spec": {".": {}, "f:size": {}}}, {}, {}, id="new-struct-is-added-too"),
        pytest.param(spec(size=1, color="r"), spec(size=1), {}, {}, {"f:spec": {"f:color": {}}}, id="removed"),
        pytest.param(spec(items=[{"name": "x", "value": "1"}]), spec(items=[{"name": "x", "value": "2"}]),
                     {}, {"f:spec": {"f:items": {'k:{"name":"x"}': {"f:value": {}}}}}, {}, id="keyed-item-changed"),
        pytest.param(spec(args=["a"]), spec(args=["a", "b"]), {}, {"f:spec": {"f:args": {}}}, {},
                     id="atomic-list-changes-as-a-whole"),
        pytest.param(ABSENT, spec(size=1), {"f:spec": {".": {}, "f:size": {}}}, {}, {}, id="from-nothing"),
        pytest.param(spec(size=1), spec(size=1.0), {}, {}, {}, id="equal-numbers"),
    ],
)  # fmt: skip
def test_compare(old: Any, new: Any, added: Any, modified: Any, removed: Any) -> None:
    comparison = apply.compare(old, new, WIDGET)
    assert comparison.added.to_fields() == added
    assert comparison.modified.to_fields() == modified
    assert comparison.removed.to_fields() == removed


@pytest.mark.parametrize(
    ("live", "config", "merged"),
    [
        # The order cases are upstream's (structured-merge-diff's merge tests of a set of strings).
        pytest.param(["a", "b", "c"], ["a", "b"], ["a", "b", "c"], id="subset"),
        pytest.param(["a", "b"], ["b", "a"], ["b", "a"], id="reordered"),
        pytest.param(["a", "b", "c", "g", "f"], ["c", "d", "e", "f"], ["a", "b", "c", "g", "d", "e", "f"],
                     id="interleaved"),
        pytest.param(["a", "b", "c", "d"], ["d", "e", "f", "a"], ["b", "c", "d", "e", "f", "a"], id="moved"),
        pytest.param(["c", "d", "e", "f", "g", "h", "i", "j"], ["2", "h", "3", "e", "4", "k", "l"],
                     ["c", "d", "f", "g", "2", "h", "i", "j", "3", "e", "4", "k", "l"], id="shuffled"),
        pytest.param(["a", "b", "b"], ["c"], ["a", "b", "b", "c"], id="duplicates-in-live-kept"),
        pytest.param(["a", "b", "c"], [], ["a", "b", "c"], id="empty-config"),
    ],
)  # fmt: skip
def test_merge_orders_sets_as_upstream(live: list[str], config: list[str], merged: list[str]) -> None:
    assert apply.merge(spec(tags=live), spec(tags=config), WIDGET) == spec(tags=merged)


@pytest.mark.parametrize(
    ("live", "config", "merged"),
    [
        pytest.param(spec(size=1, color="r"), spec(size=2), spec(size=2, color="r"), id="struct-merges"),
        pytest.param(spec(items=[{"name": "x", "value": "1"}, {"name": "y"}]),
                     spec(items=[{"name": "y", "value": "2"}]),
                     spec(items=[{"name": "x", "value": "1"}, {"name": "y", "value": "2"}]), id="keyed-items-merge"),
        pytest.param(spec(args=["a", "b"]), spec(args=["c"]), spec(args=["c"]), id="atomic-list-replaced"),
        pytest.param(spec(selector={"a": "1"}), spec(selector={"b": "2"}), spec(selector={"b": "2"}),
                     id="atomic-map-replaced"),
        pytest.param(spec(ref={"kind": "K", "name": "n"}), spec(ref={"name": "m"}), spec(ref={"name": "m"}),
                     id="atomic-struct-replaced"),
        pytest.param({"metadata": {"labels": {"a": "1"}}}, {"metadata": {"labels": {"b": "2"}}},
                     {"metadata": {"labels": {"a": "1", "b": "2"}}}, id="granular-map-merges"),
    ],
)  # fmt: skip
def test_merge(live: Any, config: Any, merged: Any) -> None:
    assert apply.merge(live, config, WIDGET) == merged


def owners(**sets: dict[str, Any]) -> dict[str, VersionedSet]:
    return {
        name: VersionedSet(FieldSet.from_fields(fields), "v1", name.startswith("apply"))
        for name, fields in sets.items()
    }


def test_apply_removes_what_the_manager_no_longer_applies_unless_another_owns_it() -> None:
    live = spec(size=1, color="r", items=[{"name": "x"}, {"name": "y"}])
    managers = owners(
        apply_a={
            "f:spec": {"f:size": {}, "f:color": {}, "f:items": {'k:{"name":"x"}': {".": {}, "f:name": {}}}}
        },
        apply_b={"f:spec": {"f:color": {}, "f:items": {'k:{"name":"y"}': {".": {}, "f:name": {}}}}},
    )
    new, after = apply.apply(live, spec(size=2), WIDGET, "v1", managers, "apply_a", False)
    assert new == spec(size=2, color="r", items=[{"name": "y"}])
    assert after["apply_a"].fields.to_fields() == {"f:spec": {"f:size": {}}}
    assert after["apply_b"] == managers["apply_b"]


def test_apply_conflicts_name_each_field_another_manager_owns() -> None:
    live = spec(size=1, color="r")
    managers = owners(update={"f:spec": {"f:size": {}, "f:color": {}}})
    with pytest.raises(Conflicts) as raised:
        apply.apply(live, spec(size=2, color="b"), WIDGET, "v1", managers, "apply_a", False)
    assert [(c.manager, path_string(c.path)) for c in raised.value.conflicts] == [
        ("update", ".spec.color"),
        ("update", ".spec.size"),
    ]


def test_forced_apply_takes_the_fields_and_same_values_are_shared() -> None:
    live = spec(size=1, color="r")
    managers = owners(update={"f:spec": {"f:size": {}, "f:color": {}}})
    new, after = apply.apply(live, spec(size=2, color="r"), WIDGET, "v1", managers, "apply_a", True)
    assert new == spec(size=2, color="r")
    assert after["update"].fields.to_fields() == {"f:spec": {"f:color": {}}}
    assert after["apply_a"].fields.to_fields() == {"f:spec": {"f:color": {}, "f:size": {}}}


def test_apply_that_changes_nothing_returns_absent() -> None:
    new, after = apply.apply(spec(size=1), spec(size=1), WIDGET, "v1", {}, "apply_a", False)
    assert new is ABSENT and after["apply_a"].fields.to_fields() == {"f:spec": {"f:size": {}}}


def test_update_owns_what_it_changed_and_takes_it_from_others() -> None:
    managers = owners(apply_a={"f:spec": {"f:size": {}, "f:color": {}}})
    after = apply.update(spec(size=1, color="r"), spec(size=2), WIDGET, "v1", managers, "update")
    assert after["update"].fields.to_fields() == {"f:spec": {"f:size": {}}}
    assert "apply_a" not in after, "its size was taken and its color removed"


@pytest.mark.parametrize(
    ("config", "problems"),
    [
        pytest.param(spec(size=1, items=[{"name": "x"}]), [], id="fits"),
        pytest.param({"bogus": 1}, [".bogus: field not declared in schema"], id="unknown-field"),
        pytest.param(spec(color=1), [".spec.color: expected string, got &value.valueUnstructured{Value:1}"],
                     id="wrong-scalar"),
        pytest.param(spec(size="x"), [".spec.size: expected numeric (int or float), got string"], id="not-a-number"),
        pytest.param(spec(items=[{"name": "a"}, {"name": "a"}]), ['.spec.items: duplicate entries for key [name="a"]'],
                     id="duplicate-key"),
        pytest.param(spec(items=[{"value": "v"}]),
                     ['.spec.items: element 0: associative list with keys has an element that omits all key fields '
                      '["name"] (and doesn\'t have default values for any key fields)'], id="item-without-key"),
        pytest.param(spec(args="x"), [".spec.args: expected list, got &value.valueUnstructured{Value:\"x\"}"],
                     id="not-a-list"),
        pytest.param(spec(extra={"any": {"thing": [1]}}), [], id="preserved-fields-take-anything"),
    ],
)  # fmt: skip
def test_check_reports_what_upstream_refuses(config: Any, problems: list[str]) -> None:
    assert apply.check(config, WIDGET) == problems
