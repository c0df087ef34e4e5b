"""What the manager's caches keep of an object: equal to it apart from managedFields (and, for mirrors, the
nested spec), with each recurring string held once."""

from __future__ import annotations

import copy

import orjson
import pytest

from multiqueue.api.compaction import compacted, without_nested_spec
from multiqueue.api.types import Obj
from multiqueue.dispatch.mirror import cached_mirror

UID = "6f1c7a0e-5d7b-4c4e-9c55-1c6b1a0b7b11"


def job(uid: str = UID) -> Obj:
    """A Job as a server answers it, decoded the way the client decodes it."""
    return orjson.loads(  # type: ignore[no-any-return]
        orjson.dumps(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": "a",
                    "uid": uid,
                    "labels": {"controller-uid": uid},
                    "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
                },
                "spec": {
                    "suspend": False,
                    "completions": 2,
                    "selector": {"matchLabels": {"controller-uid": uid}},
                    "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
                },
                "status": {"active": 1, "conditions": [{"type": "Suspended", "status": "False"}]},
            }
        )
    )


def test_compacted_is_the_object_without_managed_fields_and_leaves_the_original_alone() -> None:
    original = job()
    before = copy.deepcopy(original)
    kept = compacted(original)
    assert original == before
    expected = copy.deepcopy(before)
    del expected["metadata"]["managedFields"]
    assert kept == expected


def test_a_string_that_recurs_is_held_once_within_and_across_objects() -> None:
    first, second = compacted(job()), compacted(job())
    uids = [
        first["metadata"]["uid"],
        first["metadata"]["labels"]["controller-uid"],
        first["spec"]["selector"]["matchLabels"]["controller-uid"],
        second["metadata"]["uid"],
    ]
    assert all(u is uids[0] for u in uids)
    image = first["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image is second["spec"]["template"]["spec"]["containers"][0]["image"]


@pytest.mark.parametrize(
    ("spec", "kept"),
    [
        ({"suspend": True, "completions": 3, "template": {"spec": {}}}, {"suspend": True, "completions": 3}),
        ({"replicatedJobs": [{"name": "w"}], "suspend": False}, {"suspend": False}),
        ({}, {}),
    ],
)
def test_without_nested_spec_keeps_the_specs_scalars(spec: Obj, kept: Obj) -> None:
    assert without_nested_spec({"metadata": {"name": "a"}, "spec": spec}) == {
        "metadata": {"name": "a"},
        "spec": kept,
    }


def test_an_object_without_a_spec_is_kept_whole() -> None:
    assert without_nested_spec({"metadata": {"name": "a"}, "data": {"k": "v"}}) == {
        "metadata": {"name": "a"},
        "data": {"k": "v"},
    }


def test_a_cached_mirror_keeps_metadata_status_and_suspend() -> None:
    kept = cached_mirror(job())
    assert kept["spec"] == {"suspend": False, "completions": 2}
    assert kept["status"] == job()["status"]
    assert "managedFields" not in kept["metadata"] and kept["metadata"]["uid"] == UID
