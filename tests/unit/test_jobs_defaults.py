"""Job defaulting (reference §1): what the API server fills in when a Job is created."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from multiqueue.api import jobs
from multiqueue.api.jobdefaults import default_job, default_job_spec
from multiqueue.api.pods import MAX_INT32

PFP_CONDITIONS = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
GENERATED = {
    "job-name": "pi",
    "batch.kubernetes.io/job-name": "pi",
    "controller-uid": "u-1",
    "batch.kubernetes.io/controller-uid": "u-1",
}


def submitted(spec: dict[str, Any] | None = None, uid: str | None = "u-1", **meta: Any) -> dict[str, Any]:
    """A Job as a user submits it (not defaulted), with the UID the server assigns."""
    metadata: dict[str, Any] = {"name": "pi", "namespace": "default", **meta}
    if uid is not None:
        metadata["uid"] = uid
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"template": template, **(spec or {})},
    }


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({}, {"parallelism": 1, "completions": 1}, id="parallelism-and-completions-both-1"),
        pytest.param({"completions": 5}, {"parallelism": 1, "completions": 5}, id="parallelism-alone-1"),
        pytest.param(
            {"parallelism": 3}, {"parallelism": 3, "completions": None}, id="work-queue-completions-nil"
        ),
        pytest.param({"parallelism": 0}, {"parallelism": 0, "completions": None}, id="zero-parallelism-kept"),
        pytest.param({}, {"backoffLimit": 6}, id="backoff-limit-6"),
        pytest.param({"backoffLimit": 0}, {"backoffLimit": 0}, id="backoff-limit-kept"),
        pytest.param(
            {"completionMode": "Indexed", "completions": 2, "backoffLimitPerIndex": 1},
            {"backoffLimit": MAX_INT32},
            id="backoff-limit-max-int32-with-per-index",
        ),
        pytest.param({}, {"completionMode": "NonIndexed"}, id="completion-mode-non-indexed"),
        pytest.param(
            {"completionMode": "Indexed", "completions": 2},
            {"completionMode": "Indexed"},
            id="completion-mode-kept",
        ),
        pytest.param({}, {"suspend": False}, id="suspend-false"),
        pytest.param({"suspend": True}, {"suspend": True}, id="suspend-kept"),
        pytest.param({}, {"manualSelector": False}, id="manual-selector-false"),
        pytest.param(
            {}, {"podReplacementPolicy": "TerminatingOrFailed"}, id="replacement-terminating-or-failed"
        ),
        pytest.param(
            {"podFailurePolicy": PFP_CONDITIONS},
            {"podReplacementPolicy": "Failed"},
            id="replacement-failed-with-pod-failure-policy",
        ),
        pytest.param(
            {"podReplacementPolicy": "Failed"}, {"podReplacementPolicy": "Failed"}, id="replacement-kept"
        ),
        pytest.param(
            {},
            {
                "activeDeadlineSeconds": None,
                "ttlSecondsAfterFinished": None,
                "maxFailedIndexes": None,
                "managedBy": None,
                "successPolicy": None,
                "backoffLimitPerIndex": None,
            },
            id="never-defaulted",
        ),
    ],
)
def test_spec_defaults(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    defaulted = default_job_spec(submitted(spec)["spec"])
    assert {key: defaulted.get(key) for key in expected} == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [pytest.param(None, "True", id="empty-becomes-true"), pytest.param("False", "False", id="kept")],
)
def test_pod_condition_pattern_status(status: str | None, expected: str) -> None:
    pattern: dict[str, Any] = {"type": "DisruptionTarget"}
    if status is not None:
        pattern["status"] = status
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [pattern]}]}
    defaulted = default_job_spec({"podFailurePolicy": policy})
    assert defaulted["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"] == expected


def test_pod_template_gets_pod_defaults() -> None:
    spec = default_job_spec({"template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}})
    assert spec["template"]["spec"]["restartPolicy"] == "Always"  # then refused by validation, as upstream
    assert spec["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"


def test_spec_defaults_generate_no_selector() -> None:
    """A CronJob's jobTemplate shares the spec defaults but never gets a selector."""
    spec = default_job_spec(submitted()["spec"])
    assert "selector" not in spec
    assert "metadata" not in spec["template"]


