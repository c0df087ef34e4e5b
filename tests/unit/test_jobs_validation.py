"""Job defaulting, create validation and update validation (immutability) with upstream's paths and messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from multiqueue.api import jobs
from multiqueue.api.jobs import default_job, validate_job, validate_job_template_spec, validate_job_update
from tests.unit.jobfixtures import T0, job, with_status

# --- §1 defaulting ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({}, {"parallelism": 1, "completions": 1}, id="both-nil-become-1"),
        pytest.param(
            {"completions": 5}, {"parallelism": 1, "completions": 5}, id="parallelism-defaults-alone"
        ),
        pytest.param({"parallelism": 3}, {"parallelism": 3}, id="work-queue-keeps-nil-completions"),
        pytest.param({}, {"backoffLimit": 6}, id="backoff-limit-6"),
        pytest.param(
            {"completionMode": "Indexed", "completions": 2, "backoffLimitPerIndex": 1},
            {"backoffLimit": 2147483647},
            id="backoff-limit-max-with-per-index",
        ),
        pytest.param(
            {}, {"completionMode": "NonIndexed", "suspend": False, "manualSelector": False}, id="modes"
        ),
        pytest.param({}, {"podReplacementPolicy": "TerminatingOrFailed"}, id="replacement-default"),
        pytest.param(
            {
                "podFailurePolicy": {
                    "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
                }
            },
            {"podReplacementPolicy": "Failed"},
            id="replacement-failed-with-pod-failure-policy",
        ),
    ],
)
def test_spec_defaults(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    defaulted = job(**spec)["spec"]
    for key, value in expected.items():
        assert defaulted.get(key) == value, key
    if "completions" not in expected and "parallelism" in spec:
        assert "completions" not in defaulted


def test_pod_condition_pattern_status_defaults_to_true() -> None:
    rules = job(
        podFailurePolicy={"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    )
    assert rules["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"] == "True"


def test_never_defaulted_fields_stay_unset() -> None:
    spec = job()["spec"]
    for field in (
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
        "maxFailedIndexes",
        "managedBy",
        "successPolicy",
    ):
        assert field not in spec


def test_generated_selector_and_labels() -> None:
    created = job(name="pi", uid="u-7")
    labels = created["spec"]["template"]["metadata"]["labels"]
    assert labels == {
        "controller-uid": "u-7",
        "batch.kubernetes.io/controller-uid": "u-7",
        "job-name": "pi",
        "batch.kubernetes.io/job-name": "pi",
    }
    assert created["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-7"}}


def test_job_labels_copied_from_template_before_generated_ones() -> None:
    body = job()
    body["spec"]["template"]["metadata"] = {"labels": {"app": "pi"}}
    body["metadata"].pop("labels", None)
    body["spec"].pop("selector")
    created = default_job(body)
    assert created["metadata"]["labels"] == {"app": "pi"}


def test_manual_selector_is_left_alone() -> None:
    body = job()
    body["spec"].update(manualSelector=True, selector={"matchLabels": {"app": "x"}})
    body["spec"]["template"]["metadata"] = {"labels": {"app": "x"}}
    created = default_job(body)
    assert created["spec"]["selector"] == {"matchLabels": {"app": "x"}}
    assert created["spec"]["template"]["metadata"]["labels"] == {"app": "x"}


def test_create_clears_status() -> None:
    body = with_status(job(), succeeded=3)
    assert "status" not in default_job(body)


# --- §2 spec validation -------------------------------------------------------------------------------------


def _with(**changes: Any) -> dict[str, Any]:
    """A defaulted Job with spec fields changed after defaulting (as a hostile client could send)."""
    body = job()
    body["spec"].update(changes)
    return body


def _indexed(**changes: Any) -> dict[str, Any]:
    return _with(completionMode="Indexed", completions=changes.pop("completions", 4), **changes)


def _with_restart_policy(policy: str | None) -> dict[str, Any]:
    body = job()
    if policy is None:
        body["spec"]["template"]["spec"].pop("restartPolicy")
    else:
        body["spec"]["template"]["spec"]["restartPolicy"] = policy
    return body


PFP_EXIT = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}

SPEC_CASES: dict[str, tuple[dict[str, Any], str | None, str | None]] = {
    "valid": (job(), None, None),
    "negative-parallelism": (_with(parallelism=-1), "spec.parallelism", "must be greater than or equal to 0"),
    "negative-completions": (_with(completions=-1), "spec.completions", "must be greater than or equal to 0"),
    "negative-deadline": (
        _with(activeDeadlineSeconds=-1),
        "spec.activeDeadlineSeconds",
        "greater than or equal to 0",
    ),
    "negative-backoff": (_with(backoffLimit=-1), "spec.backoffLimit", "greater than or equal to 0"),
    "negative-ttl": (
        _with(ttlSecondsAfterFinished=-1),
        "spec.ttlSecondsAfterFinished",
        "greater than or equal to 0",
    ),
    "negative-per-index": (
        _indexed(backoffLimitPerIndex=-1),
        "spec.backoffLimitPerIndex",
        "greater than or equal to 0",
    ),
    "max-failed-without-per-index": (
        _indexed(maxFailedIndexes=1),
        "spec.backoffLimitPerIndex",
        "Required value: when maxFailedIndexes is specified",
    ),
    "max-failed-with-per-index": (_indexed(maxFailedIndexes=1, backoffLimitPerIndex=1), None, None),
    "managed-by-valid": (_with(managedBy="multiqueue.dev/dispatcher"), None, None),
    "managed-by-not-prefixed": (
        _with(managedBy="dispatcher"),
        "spec.managedBy",
        "must be a domain-prefixed path",
    ),
    "managed-by-bad-domain": (_with(managedBy="Bad_Domain/x"), "spec.managedBy", "RFC 1123 subdomain"),
    "managed-by-bad-path": (_with(managedBy="example.com/a b"), "spec.managedBy", "Invalid path"),
    "managed-by-empty": (_with(managedBy=""), "spec.managedBy", "Required value"),
    "managed-by-too-long": (_with(managedBy="example.com/" + "x" * 60), "spec.managedBy", "Too long"),
    "completion-mode-unknown": (
        _with(completionMode="Sometimes"),
        "spec.completionMode",
        "Unsupported value",
    ),
    "indexed-without-completions": (
        _with(completionMode="Indexed", completions=None),
        "spec.completions",
        "when completion mode is Indexed",
    ),
    "indexed-parallelism-too-large": (
        _indexed(parallelism=100001),
        "spec.parallelism",
        "must be less than or equal to 100000",
    ),
    "max-failed-above-completions": (
        _indexed(backoffLimitPerIndex=1, maxFailedIndexes=5),
        "spec.maxFailedIndexes",
        "must be less than or equal to completions",
    ),
    "high-completions-need-max-failed": (
        _indexed(completions=100001, backoffLimitPerIndex=1),
        "spec.maxFailedIndexes",
        "must be specified when completions is above 100000",
    ),
    "high-completions-parallelism": (
        _indexed(completions=100001, backoffLimitPerIndex=1, maxFailedIndexes=1, parallelism=10001),
        "spec.parallelism",
        "must be less than or equal to 10000 when completions are above 100000",
    ),
    "per-index-needs-indexed": (
        _with(backoffLimitPerIndex=1),
        "spec.backoffLimitPerIndex",
        "requires indexed completion mode",
    ),
    "indexed-hostname-too-long": (
        job(name="a" * 60, completionMode="Indexed", completions=1000),
        "metadata.name",
        "will not able to create pod with invalid DNS label",
    ),
    "pod-failure-policy-valid": (_with(podFailurePolicy=PFP_EXIT, podReplacementPolicy="Failed"), None, None),
    "pod-failure-policy-too-many-rules": (
        _with(podFailurePolicy={"rules": [PFP_EXIT["rules"][0]] * 21}, podReplacementPolicy="Failed"),
        "spec.podFailurePolicy.rules",
        "must have at most 20 items",
    ),
    "pod-failure-policy-both-matchers": (
        _with(
            podFailurePolicy={
                "rules": [
                    {
                        "action": "Ignore",
                        "onExitCodes": {"operator": "In", "values": [1]},
                        "onPodConditions": [{"type": "X", "status": "True"}],
                    }
                ]
            },
            podReplacementPolicy="Failed",
        ),
        "spec.podFailurePolicy.rules[0]",
        "specifying both OnExitCodes and OnPodConditions is not supported",
    ),
    "pod-failure-policy-no-matcher": (
        _with(podFailurePolicy={"rules": [{"action": "Ignore"}]}, podReplacementPolicy="Failed"),
        "spec.podFailurePolicy.rules[0]",
        "specifying one of OnExitCodes and OnPodConditions is required",
    ),
    "fail-index-needs-per-index": (
        _with(
            podFailurePolicy={
                "rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}]
            },
            podReplacementPolicy="Failed",
        ),
        "spec.podFailurePolicy.rules[0].action",
        "requires the backoffLimitPerIndex to be set",
    ),
    "exit-code-operator": (
        _with(
            podFailurePolicy={
                "rules": [{"action": "Ignore", "onExitCodes": {"operator": "Maybe", "values": [1]}}]
            },
            podReplacementPolicy="Failed",
        ),
        "spec.podFailurePolicy.rules[0].onExitCodes.operator",
        "Unsupported value",
    ),
    "exit-code-zero-with-in": (
        _with(
            podFailurePolicy={
                "rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [0, 1]}}]
            },
            podReplacementPolicy="Failed",
        ),
        "spec.podFailurePolicy.rules[0].onExitCodes.values[0]",
        "must not be 0 for the In operator",
    ),
    "exit-code-unsorted": (
        _with(
            podFailurePolicy={
                "rules": [{"action": "Ignore", "onExitCodes": {"operator": "NotIn", "values": [3, 1]}}]
            },
            podReplacementPolicy="Failed",
        ),
        "spec.podFailurePolicy.rules[0].onExitCodes.values",
        "must be ordered",
    ),
    "exit-code-duplicate": (
        _with(
            podFailurePolicy={
                "rules": [{"action": "Ignore", "onExitCodes": {"operator": "NotIn", "values": [1, 1]}}]
            },
            podReplacementPolicy="Failed",
        ),
        "spec.podFailurePolicy.rules[0].onExitCodes.values[1]",
        "Duplicate value",
    ),
    "exit-code-unknown-container": (
        _with(
            podFailurePolicy={
                "rules": [
                    {
                        "action": "Ignore",
                        "onExitCodes": {"containerName": "nope", "operator": "In", "values": [1]},
                    }
                ]
            },
            podReplacementPolicy="Failed",
        ),
        "spec.podFailurePolicy.rules[0].onExitCodes.containerName",
        "must be one of the container or initContainer names in the pod template",
    ),
    "pod-failure-policy-needs-never": (
        _with(
            podFailurePolicy=PFP_EXIT,
            podReplacementPolicy="Failed",
            template={
                **job()["spec"]["template"],
                "spec": {**job()["spec"]["template"]["spec"], "restartPolicy": "OnFailure"},
            },
        ),
        "spec.template.spec.restartPolicy",
        'only "Never" is supported when podFailurePolicy is specified',
    ),
    "restart-policy-always": (
        _with_restart_policy("Always"),
        "spec.template.spec.restartPolicy",
        'Required value: valid values: "OnFailure", "Never"',
    ),
    "restart-policy-empty": (
        _with_restart_policy(None),
        "spec.template.spec.restartPolicy",
        "Required value",
    ),
    "restart-policy-unknown": (
        _with_restart_policy("Sometimes"),
        "spec.template.spec.restartPolicy",
        "Unsupported value",
    ),
    "restart-policy-on-failure": (_with_restart_policy("OnFailure"), None, None),
    "replacement-unknown": (
        _with(podReplacementPolicy="Never"),
        "spec.podReplacementPolicy",
        "Unsupported value",
    ),
    "replacement-terminating-with-pfp": (
        _with(podFailurePolicy=PFP_EXIT, podReplacementPolicy="TerminatingOrFailed"),
        "spec.podReplacementPolicy",
        'supported values: "Failed"',
    ),
    "success-policy-valid": (
        _indexed(successPolicy={"rules": [{"succeededIndexes": "0-2", "succeededCount": 2}]}),
        None,
        None,
    ),
    "success-policy-needs-indexed": (
        _with(successPolicy={"rules": [{"succeededCount": 1}]}),
        "spec.successPolicy",
        "requires indexed completion mode",
    ),
    "success-policy-no-rules": (
        _indexed(successPolicy={"rules": []}),
        "spec.successPolicy.rules",
        "at least one rules must be specified",
    ),
    "success-policy-too-many-rules": (
        _indexed(successPolicy={"rules": [{"succeededCount": 1}] * 21}),
        "spec.successPolicy.rules",
        "must have at most 20 items",
    ),
    "success-policy-empty-rule": (
        _indexed(successPolicy={"rules": [{}]}),
        "spec.successPolicy.rules[0]",
        "at least one of succeededCount or succeededIndexes",
    ),
    "success-policy-bad-indexes": (
        _indexed(successPolicy={"rules": [{"succeededIndexes": "0-9"}]}),
        "spec.successPolicy.rules[0].succeededIndexes",
        'error parsing succeededIndexes: too large index: "9"',
    ),
    "success-policy-count-above-completions": (
        _indexed(successPolicy={"rules": [{"succeededCount": 5}]}),
        "spec.successPolicy.rules[0].succeededCount",
        "must be less than or equal to 4 (the number of specified completions)",
    ),
    "success-policy-count-above-listed": (
        _indexed(successPolicy={"rules": [{"succeededIndexes": "0", "succeededCount": 2}]}),
        "spec.successPolicy.rules[0].succeededCount",
        "(the number of indexes in the specified succeededIndexes field)",
    ),
    "success-policy-negative-count": (
        _indexed(successPolicy={"rules": [{"succeededCount": -1}]}),
        "spec.successPolicy.rules[0].succeededCount",
        "greater than or equal to 0",
    ),
    "selector-missing": (_with(selector=None), "spec.selector", "Required value"),
    "selector-not-matching-template": (
        _with(selector={"matchLabels": {"batch.kubernetes.io/controller-uid": "other"}}),
        "spec.template.metadata.labels",
        "`selector` does not match template `labels`",
    ),
    "no-containers": (
        _with(template={"spec": {"restartPolicy": "Never", "containers": []}}),
        "spec.template.spec.containers",
        "Required value",
    ),
    "duplicate-container-names": (
        _with(
            template={
                **job()["spec"]["template"],
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "a", "image": "i"}, {"name": "a", "image": "i"}],
                },
            }
        ),
        "spec.template.spec.containers[1].name",
        "Duplicate value",
    ),
    "missing-image": (
        _with(
            template={
                **job()["spec"]["template"],
                "spec": {"restartPolicy": "Never", "containers": [{"name": "a"}]},
            }
        ),
        "spec.template.spec.containers[0].image",
        "Required value",
    ),
}


@pytest.mark.parametrize(("body", "field", "message"), [
    pytest.param(body, field, message, id=name) for name, (body, field, message) in SPEC_CASES.items()
])  # fmt: skip
def test_create_rules(body: dict[str, Any], field: str | None, message: str | None) -> None:
    errors = validate_job(body)
    if field is None:
        assert errors == [], [str(e) for e in errors]
    else:
        assert any(e.field == field and message in e.message() for e in errors if message), [
            str(e) for e in errors
        ]


def test_generated_labels_must_be_present() -> None:
    body = job()
    del body["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"]
    errors = validate_job(body)
    assert "spec.template.metadata.labels[batch.kubernetes.io/job-name]: Required value" in [
        str(e) for e in errors
    ]


# --- updates and immutability -------------------------------------------------------------------------------


def _updated(old: dict[str, Any], **changes: Any) -> dict[str, Any]:
    new = copy.deepcopy(old)
    new["spec"].update(changes)
    return new


UPDATE_CASES: dict[str, tuple[dict[str, Any], dict[str, Any], str | None, str | None]] = {
    "parallelism-mutable": (job(), _updated(job(), parallelism=5), None, None),
    "suspend-mutable": (job(), _updated(job(), suspend=True), None, None),
    "deadline-backoff-ttl-mutable": (
        job(),
        _updated(job(), activeDeadlineSeconds=5, backoffLimit=1, ttlSecondsAfterFinished=9),
        None,
        None,
    ),
    "completions-immutable": (
        job(),
        _updated(job(), completions=3),
        "spec.completions",
        "field is immutable",
    ),
    "elastic-indexed-completions": (
        job(completionMode="Indexed", completions=3, parallelism=3),
        _updated(job(completionMode="Indexed", completions=3, parallelism=3), completions=5, parallelism=5),
        None,
        None,
    ),
    "elastic-indexed-completions-alone": (
        job(completionMode="Indexed", completions=3, parallelism=3),
        _updated(job(completionMode="Indexed", completions=3, parallelism=3), completions=5),
        "spec.completions",
        "can only be modified in tandem with spec.parallelism",
    ),
    "completion-mode-immutable": (
        job(),
        _updated(job(), completionMode="Indexed"),
        "spec.completionMode",
        "field is immutable",
    ),
    "managed-by-immutable": (
        job(),
        _updated(job(), managedBy="example.com/x"),
        "spec.managedBy",
        "field is immutable",
    ),
    "selector-immutable": (
        job(),
        _updated(job(), selector={"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-1", "x": "y"}}),
        "spec.selector",
        "field is immutable",
    ),
    "pod-failure-policy-immutable": (
        job(),
        _updated(job(), podFailurePolicy=PFP_EXIT, podReplacementPolicy="Failed"),
        "spec.podFailurePolicy",
        "field is immutable",
    ),
    "template-immutable": (
        job(),
        _updated(
            job(),
            template={
                **job()["spec"]["template"],
                "spec": {**job()["spec"]["template"]["spec"], "nodeSelector": {"a": "b"}},
            },
        ),
        "spec.template",
        "field is immutable",
    ),
    "template-scheduling-mutable-while-suspended-never-started": (
        job(suspend=True),
        _updated(
            job(suspend=True),
            template={
                **job()["spec"]["template"],
                "spec": {**job()["spec"]["template"]["spec"], "nodeSelector": {"a": "b"}},
            },
        ),
        None,
        None,
    ),
    "template-scheduling-immutable-once-started": (
        with_status(job(suspend=True), startTime=T0),
        _updated(
            with_status(job(suspend=True), startTime=T0),
            template={
                **job()["spec"]["template"],
                "spec": {**job()["spec"]["template"]["spec"], "nodeSelector": {"a": "b"}},
            },
        ),
        "spec.template",
        "field is immutable",
    ),
}


@pytest.mark.parametrize(("old", "new", "field", "message"), [
    pytest.param(old, new, field, message, id=name) for name, (old, new, field, message) in UPDATE_CASES.items()
])  # fmt: skip
def test_update_rules(
    old: dict[str, Any], new: dict[str, Any], field: str | None, message: str | None
) -> None:
    errors = validate_job_update(new, old)
    if field is None:
        assert errors == [], [str(e) for e in errors]
    else:
        assert any(e.field == field and message in e.message() for e in errors if message), [
            str(e) for e in errors
        ]


def test_job_template_spec_rules() -> None:
    template = {"spec": jobs.default_job_spec(job()["spec"] | {"selector": None})}
    template["spec"].pop("selector")
    assert validate_job_template_spec(template, "spec.jobTemplate") == []
    with_selector = copy.deepcopy(template)
    with_selector["spec"]["selector"] = {"matchLabels": {"a": "b"}}
    errors = validate_job_template_spec(with_selector, "spec.jobTemplate")
    assert [str(e).split(": ")[-1] for e in errors] == ["`selector` will be auto-generated"]
    manual = copy.deepcopy(template)
    manual["spec"]["manualSelector"] = True
    assert [e.field for e in validate_job_template_spec(manual, "spec.jobTemplate")] == [
        "spec.jobTemplate.spec.manualSelector"
    ]


def test_helpers() -> None:
    done = with_status(job(), conditions=[{"type": "Complete", "status": "True", "lastTransitionTime": T0}])
    assert jobs.is_finished(done) and jobs.is_complete(done) and not jobs.is_failed(done)
    finished = jobs.finished_condition(done)
    assert finished is not None and finished[0] == "Complete"
    assert not jobs.is_finished(with_status(job(), completionTime=T0))
    assert jobs.is_managed_by_builtin_controller(job())
    assert jobs.is_managed_by_builtin_controller(job(managedBy="kubernetes.io/job-controller"))
    assert not jobs.is_managed_by_builtin_controller(job(managedBy="multiqueue.dev/dispatcher"))
    assert jobs.managed_by(job(managedBy="multiqueue.dev/dispatcher")) == "multiqueue.dev/dispatcher"


@pytest.mark.parametrize(
    "garbage", [None, [], "x", {"spec": []}, {"spec": {"parallelism": "x", "template": []}}]
)
def test_malformed_input_never_raises(garbage: Any) -> None:
    default_job(garbage if isinstance(garbage, dict) else {})
    validate_job(garbage)
    validate_job_update(garbage, garbage)
    jobs.is_finished(garbage)
