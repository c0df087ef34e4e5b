"""What the manager's caches keep of an object: equal to it apart from managedFields (and, for mirrors, the
nested spec), with each recurring string held once."""

from __future__ import annotations

import copy

import orjson
import pytest

from multiqueue.api.compaction import SHARED_KEPT, _held, compacted, without_nested_spec
from multiqueue.api.types import Obj, Resource
from multiqueue.dispatch.adapters.declared import DeclaredAdapter, DeclaredKind
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


def test_the_manager_keeps_a_running_jobs_spec_and_only_the_scalars_of_a_finished_ones() -> None:
    adapter = BatchJobAdapter()
    running = cached_user(adapter, job(), None)
    assert running["spec"] == job()["spec"]
    finished = job()
    finished["status"] = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 2}
    kept = cached_user(adapter, finished, running)
    assert kept["spec"] == {"suspend": False, "completions": 2}
    assert kept["status"] == finished["status"] and "template" in finished["spec"]


def test_a_finished_job_keeps_its_nested_spec_where_its_kind_reads_managed_by_there() -> None:
    kind = DeclaredKind(
        Resource("example.com", "v1", "trainers", "Trainer"),
        managed_by=("spec", "runPolicy", "managedBy"),
        suspend=("spec", "runPolicy", "suspend"),
        succeeded="Succeeded",
    )
    trainer = {
        "metadata": {"name": "t"},
        "spec": {"runPolicy": {"managedBy": "multiqueue.dev/dispatcher"}, "stages": [{"replicas": 1}]},
        "status": {"conditions": [{"type": "Succeeded", "status": "True"}]},
    }
    kept = cached_user(DeclaredAdapter(kind), trainer, None)
    assert kept["spec"] == trainer["spec"]


def test_maps_of_strings_that_recur_across_objects_are_held_once() -> None:
    first, second = compacted(job("uid-1")), compacted(job("uid-2"))
    done = {"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-29T03:00:00Z"}
    a = compacted({"status": {"conditions": [dict(done)], "uncountedTerminatedPods": {}}})
    b = compacted({"status": {"conditions": [dict(done)], "uncountedTerminatedPods": {}}})
    assert a["status"]["conditions"][0] is b["status"]["conditions"][0]
    assert a["status"]["uncountedTerminatedPods"] is b["status"]["uncountedTerminatedPods"]
    assert first["status"]["conditions"][0] is second["status"]["conditions"][0]
    # Maps that differ, or hold more than strings, are each their own.
    assert first["metadata"]["labels"] is not second["metadata"]["labels"]
    counted = [compacted({"spec": {"n": 1}})["spec"] for _ in range(2)]
    assert counted[0] is not counted[1]
    # The same items in another order are another JSON text: not shared.
    swapped = compacted({"m": {"b": "2", "a": "1"}})["m"]
    assert swapped is not compacted({"m": {"a": "1", "b": "2"}})["m"]
    assert list(swapped) == ["b", "a"]


def test_the_maps_held_for_sharing_are_bounded() -> None:
    for i in range(SHARED_KEPT + 10):
        compacted({"metadata": {"labels": {"run": f"r{i}"}}})
    assert _held.cache_info().currsize == SHARED_KEPT
