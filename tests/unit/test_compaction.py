"""What the manager's caches keep of an object: equal to it apart from managedFields (and, for mirrors, the
nested spec), with each recurring string held once."""

from __future__ import annotations

import copy

import orjson
import pytest

from multiqueue.api.compaction import compacted, without_nested_spec
from multiqueue.api.types import Obj
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.generic import cached_user
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


def test_an_update_keeps_the_previous_copy_of_each_field_it_did_not_change() -> None:
    previous = compacted(job())
    update = job()
    update["metadata"]["resourceVersion"] = "2"
    update["status"] = {"active": 0, "succeeded": 1}
    kept = compacted(update, previous)
    expected = copy.deepcopy(update)
    del expected["metadata"]["managedFields"]
    assert kept == expected
    assert kept["spec"] is previous["spec"]
    assert kept["status"] is not previous["status"]


@pytest.mark.parametrize(
    ("before", "after"),
    [(1, True), ({"x": 1}, {"x": True}), ([0], [False]), ({"a": 1, "b": 2}, {"b": 2, "a": 1})],
)
def test_a_field_kept_from_the_previous_copy_is_the_same_json_not_just_equal(
    before: object, after: object
) -> None:
    kept = compacted({"spec": after}, {"spec": before})
    assert orjson.dumps(kept["spec"]) == orjson.dumps(after)


def test_a_mirror_update_keeps_the_previous_copy_of_its_spec() -> None:
    previous = cached_mirror(job())
    update = job()
    update["status"] = {"succeeded": 1}
    kept = cached_mirror(update, previous)
    assert kept["spec"] is previous["spec"] and kept["status"] == {"succeeded": 1}


def test_the_manager_keeps_a_running_jobs_template_and_drops_a_finished_ones() -> None:
    adapter = BatchJobAdapter()
    running = cached_user(adapter, job(), None)
    assert running["spec"]["template"] == job()["spec"]["template"]
    finished = job()
    finished["status"] = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 2}
    kept = cached_user(adapter, finished, running)
    assert "template" not in kept["spec"]
    assert kept["spec"]["completions"] == 2 and kept["spec"]["selector"] == job()["spec"]["selector"]
    assert kept["status"] == finished["status"] and "template" in finished["spec"]
