"""JSON patch, JSON merge patch and strategic merge patch as the API server applies them.

Expected strategic-merge results with ``$setElementOrder`` were checked against ``kubectl patch --local``, which
runs upstream's own code.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from multiqueue.apiserver.rules.patches import (
    PRIMITIVE_SET,
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
    list_strategy,
)

DOC: dict[str, Any] = {"a": {"b": 1, "c": [1, 2]}, "x": "y", "t~s/p": 0}


def _at(doc: Any, dotted: str) -> Any:
    """The value at a dotted path, for tables that check one part of a patched object."""
    for step in dotted.split(".") if dotted else ():
        doc = doc[int(step)] if isinstance(doc, list) else doc.get(step)
    return doc


def _directives(value: Any) -> list[str]:
    """Every ``$`` key anywhere in ``value``."""
    if isinstance(value, dict):
        own = [k for k in value if isinstance(k, str) and k.startswith("$")]
        return own + [d for v in value.values() for d in _directives(v)]
    if isinstance(value, list):
        return [d for v in value for d in _directives(v)]
    return []


# --- JSON patch ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ops", "where", "expected"),
    [
        pytest.param([{"op": "add", "path": "/a/d", "value": 3}], "a.d", 3, id="add-member"),
        pytest.param([{"op": "add", "path": "/a/b", "value": 5}], "a.b", 5, id="add-replaces-member"),
        pytest.param([{"op": "add", "path": "/a/c/-", "value": 3}], "a.c", [1, 2, 3], id="add-append-dash"),
        pytest.param([{"op": "add", "path": "/a/c/0", "value": 0}], "a.c", [0, 1, 2], id="add-insert-front"),
        pytest.param([{"op": "add", "path": "/a/c/2", "value": 3}], "a.c", [1, 2, 3], id="add-at-length"),
        pytest.param([{"op": "add", "path": "", "value": {"n": 1}}], "", {"n": 1}, id="add-whole-document"),
        pytest.param([{"op": "remove", "path": "/x"}], "x", None, id="remove-member"),
        pytest.param([{"op": "remove", "path": "/a/c/0"}], "a.c", [2], id="remove-element"),
        pytest.param([{"op": "replace", "path": "/a/b", "value": 9}], "a.b", 9, id="replace-member"),
        pytest.param([{"op": "replace", "path": "/a/c/1", "value": 9}], "a.c", [1, 9], id="replace-element"),
        pytest.param([{"op": "replace", "path": "", "value": {"n": 1}}], "", {"n": 1}, id="replace-document"),
        pytest.param([{"op": "move", "from": "/x", "path": "/z"}], "z", "y", id="move-member"),
        pytest.param([{"op": "move", "from": "/a/c/0", "path": "/a/c/1"}], "a.c", [2, 1], id="move-in-array"),
        pytest.param([{"op": "move", "from": "/x", "path": "/x"}], "x", "y", id="move-onto-itself"),
        pytest.param([{"op": "copy", "from": "/a/c", "path": "/d"}], "d", [1, 2], id="copy"),
        pytest.param(
            [{"op": "test", "path": "/a", "value": {"c": [1, 2], "b": 1}}], "x", "y", id="test-passes"
        ),
        pytest.param([{"op": "test", "path": "/a/b", "value": 1.0}], "x", "y", id="test-1-equals-1.0"),
        pytest.param([{"op": "test", "path": "/t~0s~1p", "value": 0}], "x", "y", id="test-escaped-pointer"),
        pytest.param([{"op": "add", "path": "/k~1v", "value": 1}], "k/v", 1, id="add-escaped-slash"),
        pytest.param(
            [{"op": "add", "path": "/n", "value": {}}, {"op": "add", "path": "/n/m", "value": 1}],
            "n",
            {"m": 1},
            id="operations-apply-in-order",
        ),
        pytest.param([], "", DOC, id="no-operations"),
    ],
)
def test_json_patch(ops: list[Any], where: str, expected: Any) -> None:
    before = copy.deepcopy(DOC)
    assert _at(apply_json_patch(DOC, ops), where) == expected
    assert before == DOC, "the input must not change"


def test_json_patch_copies_values_it_inserts() -> None:
    value = {"deep": [1]}
    patched = apply_json_patch(
        {}, [{"op": "add", "path": "/v", "value": value}, {"op": "copy", "from": "/v", "path": "/w"}]
    )
    patched["v"]["deep"].append(2)
    assert value == {"deep": [1]} and patched["w"] == {"deep": [1]}


@pytest.mark.parametrize(
    ("ops", "code", "message"),
    [
        pytest.param(
            [{"op": "test", "path": "/x", "value": "z"}],
            422,
            "testing value /x failed: test failed",
            id="test-fails",
        ),
        pytest.param(
            [{"op": "test", "path": "/a/b", "value": True}],
            422,
            "testing value /a/b failed: test failed",
            id="test-true-is-not-1",
        ),
        pytest.param(
            [{"op": "remove", "path": "/nope/x"}],
            422,
            'remove operation does not apply: doc is missing path: "/nope/x": missing value',
            id="missing-parent",
        ),
        pytest.param(
            [{"op": "add", "path": "/x/y", "value": 1}],
            422,
            'add operation does not apply: doc is missing path: "/x/y": missing value',
            id="parent-is-a-scalar",
        ),
        pytest.param(
            [{"op": "remove", "path": "/nope"}],
            422,
            "error in remove for path: '/nope': Unable to remove nonexistent key: nope: missing value",
            id="remove-missing-member",
        ),
        pytest.param(
            [{"op": "replace", "path": "/nope", "value": 1}],
            422,
            'replace operation does not apply: doc is missing path: "/nope": missing value',
            id="replace-missing-member",
        ),
        pytest.param(
            [{"op": "replace", "path": "/a/c/2", "value": 1}],
            422,
            "error in replace for path: '/a/c/2': Unable to access invalid index: 2: invalid index referenced",
            id="replace-past-the-end",
        ),
        pytest.param(
            [{"op": "add", "path": "/a/c/3", "value": 1}],
            422,
            "error in add for path: '/a/c/3': Unable to access invalid index: 3: invalid index referenced",
            id="add-beyond-length",
        ),
        pytest.param(
            [{"op": "add", "path": "/a/c/01", "value": 1}],
            422,
            "error in add for path: '/a/c/01': value was not a proper array index: '01'",
            id="leading-zero-index",
        ),
        pytest.param(
            [{"op": "remove", "path": "/a/c/-1"}],
            422,
            "error in remove for path: '/a/c/-1': value was not a proper array index: '-1'",
            id="negative-index",
        ),
        pytest.param(
            [{"op": "remove", "path": "/a/c/-"}],
            422,
            "error in remove for path: '/a/c/-': value was not a proper array index: '-'",
            id="dash-only-for-add",
        ),
        pytest.param(
            [{"op": "add", "path": "/a~2b", "value": 1}],
            422,
            'add operation does not apply: doc is missing path: "/a~2b": missing value',
            id="bad-escape",
        ),
        pytest.param(
            [{"op": "add", "path": "a", "value": 1}],
            422,
            'add operation does not apply: doc is missing path: "a": missing value',
            id="pointer-without-slash",
        ),
        pytest.param(
            [{"op": "remove", "path": ""}],
            422,
            'remove operation does not apply: doc is missing path: "": missing value',
            id="remove-whole-document",
        ),
        pytest.param([{"op": "jump", "path": "/x"}], 422, "Unexpected kind: jump", id="unknown-op"),
        pytest.param([{"path": "/x"}], 422, "Unexpected kind: unknown", id="missing-op"),
        pytest.param(
            [{"op": "add", "value": 1}],
            422,
            "add operation failed to decode path: missing value",
            id="missing-path",
        ),
        pytest.param(
            [{"op": "add", "path": 5, "value": 1}],
            422,
            "add operation failed to decode path: json: cannot unmarshal number into Go value of type string",
            id="path-not-a-string",
        ),
        pytest.param(
            [{"op": "replace", "path": "/x"}],
            422,
            "replace operation failed to decode value: missing value",
            id="missing-value",
        ),
        pytest.param(
            [{"op": "move", "path": "/x"}],
            422,
            "move operation failed to decode from: missing value",
            id="missing-from",
        ),
        pytest.param(
            [{"op": "move", "from": "/a", "path": "/a/z"}],
            422,
            "move operation does not apply: /a/z is inside the value at /a",
            id="move-into-itself",
        ),
        pytest.param(
            [{"op": "copy", "from": "/nope", "path": "/z"}],
            422,
            'copy operation does not apply: doc is missing path: "/nope": missing value',
            id="copy-from-missing",
        ),
        pytest.param(
            [{"op": "replace", "path": "", "value": [1]}],
            422,
            "the patched document is a JSON array, not an object",
            id="document-becomes-array",
        ),
        pytest.param(
            {"op": "add"},
            400,
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
            id="body-not-a-list",
        ),
        pytest.param(
            None, 400, "json: cannot unmarshal null into Go value of type jsonpatch.Patch", id="body-null"
        ),
        pytest.param(
            ["add"],
            400,
            "json: cannot unmarshal string into Go value of type jsonpatch.Operation",
            id="op-not-object",
        ),
    ],
)
def test_json_patch_errors(ops: Any, code: int, message: str) -> None:
    with pytest.raises(PatchError) as caught:
        apply_json_patch(DOC, ops)
    assert (caught.value.code, str(caught.value)) == (code, message)
    assert caught.value.reason == ("BadRequest" if code == 400 else "Invalid")


def test_a_failing_json_patch_changes_nothing() -> None:
    ops = [{"op": "add", "path": "/new", "value": 1}, {"op": "test", "path": "/x", "value": "no"}]
    with pytest.raises(PatchError):
        apply_json_patch(DOC, ops)
    assert "new" not in DOC


# --- JSON merge patch ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        pytest.param({"x": None}, {"a": {"b": 1, "c": [1, 2]}, "t~s/p": 0}, id="null-deletes"),
        pytest.param({"nope": None}, DOC, id="null-for-missing-key"),
        pytest.param({"a": {"b": 2}}, {**DOC, "a": {"b": 2, "c": [1, 2]}}, id="maps-merge"),
        pytest.param({"a": {"c": [3]}}, {**DOC, "a": {"b": 1, "c": [3]}}, id="lists-replace"),
        pytest.param({"a": 7}, {**DOC, "a": 7}, id="scalar-replaces-map"),
        pytest.param(
            {"x": {"k": 1, "n": None}}, {**DOC, "x": {"k": 1}}, id="map-replaces-scalar-nulls-pruned"
        ),
        pytest.param({"n": {"m": {"o": None}}}, {**DOC, "n": {"m": {}}}, id="new-subtree-nulls-pruned"),
        pytest.param({"l": [None, {"k": None}]}, {**DOC, "l": [None, {"k": None}]}, id="nulls-in-lists-kept"),
        pytest.param({}, DOC, id="empty-patch"),
    ],
)
def test_merge_patch(patch: dict[str, Any], expected: dict[str, Any]) -> None:
    before = copy.deepcopy(DOC)
    assert apply_merge_patch(DOC, patch) == expected
    assert before == DOC


@pytest.mark.parametrize("patch", [None, [1], "x", 3], ids=["null", "list", "string", "number"])
def test_merge_patch_body_must_be_an_object(patch: Any) -> None:
    with pytest.raises(PatchError) as caught:
        apply_merge_patch(DOC, patch)
    assert (caught.value.code, str(caught.value)) == (400, "Invalid JSON Patch")


JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=4)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=15,
)
JSON_OBJECTS = st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=5)


def _diff_as_merge_patch(source: Any, target: Any) -> Any:
    """The merge patch turning ``source`` into ``target``: changed keys recurse, vanished keys become null."""
    if not isinstance(source, dict) or not isinstance(target, dict):
        return target
    patch: dict[str, Any] = {key: None for key in source if key not in target}
    for key, value in target.items():
        if key not in source or source[key] != value:
            patch[key] = _diff_as_merge_patch(source.get(key), value)
    return patch


def _without_null_members(value: Any) -> Any:
    """A merge patch cannot set a member to null (null means delete), so targets carry none."""
    if isinstance(value, dict):
        return {k: _without_null_members(v) for k, v in value.items() if v is not None}
    return value


@given(JSON_OBJECTS, JSON_OBJECTS)
def test_merge_patch_of_the_diff_reaches_the_target(source: dict[str, Any], target: dict[str, Any]) -> None:
    target = _without_null_members(target)
    assert apply_merge_patch(source, _diff_as_merge_patch(source, target)) == target


# --- strategic merge patch ----------------------------------------------------------------------------------

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "finalizers": ["a", "b"],
        "labels": {"k": "v", "tier": "web"},
        "ownerReferences": [{"uid": "u1", "name": "j", "kind": "Job", "apiVersion": "batch/v1"}],
    },
    "spec": {
        "containers": [
            {
                "name": "apple",
                "image": "x",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            },
            {"name": "banana", "image": "y"},
        ],
        "tolerations": [{"key": "t1"}],
        "volumes": [{"name": "v", "emptyDir": {}}],
    },
    "status": {
        "conditions": [{"type": "Ready", "status": "False"}, {"type": "Initialized", "status": "True"}]
    },
}


def _names(items: list[dict[str, Any]]) -> list[str]:
    return [item["name"] for item in items]


@pytest.mark.parametrize(
    ("patch", "where", "expected"),
    [
        pytest.param(
            {"spec": {"containers": [{"name": "apple", "image": "new"}]}},
            "spec.containers",
            [{**POD["spec"]["containers"][0], "image": "new"}, {"name": "banana", "image": "y"}],
            id="containers-merge-by-name",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "grape", "image": "g"}, {"name": "cherry", "image": "c"}]}},
            "spec.containers",
            [{"name": "grape", "image": "g"}, {"name": "cherry", "image": "c"}, *POD["spec"]["containers"]],
            id="new-items-go-before-the-servers-in-patch-order",
        ),
        pytest.param(
            {
                "spec": {
                    "containers": [{"name": "apple", "env": [{"name": "B", "value": "3"}, {"name": "C"}]}]
                }
            },
            "spec.containers.0.env",
            [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C"}],
            id="env-merges-by-name-inside-a-container",
        ),
        pytest.param(
            {
                "spec": {
                    "containers": [
                        {"name": "apple", "env": [{"name": "A", "value": None, "valueFrom": {"x": 1}}]}
                    ]
                }
            },
            "spec.containers.0.env.0",
            {"name": "A", "valueFrom": {"x": 1}},
            id="null-inside-a-merged-item",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "banana", "$patch": "delete"}]}},
            "spec.containers",
            [POD["spec"]["containers"][0]],
            id="delete-item-by-merge-key",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "kiwi", "$patch": "delete"}]}},
            "spec.containers",
            POD["spec"]["containers"],
            id="delete-missing-item-is-a-no-op",
        ),
        pytest.param(
            {"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "o", "$x": 1}]}},
            "spec.containers",
            [{"name": "only", "image": "o"}],
            id="replace-directive-item-replaces-list",
        ),
        pytest.param(
            {"spec": {"containers": [{"$patch": "merge"}, {"name": "banana", "image": "b"}]}},
            "spec.containers",
            [POD["spec"]["containers"][0], {"name": "banana", "image": "b"}],
            id="merge-directive-item-is-the-default",
        ),
        pytest.param(
            {"spec": {"tolerations": [{"key": "t2"}, {"key": "gone", "$patch": "delete"}]}},
            "spec.tolerations",
            [{"key": "t2"}],
            id="list-without-merge-key-replaced",
        ),
        pytest.param(
            {"metadata": {"finalizers": ["c", "a", "c"]}},
            "metadata.finalizers",
            ["c", "a", "b"],
            id="finalizers-union-in-upstreams-order",
        ),
        pytest.param(
            {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "zz"]}},
            "metadata.finalizers",
            ["b"],
            id="delete-from-primitive-list",
        ),
        pytest.param(
            {"spec": {"$deleteFromPrimitiveList/args": ["a"]}},
            "spec.args",
            None,
            id="delete-from-absent-list-is-a-no-op",
        ),
        pytest.param(
            {
                "status": {
                    "conditions": [
                        {"type": "Ready", "status": "True"},
                        {"type": "PodScheduled", "status": "True"},
                    ]
                }
            },
            "status.conditions",
            [
                {"type": "Ready", "status": "True"},
                {"type": "PodScheduled", "status": "True"},
                {"type": "Initialized", "status": "True"},
            ],
            id="conditions-merge-by-type",
        ),
        pytest.param(
            {"metadata": {"ownerReferences": [{"uid": "u1", "controller": True}]}},
            "metadata.ownerReferences",
            [{**POD["metadata"]["ownerReferences"][0], "controller": True}],
            id="owner-references-merge-by-uid",
        ),
        pytest.param(
            {"metadata": {"labels": {"$patch": "replace", "n": "m"}}},
            "metadata.labels",
            {"n": "m"},
            id="map-replace-directive",
        ),
        pytest.param(
            {"metadata": {"labels": {"$patch": "delete"}}}, "metadata.labels", None, id="map-delete-directive"
        ),
        pytest.param(
            {"metadata": {"labels": {"$patch": "merge", "n": "m"}}},
            "metadata.labels",
            {"k": "v", "tier": "web", "n": "m"},
            id="map-merge-directive",
        ),
        pytest.param(
            {"metadata": {"labels": {"k": None}}}, "metadata.labels", {"tier": "web"}, id="null-deletes-key"
        ),
        pytest.param({"metadata": {"labels": None}}, "metadata.labels", None, id="null-deletes-map"),
        pytest.param(
            {
                "spec": {
                    "volumes": [
                        {"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/d"}}
                    ]
                }
            },
            "spec.volumes",
            [{"name": "v", "hostPath": {"path": "/d"}}],
            id="retain-keys-clears-the-others",
        ),
        pytest.param(
            {"spec": {"$setElementOrder/containers": [{"name": "banana"}, {"name": "apple"}]}},
            "spec.containers",
            [POD["spec"]["containers"][1], POD["spec"]["containers"][0]],
            id="set-element-order-alone-reorders",
        ),
        pytest.param(
            {
                "spec": {
                    "$setElementOrder/containers": [{"name": "grape"}, {"name": "banana"}],
                    "containers": [{"name": "grape", "image": "g"}, {"name": "banana", "image": "b"}],
                }
            },
            "spec.containers",
            [{"name": "grape", "image": "g"}, POD["spec"]["containers"][0], {"name": "banana", "image": "b"}],
            id="set-element-order-server-only-item-keeps-its-place",
        ),
        pytest.param(
            {
                "metadata": {
                    "$setElementOrder/finalizers": ["b", "c"],
                    "finalizers": ["c"],
                    "$deleteFromPrimitiveList/finalizers": ["a"],
                }
            },
            "metadata.finalizers",
            ["b", "c"],
            id="set-element-order-primitives-with-deletion",
        ),
        pytest.param(
            {"metadata": {"$setElementOrder/finalizers": ["c", "a", "b"], "finalizers": ["c"]}},
            "metadata.finalizers",
            ["c", "a", "b"],
            id="set-element-order-puts-new-primitive-first",
        ),
        pytest.param(
            {"spec": {"$setElementOrder/args": ["x"], "args": ["x"]}},
            "spec.args",
            ["x"],
            id="set-element-order-for-a-new-list",
        ),
        pytest.param(
            {"spec": {"$setElementOrder/containers": [{"name": "apple"}], "containers": None}},
            "spec.containers",
            None,
            id="set-element-order-with-null-list",
        ),
        pytest.param(
            {"spec": {"$unknown": 1, "containers": [{"name": "apple", "$other": {"a": 1}}]}},
            "spec.containers.0",
            POD["spec"]["containers"][0],
            id="unknown-directives-dropped",
        ),
    ],
)
def test_strategic_merge_patch_on_pods(patch: dict[str, Any], where: str, expected: Any) -> None:
    before = copy.deepcopy(POD)
    result = apply_strategic_merge_patch(POD, patch, "", "Pod")
    assert _at(result, where) == expected
    assert _directives(result) == []
    assert before == POD, "the input must not change"


def test_set_element_order_reads_the_live_order_as_upstream_does() -> None:
    """Upstream's merge reuses the live list's storage: an item added where one was deleted counts as live.

    kubectl patch --local gives [a, g] here, not [g, a].
    """
    pod = {"spec": {"containers": [{"name": "e"}, {"name": "a"}]}}
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "g"}],
            "containers": [{"name": "g", "image": "new"}, {"name": "e", "$patch": "delete"}],
        }
    }
    assert _names(apply_strategic_merge_patch(pod, patch, "", "Pod")["spec"]["containers"]) == ["a", "g"]


LIVE_JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "train",
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        "finalizers": ["multiqueue.dev/mirror"],
    },
    "spec": {
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "trainer:1",
                        "env": [{"name": "EPOCHS", "value": "3"}, {"name": "LR", "value": "0.1"}],
                    },
                    {"name": "injected-sidecar", "image": "proxy"},
                ],
                "restartPolicy": "Never",
            }
        }
    },
    "status": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}], "succeeded": 1},
}


def test_kubectl_apply_shaped_patch() -> None:
    """What ``kubectl apply`` sends after the user changed the image, dropped LR, added SEED before EPOCHS and
    added a second container. The server-injected sidecar goes last: upstream puts a new named item before it."""
    annotations = {"kubectl.kubernetes.io/last-applied-configuration": '{"new": true}'}
    patch: dict[str, Any] = {
        "metadata": {"annotations": annotations},
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "main"}, {"name": "logger"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "trainer:2",
                            "$setElementOrder/env": [{"name": "SEED"}, {"name": "EPOCHS"}],
                            "env": [{"name": "SEED", "value": "7"}, {"name": "LR", "$patch": "delete"}],
                        },
                        {"name": "logger", "image": "fluent"},
                    ],
                }
            }
        },
    }
    result = apply_strategic_merge_patch(LIVE_JOB, patch, "batch", "Job")
    containers = result["spec"]["template"]["spec"]["containers"]
    assert containers == [
        {
            "name": "main",
            "image": "trainer:2",
            "env": [{"name": "SEED", "value": "7"}, {"name": "EPOCHS", "value": "3"}],
        },
        {"name": "logger", "image": "fluent"},
        {"name": "injected-sidecar", "image": "proxy"},
    ]
    assert result["metadata"]["annotations"] == annotations
    assert result["metadata"]["finalizers"] == ["multiqueue.dev/mirror"]
    assert _directives(result) == []


def test_job_status_conditions_merge_by_type() -> None:
    patch = {
        "status": {
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "Met"},
                {"type": "Complete", "status": "True"},
            ],
            "succeeded": 2,
        }
    }
    status = apply_strategic_merge_patch(LIVE_JOB, patch, "batch", "Job")["status"]
    assert status == {
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "Met"},
            {"type": "Complete", "status": "True"},
        ],
        "succeeded": 2,
    }


@pytest.mark.parametrize(
    ("group", "kind", "doc", "patch", "where", "expected"),
    [
        pytest.param(
            "batch",
            "CronJob",
            {
                "spec": {
                    "jobTemplate": {
                        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "1"}]}}}
                    }
                }
            },
            {
                "spec": {
                    "jobTemplate": {
                        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "2"}]}}}
                    }
                }
            },
            "spec.jobTemplate.spec.template.spec.containers",
            [{"name": "c", "image": "2"}],
            id="cronjob-template-containers",
        ),
        pytest.param(
            "",
            "Node",
            {"spec": {"podCIDRs": ["10.0.0.0/24"]}},
            {"spec": {"podCIDRs": ["10.0.1.0/24"]}},
            "spec.podCIDRs",
            ["10.0.1.0/24", "10.0.0.0/24"],
            id="node-pod-cidrs-union",
        ),
        pytest.param(
            "",
            "ServiceAccount",
            {"imagePullSecrets": [{"name": "a"}]},
            {"imagePullSecrets": [{"name": "b"}]},
            "imagePullSecrets",
            [{"name": "b"}],
            id="service-account-pull-secrets-replaced",
        ),
        pytest.param(
            "example.com",
            "Widget",
            {"metadata": {"finalizers": ["a"]}, "spec": {"items": [{"name": "a"}]}},
            {"metadata": {"finalizers": ["b"]}, "spec": {"items": [{"name": "b"}]}},
            "",
            {"metadata": {"finalizers": ["b", "a"]}, "spec": {"items": [{"name": "b"}]}},
            id="unknown-kind-merges-metadata-lists-only",
        ),
        pytest.param(
            "",
            "Pod",
            POD,
            {"$patch": "replace", "kind": "Pod", "metadata": {"name": "q", "labels": None}},
            "",
            {"kind": "Pod", "metadata": {"name": "q"}},
            id="replace-whole-object",
        ),
        pytest.param("", "Pod", POD, {"$patch": "delete"}, "", {}, id="delete-whole-object"),
        pytest.param("", "Pod", "not an object", {"a": 1}, "", {"a": 1}, id="malformed-doc-read-as-empty"),
    ],
)
def test_strategic_merge_patch_per_kind(
    group: str, kind: str, doc: Any, patch: dict[str, Any], where: str, expected: Any
) -> None:
    assert _at(apply_strategic_merge_patch(doc, patch, group, kind), where) == expected


@pytest.mark.parametrize(
    ("patch", "code", "message"),
    [
        pytest.param(["x"], 400, "invalid JSON document", id="body-not-an-object"),
        pytest.param(
            {"spec": {"containers": [{"image": "z"}]}},
            422,
            "map: map[image:z] does not contain declared merge key: name",
            id="missing-merge-key",
        ),
        pytest.param(
            {"spec": {"containers": [{"image": "z", "$patch": "delete"}]}},
            422,
            "map: map[$patch:delete image:z] does not contain declared merge key: name",
            id="delete-without-merge-key",
        ),
        pytest.param(
            {"metadata": {"labels": {"$patch": "bogus"}}},
            422,
            "unknown patch type: bogus in map: map[$patch:bogus]",
            id="unknown-map-directive",
        ),
        pytest.param(
            {"metadata": {"labels": {"$patch": None}}},
            422,
            "unknown patch type: <nil> in map: map[$patch:<nil>]",
            id="null-map-directive",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "apple", "$patch": "bogus"}]}},
            422,
            "unknown patch type: bogus in map: map[$patch:bogus name:apple]",
            id="unknown-item-directive",
        ),
        pytest.param(
            {"spec": {"containers": ["apple"]}},
            422,
            "list element types are not identical: "
            "[[map[env:[map[name:A value:1] map[name:B value:2]] image:x name:apple] map[image:y name:banana]] [apple]]",
            id="mixed-element-types",
        ),
        pytest.param(
            {"spec": {"initContainers": [["a"]]}}, 422, "lists of lists are not supported", id="list-of-lists"
        ),
        pytest.param(
            {"metadata": {"$patch": "replace", "finalizers": [{"a": 1}]}},
            422,
            "cannot merge lists without merge key for type map",
            id="maps-in-a-primitive-set",
        ),
        pytest.param(
            {"spec": {"$retainKeys": "containers"}},
            400,
            "invalid patch format of retainKeys",
            id="retain-keys-not-a-list",
        ),
        pytest.param(
            {"spec": {"$retainKeys": ["volumes"], "tolerations": []}},
            422,
            "patch content doesn't match retainKeys list",
            id="retain-keys-mismatch",
        ),
        pytest.param(
            {"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}},
            400,
            "invalid patch format of primitive list",
            id="delete-from-list-not-a-list",
        ),
        pytest.param(
            {"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}},
            400,
            "invalid patch format of primitive list",
            id="delete-from-list-malformed-key",
        ),
        pytest.param(
            {"spec": {"$setElementOrder/containers": {"name": "apple"}}},
            400,
            "invalid patch format of setElementOrder list",
            id="set-element-order-not-a-list",
        ),
        pytest.param(
            {"spec": {"$setElementOrder": [{"name": "apple"}]}},
            400,
            "invalid patch format of setElementOrder list",
            id="set-element-order-malformed-key",
        ),
        pytest.param(
            {
                "spec": {
                    "$setElementOrder/containers": [{"name": "apple"}],
                    "containers": [{"name": "banana"}],
                }
            },
            422,
            "The order in patch list:\n[map[name:banana]]\n doesn't match $setElementOrder list:\n[map[name:apple]]\n",
            id="set-element-order-misses-a-patched-item",
        ),
        pytest.param(
            {"spec": {"$setElementOrder/containers": [{"image": "x"}]}},
            422,
            "map: map[image:x] does not contain declared merge key: name",
            id="set-element-order-item-without-merge-key",
        ),
    ],
)
def test_strategic_merge_patch_errors(patch: Any, code: int, message: str) -> None:
    with pytest.raises(PatchError) as caught:
        apply_strategic_merge_patch(POD, patch, "", "Pod")
    assert (caught.value.code, str(caught.value)) == (code, message)


@pytest.mark.parametrize(
    ("group", "kind", "path", "strategy"),
    [
        pytest.param("batch", "Job", "spec.template.spec.containers", "name", id="job-containers"),
        pytest.param("batch", "Job", "spec.template.spec.initContainers[].env", "name", id="job-init-env"),
        pytest.param(
            "batch", "Job", "spec.template.metadata.finalizers", PRIMITIVE_SET, id="template-finalizers"
        ),
        pytest.param("batch", "Job", "status.conditions", "type", id="job-conditions"),
        pytest.param(
            "batch", "CronJob", "spec.jobTemplate.spec.template.spec.volumes", "name", id="cronjob-volumes"
        ),
        pytest.param("batch", "CronJob", "status.active", None, id="cronjob-active-replaced"),
        pytest.param("", "Pod", "spec.containers[].ports", "containerPort", id="pod-ports"),
        pytest.param(
            "", "Pod", "status.containerStatuses[].volumeMounts", "mountPath", id="pod-status-mounts"
        ),
        pytest.param("", "Pod", "status.resourceClaimStatuses", "name", id="pod-claim-statuses"),
        pytest.param("", "Pod", "spec.tolerations", None, id="pod-tolerations-replaced"),
        pytest.param("", "Node", "spec.podCIDRs", PRIMITIVE_SET, id="node-pod-cidrs"),
        pytest.param("", "ServiceAccount", "imagePullSecrets", None, id="sa-pull-secrets-replaced"),
        pytest.param(
            "apiextensions.k8s.io", "CustomResourceDefinition", "status.conditions", None, id="crd-conditions"
        ),
        pytest.param(
            "example.com", "Widget", "metadata.ownerReferences", "uid", id="unknown-kind-owner-refs"
        ),
    ],
)
def test_list_strategy(group: str, kind: str, path: str, strategy: str | None) -> None:
    assert list_strategy(group, kind, path) == strategy


# --- garbage in, documented errors out ----------------------------------------------------------------------

DIRECTIVE_KEYS = st.sampled_from(
    [
        "$patch",
        "$retainKeys",
        "$setElementOrder/containers",
        "$setElementOrder/finalizers",
        "$setElementOrder",
        "$deleteFromPrimitiveList/finalizers",
        "$deleteFromPrimitiveList",
        "containers",
        "finalizers",
        "metadata",
        "spec",
        "name",
        "env",
    ]
)
DIRECTIVE_VALUES = st.sampled_from(["replace", "delete", "merge", "bogus"])
DOC_KEYS = st.sampled_from(["containers", "finalizers", "metadata", "spec", "name", "env"]) | st.text(
    "ab", max_size=2
)
STORED = st.recursive(
    JSON_SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(DOC_KEYS, children, max_size=4),
    max_leaves=20,
)
PATCHY = st.recursive(
    JSON_SCALARS | DIRECTIVE_VALUES,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(DIRECTIVE_KEYS | st.text(max_size=2), children, max_size=4)
    ),
    max_leaves=20,
)
POINTERS = st.sampled_from(["", "/", "/a", "/a/c", "/a/c/0", "/a/c/-", "/a/c/9", "/x/y", "/~", "a", "/a/01"])
OPERATIONS = st.lists(
    st.dictionaries(
        st.sampled_from(["op", "path", "from", "value"]),
        st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]) | POINTERS | JSON_VALUES,
    ),
    max_size=4,
)


@given(STORED, PATCHY)
def test_strategic_merge_raises_only_patch_errors(doc: Any, patch: Any) -> None:
    try:
        result = apply_strategic_merge_patch(doc, patch, "", "Pod")
    except PatchError:
        return
    assert isinstance(result, dict) and _directives(result) == []


@given(JSON_OBJECTS, OPERATIONS | JSON_VALUES)
def test_json_patch_raises_only_patch_errors(doc: dict[str, Any], ops: Any) -> None:
    with contextlib.suppress(PatchError):
        assert isinstance(apply_json_patch(doc, ops), dict)


@given(PATCHY, PATCHY)
def test_merge_patch_raises_only_patch_errors(doc: Any, patch: Any) -> None:
    with contextlib.suppress(PatchError):
        assert isinstance(apply_merge_patch(doc, patch), dict)


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    "apply",
    [
        pytest.param(lambda deep: apply_merge_patch(deep, deep), id="merge"),
        pytest.param(lambda deep: apply_strategic_merge_patch(deep, deep, "", "Pod"), id="strategic"),
        pytest.param(lambda deep: apply_json_patch(deep, []), id="json"),
    ],
)
def test_absurd_nesting_is_a_bad_request(apply: Any) -> None:
    with pytest.raises(PatchError) as caught:
        apply(_nested(5000))
    assert caught.value.code == 400


# Paths leave the root alone (a whole patch may pass through a root that is not an object, a patch of one
# operation may not); copies and moves may come from it.
SHARING_POINTERS = st.sampled_from(
    ["/a", "/a/c", "/a/c/0", "/a/c/-", "/a/c/1", "/b", "/b/c", "/b/c/-", "/a/c/0/c", "/a/c/0/c/-", "/b/c/0/a"]
)
SHARING_OPERATIONS = st.lists(
    st.fixed_dictionaries(
        {
            "op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]),
            "path": SHARING_POINTERS,
            "from": SHARING_POINTERS | st.just(""),
            "value": JSON_VALUES,
        }
    ),
    max_size=8,
)


@settings(max_examples=500)
@given(SHARING_OPERATIONS)
def test_a_patch_ends_as_its_operations_applied_one_at_a_time(ops: list[dict[str, Any]]) -> None:
    """Copies within one patch share what they copy until something changes it; a patch of one operation shares
    nothing across operations, so folding those is the plain reading of RFC 6902 the patch must match."""
    doc: dict[str, Any] = {"a": {"c": [{"c": [1]}, [2]]}, "b": {"c": []}}
    try:
        whole: Any = apply_json_patch(doc, ops)
    except PatchError as exc:
        whole = str(exc)
    one_by_one: Any = copy.deepcopy(doc)
    try:
        for op in ops:
            one_by_one = apply_json_patch(one_by_one, [op])
    except PatchError as exc:
        one_by_one = str(exc)
    assert whole == one_by_one
    if isinstance(whole, dict):
        found = _containers(whole)
        assert len({id(c) for c in found}) == len(found), "a container stands in two places of the result"


def _containers(value: Any) -> list[Any]:
    found = []
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict | list):
            found.append(item)
            todo.extend(item.values() if isinstance(item, dict) else item)
    return found


def test_refusing_an_amplifying_patch_copies_nothing() -> None:
    """25 doublings of a value would be 2 GB; the copy limit refuses the patch with upstream's generic 422 after
    sizing what the copies would add, without making them."""
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/x", "value": ["y" * 64]}]
    ops += [{"op": "copy", "from": "/x", "path": "/x/-"}] * 25
    with pytest.raises(PatchError) as caught:
        apply_json_patch({}, ops)
    assert caught.value.code == 422 and not caught.value.told
    assert "the accumulated size increase of copy is 4521899, exceeding the limit 3145728" in str(
        caught.value
    )
