"""JSON patch, JSON merge patch and strategic merge patch as the API server applies them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from multiqueue.api.patches import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
    list_strategy,
)

DOC = {"a": {"b": 1, "c": [1, 2]}, "x": "y"}


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        pytest.param(
            [{"op": "add", "path": "/a/d", "value": 3}],
            {"a": {"b": 1, "c": [1, 2], "d": 3}, "x": "y"},
            id="add",
        ),
        pytest.param(
            [{"op": "add", "path": "/a/c/-", "value": 3}],
            {"a": {"b": 1, "c": [1, 2, 3]}, "x": "y"},
            id="append",
        ),
        pytest.param(
            [{"op": "add", "path": "/a/c/0", "value": 0}],
            {"a": {"b": 1, "c": [0, 1, 2]}, "x": "y"},
            id="insert",
        ),
        pytest.param([{"op": "remove", "path": "/x"}], {"a": {"b": 1, "c": [1, 2]}}, id="remove"),
        pytest.param(
            [{"op": "replace", "path": "/a/b", "value": 9}],
            {"a": {"b": 9, "c": [1, 2]}, "x": "y"},
            id="replace",
        ),
        pytest.param(
            [{"op": "move", "from": "/x", "path": "/z"}], {"a": {"b": 1, "c": [1, 2]}, "z": "y"}, id="move"
        ),
        pytest.param(
            [{"op": "copy", "from": "/x", "path": "/z"}],
            {"a": {"b": 1, "c": [1, 2]}, "x": "y", "z": "y"},
            id="copy",
        ),
        pytest.param([{"op": "test", "path": "/x", "value": "y"}], DOC, id="test-passes"),
        pytest.param([{"op": "add", "path": "/a~1b", "value": 1}], {**DOC, "a/b": 1}, id="escaped-slash"),
    ],
)
def test_json_patch(ops: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    assert apply_json_patch(DOC, ops) == expected
    assert DOC == {"a": {"b": 1, "c": [1, 2]}, "x": "y"}, "the input must not change"


@pytest.mark.parametrize(
    "ops",
    [
        pytest.param([{"op": "test", "path": "/x", "value": "z"}], id="test-fails"),
        pytest.param([{"op": "remove", "path": "/nope"}], id="missing-path"),
        pytest.param([{"op": "replace", "path": "/a/c/5", "value": 1}], id="index-out-of-range"),
        pytest.param([{"op": "jump", "path": "/x"}], id="unknown-op"),
        pytest.param({"op": "add"}, id="not-a-list"),
    ],
)
def test_json_patch_errors(ops: Any) -> None:
    with pytest.raises(PatchError):
        apply_json_patch(DOC, ops)


def test_merge_patch_null_deletes() -> None:
    assert apply_merge_patch(DOC, {"a": {"b": None, "d": 1}, "x": None}) == {"a": {"c": [1, 2], "d": 1}}


POD = {
    "metadata": {"finalizers": ["a"], "labels": {"k": "v"}},
    "spec": {
        "containers": [
            {"name": "main", "image": "old", "env": [{"name": "A", "value": "1"}]},
            {"name": "side", "image": "s"},
        ],
        "tolerations": [{"key": "t1"}],
    },
    "status": {"conditions": [{"type": "Ready", "status": "False"}]},
}


@pytest.mark.parametrize(
    ("patch", "check"),
    [
        pytest.param(
            {"spec": {"containers": [{"name": "main", "image": "new"}]}},
            lambda d: [c["image"] for c in d["spec"]["containers"]] == ["new", "s"],
            id="containers-merge-by-name",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]}]}},
            lambda d: [e["name"] for e in d["spec"]["containers"][0]["env"]] == ["A", "B"],
            id="env-merges-by-name",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}},
            lambda d: [c["name"] for c in d["spec"]["containers"]] == ["main"],
            id="delete-directive",
        ),
        pytest.param(
            {"spec": {"tolerations": [{"key": "t2"}]}},
            lambda d: d["spec"]["tolerations"] == [{"key": "t2"}],
            id="list-without-key-replaced",
        ),
        pytest.param(
            {"metadata": {"finalizers": ["b", "a"]}},
            lambda d: d["metadata"]["finalizers"] == ["a", "b"],
            id="finalizers-union",
        ),
        pytest.param(
            {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}},
            lambda d: d["metadata"]["finalizers"] == [],
            id="delete-from-primitive-list",
        ),
        pytest.param(
            {
                "status": {
                    "conditions": [
                        {"type": "Ready", "status": "True"},
                        {"type": "Initialized", "status": "True"},
                    ]
                }
            },
            lambda d: (
                [(c["type"], c["status"]) for c in d["status"]["conditions"]]
                == [("Ready", "True"), ("Initialized", "True")]
            ),
            id="conditions-merge-by-type",
        ),
        pytest.param(
            {
                "spec": {
                    "$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
                    "containers": [{"name": "main", "image": "x"}],
                }
            },
            lambda d: [c["name"] for c in d["spec"]["containers"]] == ["side", "main"],
            id="set-element-order",
        ),
        pytest.param(
            {"metadata": {"labels": {"$patch": "replace", "n": "m"}}},
            lambda d: d["metadata"]["labels"] == {"n": "m"},
            id="replace-map",
        ),
        pytest.param(
            {"metadata": {"labels": None}}, lambda d: "labels" not in d["metadata"], id="null-deletes"
        ),
    ],
)
def test_strategic_merge_patch_on_pods(patch: dict[str, Any], check: Any) -> None:
    result = apply_strategic_merge_patch(POD, patch, "", "Pod")
    assert check(result), result
    assert "$patch" not in str(result) and "$setElementOrder" not in str(result)


def test_strategic_merge_of_job_template_and_missing_merge_key() -> None:
    job = {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "1"}]}}}}
    patched = apply_strategic_merge_patch(
        job, {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "2"}]}}}}, "batch", "Job"
    )
    assert patched["spec"]["template"]["spec"]["containers"] == [{"name": "a", "image": "2"}]
    with pytest.raises(PatchError):
        apply_strategic_merge_patch(
            job, {"spec": {"template": {"spec": {"containers": [{"image": "2"}]}}}}, "batch", "Job"
        )
    assert list_strategy("batch", "CronJob", "spec.jobTemplate.spec.template.spec.containers") == "name"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=12,
)


def _diff(source: Any, target: Any) -> Any:
    """A merge patch that turns ``source`` into ``target`` (nulls in ``target`` are dropped as merge patch can't keep them)."""
    if not isinstance(source, dict) or not isinstance(target, dict):
        return target
    patch: dict[str, Any] = {k: None for k in source if k not in target}
    for key, value in target.items():
        if key not in source or source[key] != value:
            patch[key] = _diff(source.get(key), value)
    return patch


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    return value


@given(
    st.dictionaries(st.text(max_size=4), JSON, max_size=4),
    st.dictionaries(st.text(max_size=4), JSON, max_size=4),
)
def test_merge_patch_of_a_diff_reaches_the_target(source: dict[str, Any], target: dict[str, Any]) -> None:
    target = _drop_nulls(target)
    assert apply_merge_patch(source, _diff(source, target)) == target