def test_selector_and_pod_labels_generated_from_uid() -> None:
    created = default_job(submitted())
    assert created["spec"]["template"]["metadata"]["labels"] == GENERATED
    assert created["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}


def test_user_template_labels_kept_and_conflicts_left_to_validation() -> None:
    job = submitted()
    job["spec"]["template"]["metadata"] = {"labels": {"app": "pi", "job-name": "other"}}
    labels = default_job(job)["spec"]["template"]["metadata"]["labels"]
    assert labels == {**GENERATED, "app": "pi", "job-name": "other"}


def test_user_selector_gets_the_uid_requirement() -> None:
    job = submitted({"selector": {"matchLabels": {"app": "pi"}}})
    selector = default_job(job)["spec"]["selector"]
    assert selector == {"matchLabels": {"app": "pi", "batch.kubernetes.io/controller-uid": "u-1"}}


@pytest.mark.parametrize(
    ("spec", "uid"),
    [
        pytest.param(
            {"manualSelector": True, "selector": {"matchLabels": {"app": "x"}}}, "u-1", id="manual-selector"
        ),
        pytest.param({}, None, id="no-uid-yet"),
    ],
)
def test_no_generation(spec: dict[str, Any], uid: str | None) -> None:
    job = submitted(spec, uid=uid)
    job["spec"]["template"]["metadata"] = {"labels": {"app": "x"}}
    created = default_job(job)
    assert created["spec"]["template"]["metadata"]["labels"] == {"app": "x"}
    assert created["spec"].get("selector") == spec.get("selector")


def test_job_labels_copied_from_final_template_labels_when_empty() -> None:
    """Upstream shows the generated labels on the Job too (kubectl describe job: Labels: batch.kubernetes.io/...)."""
    job = submitted()
    job["spec"]["template"]["metadata"] = {"labels": {"app": "pi"}}
    assert default_job(job)["metadata"]["labels"] == {**GENERATED, "app": "pi"}


def test_job_labels_kept_when_set() -> None:
    assert default_job(submitted(labels={"team": "a"}))["metadata"]["labels"] == {"team": "a"}


def test_create_drops_status_and_does_not_mutate_input() -> None:
    job = submitted()
    job["status"] = {"succeeded": 3}
    before = copy.deepcopy(job)
    created = default_job(job)
    assert "status" not in created
    assert job == before


# --- reading a Job: unset fields read as their defaults ------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({}, ("NonIndexed", False, None, 1, False, None, True), id="unset"),
        pytest.param(
            {"completionMode": "Indexed", "completions": 4, "parallelism": 2, "suspend": True},
            ("Indexed", True, 4, 2, True, None, True),
            id="indexed-suspended",
        ),
        pytest.param(
            {"managedBy": "kubernetes.io/job-controller"},
            ("NonIndexed", False, None, 1, False, "kubernetes.io/job-controller", True),
            id="reserved-controller",
        ),
        pytest.param(
            {"managedBy": "multiqueue.dev/dispatcher"},
            ("NonIndexed", False, None, 1, False, "multiqueue.dev/dispatcher", False),
            id="external-controller",
        ),
        pytest.param(
            {"completionMode": 3, "completions": "4", "parallelism": True, "suspend": "yes", "managedBy": ""},
            ("3", False, None, 1, False, None, True),
            id="wrong-types",
        ),
    ],
)
def test_spec_accessors(spec: dict[str, Any], expected: tuple[Any, ...]) -> None:
    body = {"spec": spec}
    assert (
        jobs.completion_mode(body),
        jobs.is_indexed(body),
        jobs.completions(body),
        jobs.parallelism(body),
        jobs.is_suspended(body),
        jobs.managed_by(body),
        jobs.is_managed_by_builtin_controller(body),
    ) == expected


def _conditions(*conditions: tuple[str, str]) -> dict[str, Any]:
    stamp = "2026-01-01T00:05:00Z"
    return {
        "status": {
            "conditions": [{"type": t, "status": s, "lastTransitionTime": stamp} for t, s in conditions]
        }
    }


@pytest.mark.parametrize(
    ("body", "finished"),
    [
        pytest.param(_conditions(), None, id="running"),
        pytest.param(
            {"status": {"completionTime": "2026-01-01T00:05:00Z"}}, None, id="completion-time-alone"
        ),
        pytest.param(_conditions(("SuccessCriteriaMet", "True")), None, id="interim-only"),
        pytest.param(_conditions(("Complete", "False")), None, id="complete-false"),
        pytest.param(
            _conditions(("SuccessCriteriaMet", "True"), ("Complete", "True")), "Complete", id="complete"
        ),
        pytest.param(_conditions(("FailureTarget", "True"), ("Failed", "True")), "Failed", id="failed"),
    ],
)
def test_finished(body: dict[str, Any], finished: str | None) -> None:
    assert jobs.is_finished(body) == (finished is not None)
    assert jobs.is_complete(body) == (finished == "Complete")
    assert jobs.is_failed(body) == (finished == "Failed")
    found = jobs.finished_condition(body)
    assert (found[0] if found else None) == finished
    if found:
        assert found[1] is not None and found[1].minute == 5


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(None, id="none"),
        pytest.param([], id="list"),
        pytest.param({}, id="empty"),
        pytest.param(
            {"status": {"conditions": [None, {"type": "Complete", "status": "True"}]}}, id="conditions"
        ),
        pytest.param({"metadata": [], "spec": "x"}, id="wrong-types"),
        pytest.param({"metadata": {"uid": "u"}, "spec": {"template": []}}, id="template-list"),
        pytest.param({"metadata": {"uid": "u"}, "spec": {"template": None}}, id="template-null"),
        pytest.param(
            {"metadata": {"uid": "u"}, "spec": {"template": {"metadata": "x"}}}, id="template-meta-str"
        ),
        pytest.param(
            {"metadata": {"uid": "u"}, "spec": {"template": {"metadata": {"labels": 3}}}}, id="labels-int"
        ),
        pytest.param(
            {"metadata": {"uid": "u"}, "spec": {"selector": "x", "podFailurePolicy": []}}, id="selector-str"
        ),
        pytest.param(
            {"metadata": {"uid": "u"}, "spec": {"selector": {"matchLabels": []}}}, id="match-labels-list"
        ),
        pytest.param(
            {"spec": {"parallelism": "x", "podFailurePolicy": {"rules": ["x", {"onPodConditions": [1]}]}}},
            id="policy-rules",
        ),
    ],
)
def test_malformed_input_never_raises(garbage: Any) -> None:
    default_job(garbage)
    default_job_spec(garbage.get("spec") if isinstance(garbage, dict) else garbage)
    for reader in (
        jobs.is_finished,
        jobs.finished_condition,
        jobs.completion_mode,
        jobs.parallelism,
        jobs.managed_by,
    ):
        reader(garbage)
