"""How a Job claims its pods before a sync, as a table: owned, adopted, released or left alone."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from multiqueue.api import jobs
from multiqueue.api.meta import format_time
from multiqueue.controllers.job_claims import adoption_patch, claims, release_patch
from tests.unit.jobfixtures import cond
from tests.unit.test_job_sync import NOW, pod, running_job

OWNER_UID = "uid-1"


def _job(**changes: Any) -> dict[str, Any]:
    owner = running_job(completions=2, parallelism=2)
    if changes.get("deleting"):
        owner["metadata"]["deletionTimestamp"] = format_time(NOW)
    if changes.get("finished"):
        owner["status"]["conditions"] = [cond("Complete")]
    if changes.get("managed_by"):
        owner["spec"]["managedBy"] = changes["managed_by"]
    return owner


def _pod(owner: dict[str, Any], **changes: Any) -> dict[str, Any]:
    body = pod(owner)
    meta = body["metadata"]
    if changes.get("orphan"):
        meta["ownerReferences"] = []
        meta["finalizers"] = []
    if "owner_uid" in changes:
        meta["ownerReferences"][0]["uid"] = changes["owner_uid"]
    if changes.get("relabelled"):
        meta["labels"] = {"app": "elsewhere"}
    if changes.get("deleting"):
        meta["deletionTimestamp"] = format_time(NOW)
    if "namespace" in changes:
        meta["namespace"] = changes["namespace"]
    return body


@pytest.mark.parametrize(
    ("case", "job_changes", "pod_changes", "want"),
    [
        ("controlled and matching: owned", {}, {}, "owned"),
        ("controlled, labels no longer match: released", {}, {"relabelled": True}, "release"),
        (
            "controlled, no longer matching, Job being deleted: not its pod",
            {"deleting": True},
            {"relabelled": True},
            None,
        ),
        ("controlled by another Job: left alone", {}, {"owner_uid": "uid-other"}, None),
        ("orphan that matches: adopted", {}, {"orphan": True}, "adopt"),
        ("orphan that does not match: left alone", {}, {"orphan": True, "relabelled": True}, None),
        ("orphan being deleted: left alone", {}, {"orphan": True, "deleting": True}, None),
        ("orphan, Job being deleted: left alone", {"deleting": True}, {"orphan": True}, None),
        ("orphan, Job finished: left alone", {"finished": True}, {"orphan": True}, None),
        (
            "orphan, Job another controller's: left alone",
            {"managed_by": "example.com/other"},
            {"orphan": True},
            None,
        ),
        ("orphan of another namespace: left alone", {}, {"orphan": True, "namespace": "other"}, None),
    ],
)
def test_claims(
    case: str, job_changes: dict[str, Any], pod_changes: dict[str, Any], want: str | None
) -> None:
    owner = _job(**job_changes)
    candidate = _pod(owner, **pod_changes)
    claimed = claims(owner, [candidate, copy.deepcopy(candidate)])
    found = {
        name: [p["metadata"]["name"] for p in getattr(claimed, name)]
        for name in ("owned", "adopt", "release")
    }
    expected = {name: [candidate["metadata"]["name"]] if name == want else [] for name in found}
    assert found == expected, case


def test_adoption_patch_makes_the_job_controller_and_tracks_the_pod() -> None:
    owner = _job()
    orphan = _pod(owner, orphan=True)
    patch = adoption_patch(owner, orphan)["metadata"]
    assert patch["uid"] == orphan["metadata"]["uid"]
    assert patch["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": owner["metadata"]["name"],
            "uid": OWNER_UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert patch["finalizers"] == [jobs.TRACKING_FINALIZER]


def test_release_patch_drops_the_job_reference_and_the_tracking_finalizer() -> None:
    owner = _job()
    owned = _pod(owner)
    patch = release_patch(owner, owned)["metadata"]
    assert patch["ownerReferences"] == [{"$patch": "delete", "uid": OWNER_UID}]
    assert patch["$deleteFromPrimitiveList/finalizers"] == [jobs.TRACKING_FINALIZER]
