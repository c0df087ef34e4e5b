"""Job create validation and update validation (reference §2), with upstream's field paths and messages.

Every rule has a case that it refuses (field path and the key part of the message asserted) and one it accepts.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from multiqueue.api.errors import FieldError
from multiqueue.api.jobdefaults import default_job_spec
from multiqueue.api.jobspec import validate_job, validate_job_template_spec
from multiqueue.api.jobupdate import validate_job_update
from tests.unit.jobfixtures import T0, cond, job, with_status

Case = tuple[dict[str, Any], str | None, str | None]


def _with(base: dict[str, Any] | None = None, **changes: Any) -> dict[str, Any]:
    """A defaulted Job with spec fields changed afterwards, as a client could send them."""
    body = copy.deepcopy(base if base is not None else job())
    body["spec"].update(changes)
    return body


def _indexed(**changes: Any) -> dict[str, Any]:
    return _with(completionMode="Indexed", completions=changes.pop("completions", 4), **changes)


def _pod(**changes: Any) -> dict[str, Any]:
    """A defaulted Job whose pod template spec has ``changes`` (None removes a field)."""
    body = job()
    pod_spec = body["spec"]["template"]["spec"]
    for key, value in changes.items():
        if value is None:
            pod_spec.pop(key, None)
        else:
            pod_spec[key] = value
    return body


def _template_labels(labels: dict[str, str]) -> dict[str, Any]:
    body = job()
    body["spec"]["template"]["metadata"]["labels"] = labels
    return body


def _pfp(*rules: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return _with(**{"podFailurePolicy": {"rules": list(rules)}, "podReplacementPolicy": "Failed", **changes})


def _exit_rule(operator: str = "In", values: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    on_exit = {"operator": operator, "values": [42] if values is None else values, **extra}
    return {"action": "FailJob", "onExitCodes": on_exit}


def _condition_rule(*patterns: dict[str, Any], action: str = "Ignore") -> dict[str, Any]:
    return {"action": action, "onPodConditions": list(patterns)}


def _success(*rules: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return _indexed(successPolicy={"rules": list(rules)}, **changes)


def _meta(**changes: Any) -> dict[str, Any]:
    body = job()
    body["metadata"].update(changes)
    return body


DISRUPTION = {"type": "DisruptionTarget", "status": "True"}
GE0 = "must be greater than or equal to 0"
MAX_INT = "must be an integer"

CREATE_CASES: dict[str, Case] = {
    "valid-default": (job(), None, None),
    # Non-negative integers.
    **{
        f"{field}-negative": (_with(**{field: -1}), f"spec.{field}", GE0)
        for field in (
            "parallelism",
            "completions",
            "activeDeadlineSeconds",
            "backoffLimit",
            "ttlSecondsAfterFinished",
        )
    },
    "per-index-negative": (_indexed(backoffLimitPerIndex=-1), "spec.backoffLimitPerIndex", GE0),
    "max-failed-negative": (
        _indexed(backoffLimitPerIndex=1, maxFailedIndexes=-1),
        "spec.maxFailedIndexes",
        GE0,
    ),
    "counts-zero": (
        _with(
            parallelism=0, completions=0, backoffLimit=0, ttlSecondsAfterFinished=0, activeDeadlineSeconds=0
        ),
        None,
        None,
    ),
    "parallelism-not-a-number": (_with(parallelism="x"), "spec.parallelism", MAX_INT),
    "completions-bool": (_with(completions=True), "spec.completions", MAX_INT),
    # maxFailedIndexes needs backoffLimitPerIndex.
    "max-failed-without-per-index": (
        _indexed(maxFailedIndexes=1),
        "spec.backoffLimitPerIndex",
        "Required value: when maxFailedIndexes is specified",
    ),
    "max-failed-with-per-index": (_indexed(maxFailedIndexes=1, backoffLimitPerIndex=1), None, None),
    # managedBy.
    "managed-by-custom": (_with(managedBy="multiqueue.dev/dispatcher"), None, None),
    "managed-by-reserved": (_with(managedBy="kubernetes.io/job-controller"), None, None),
    "managed-by-path-characters": (_with(managedBy="example.com/a~b%c:d"), None, None),
    "managed-by-no-slash": (
        _with(managedBy="dispatcher"),
        "spec.managedBy",
        'must be a domain-prefixed path (such as "acme.io/foo")',
    ),
    "managed-by-empty-path": (
        _with(managedBy="example.com/"),
        "spec.managedBy",
        "must be a domain-prefixed path",
    ),
    "managed-by-bad-domain": (
        _with(managedBy="Bad_Domain/x"),
        "spec.managedBy",
        "a lowercase RFC 1123 subdomain",
    ),
    "managed-by-bad-path": (
        _with(managedBy="example.com/a b"),
        "spec.managedBy",
        'Invalid value: "a b": Invalid path',
    ),
    "managed-by-empty": (_with(managedBy=""), "spec.managedBy", "Required value"),
    "managed-by-too-long": (
        _with(managedBy="example.com/" + "x" * 52),
        "spec.managedBy",
        "Too long: may not be more than 63 bytes",
    ),
    "managed-by-63": (_with(managedBy="example.com/" + "x" * 51), None, None),
    # completionMode.
    "completion-mode-unknown": (
        _with(completionMode="Sometimes"),
        "spec.completionMode",
        'Unsupported value: "Sometimes": supported values: "NonIndexed", "Indexed"',
    ),
    "indexed": (_indexed(), None, None),
    "indexed-without-completions": (
        _with(completionMode="Indexed", completions=None),
        "spec.completions",
        "Required value: when completion mode is Indexed",
    ),
    "indexed-parallelism-100000": (_indexed(parallelism=100000), None, None),
    "indexed-parallelism-too-large": (
        _indexed(parallelism=100001),
        "spec.parallelism",
        "must be less than or equal to 100000 when completion mode is Indexed",
    ),
    "max-failed-above-completions": (
        _indexed(backoffLimitPerIndex=1, maxFailedIndexes=5),
        "spec.maxFailedIndexes",
        "must be less than or equal to completions",
    ),
    "max-failed-above-100000": (
        _indexed(completions=200000, backoffLimitPerIndex=1, maxFailedIndexes=100001, parallelism=1),
        "spec.maxFailedIndexes",
        "Invalid value: 100001: must be less than or equal to 100000",
    ),
    "high-completions-within-limits": (
        _indexed(completions=100001, backoffLimitPerIndex=1, maxFailedIndexes=10000, parallelism=10000),
        None,
        None,
    ),
    "high-completions-need-max-failed": (
        _indexed(completions=100001, backoffLimitPerIndex=1),
        "spec.maxFailedIndexes",
        "Required value: must be specified when completions is above 100000",
    ),
    "high-completions-parallelism": (
        _indexed(completions=100001, backoffLimitPerIndex=1, maxFailedIndexes=1, parallelism=10001),
        "spec.parallelism",
        "must be less than or equal to 10000 when completions are above 100000 and used with backoff limit per index",
    ),
    "high-completions-max-failed": (
        _indexed(completions=100001, backoffLimitPerIndex=1, maxFailedIndexes=10001),
        "spec.maxFailedIndexes",
        "must be less than or equal to 10000 when completions are above 100000",
    ),
    "per-index-needs-indexed": (
        _with(backoffLimitPerIndex=1),
        "spec.backoffLimitPerIndex",
        "Invalid value: 1: requires indexed completion mode",
    ),
    "max-failed-needs-indexed": (
        _with(backoffLimitPerIndex=1, maxFailedIndexes=1),
        "spec.maxFailedIndexes",
        "requires indexed completion mode",
    ),
    "indexed-hostname-too-long": (
        job(name="a" * 60, completionMode="Indexed", completions=1000),
        "metadata.name",
        "will not able to create pod with invalid DNS label: " + "a" * 60 + "-999",
    ),
    "indexed-hostname-fits": (job(name="a" * 60, completionMode="Indexed", completions=100), None, None),
    # podFailurePolicy.
    "pod-failure-policy-exit-codes": (_pfp(_exit_rule()), None, None),
    "pod-failure-policy-conditions": (_pfp(_condition_rule(DISRUPTION)), None, None),
    "pod-failure-policy-20-rules": (_pfp(*[_exit_rule()] * 20), None, None),
    "pod-failure-policy-21-rules": (
        _pfp(*[_exit_rule()] * 21),
        "spec.podFailurePolicy.rules",
        "must have at most 20 items",
    ),
    "rule-both-matchers": (
        _pfp({**_exit_rule(), "onPodConditions": [DISRUPTION]}),
        "spec.podFailurePolicy.rules[0]",
        "specifying both OnExitCodes and OnPodConditions is not supported",
    ),
    "rule-no-matcher": (
        _pfp({"action": "Ignore"}),
        "spec.podFailurePolicy.rules[0]",
        "specifying one of OnExitCodes and OnPodConditions is required",
    ),
    "rule-action-empty": (
        _pfp({**_exit_rule(), "action": ""}),
        "spec.podFailurePolicy.rules[0].action",
        'Required value: valid values: ["Count" "FailIndex" "FailJob" "Ignore"]',
    ),
    "rule-action-unknown": (
        _pfp({**_exit_rule(), "action": "Retry"}),
        "spec.podFailurePolicy.rules[0].action",
        'Unsupported value: "Retry": supported values: "Count", "FailIndex", "FailJob", "Ignore"',
    ),
    "fail-index-needs-per-index": (
        _pfp({**_exit_rule(), "action": "FailIndex"}),
        "spec.podFailurePolicy.rules[0].action",
        "requires the backoffLimitPerIndex to be set",
    ),
    "fail-index-with-per-index": (
        _pfp(
            {**_exit_rule(), "action": "FailIndex"},
            completionMode="Indexed",
            completions=2,
            backoffLimitPerIndex=1,
        ),
        None,
        None,
    ),
    "exit-code-operator-empty": (
        _pfp(_exit_rule(operator="")),
        "spec.podFailurePolicy.rules[0].onExitCodes.operator",
        'Required value: valid values: ["In" "NotIn"]',
    ),
    "exit-code-operator-unknown": (
        _pfp(_exit_rule(operator="Maybe")),
        "spec.podFailurePolicy.rules[0].onExitCodes.operator",
        'Unsupported value: "Maybe"',
    ),
    "exit-code-values-empty": (
        _pfp(_exit_rule(values=[])),
        "spec.podFailurePolicy.rules[0].onExitCodes.values",
        "at least one value is required",
    ),
    "exit-code-values-255": (_pfp(_exit_rule(values=list(range(1, 256)))), None, None),
    "exit-code-values-256": (
        _pfp(_exit_rule(values=list(range(1, 257)))),
        "spec.podFailurePolicy.rules[0].onExitCodes.values",
        "must have at most 255 items",
    ),
    "exit-code-zero-with-in": (
        _pfp(_exit_rule(values=[0, 1])),
        "spec.podFailurePolicy.rules[0].onExitCodes.values[0]",
        "must not be 0 for the In operator",
    ),
    "exit-code-zero-with-not-in": (_pfp(_exit_rule(operator="NotIn", values=[0, 1])), None, None),
    "exit-code-unsorted": (
        _pfp(_exit_rule(values=[3, 1])),
        "spec.podFailurePolicy.rules[0].onExitCodes.values",
        "must be ordered",
    ),
    "exit-code-duplicate": (
        _pfp(_exit_rule(values=[1, 1])),
        "spec.podFailurePolicy.rules[0].onExitCodes.values[1]",
        "Duplicate value: 1",
    ),
    "exit-code-not-a-number": (
        _pfp(_exit_rule(values=["x"])),
        "spec.podFailurePolicy.rules[0].onExitCodes.values[0]",
        MAX_INT,
    ),
    "exit-code-container-known": (_pfp(_exit_rule(containerName="main")), None, None),
    "exit-code-container-unknown": (
        _pfp(_exit_rule(containerName="nope")),
        "spec.podFailurePolicy.rules[0].onExitCodes.containerName",
        "must be one of the container or initContainer names in the pod template",
    ),
    "pod-conditions-20": (_pfp(_condition_rule(*[DISRUPTION] * 20)), None, None),
    "pod-conditions-21": (
        _pfp(_condition_rule(*[DISRUPTION] * 21)),
        "spec.podFailurePolicy.rules[0].onPodConditions",
        "must have at most 20 items",
    ),
    "pod-condition-status-empty": (
        _pfp(_condition_rule({"type": "DisruptionTarget", "status": ""})),
        "spec.podFailurePolicy.rules[0].onPodConditions[0].status",
        'Required value: valid values: ["False" "True" "Unknown"]',
    ),
    "pod-condition-status-unknown": (
        _pfp(_condition_rule({"type": "DisruptionTarget", "status": "Maybe"})),
        "spec.podFailurePolicy.rules[0].onPodConditions[0].status",
        'Unsupported value: "Maybe"',
    ),
    "pod-condition-type-invalid": (
        _pfp(_condition_rule({"type": "not a type", "status": "True"})),
        "spec.podFailurePolicy.rules[0].onPodConditions[0].type",
        "name part must consist of alphanumeric characters",
    ),
    "pod-failure-policy-needs-never": (
        _pfp(
            _exit_rule(),
            template={
                **job()["spec"]["template"],
                "spec": {**job()["spec"]["template"]["spec"], "restartPolicy": "OnFailure"},
            },
        ),
        "spec.template.spec.restartPolicy",
        'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified',
    ),
    # restartPolicy.
    "restart-policy-never": (_pod(restartPolicy="Never"), None, None),
    "restart-policy-on-failure": (_pod(restartPolicy="OnFailure"), None, None),
    "restart-policy-always": (
        _pod(restartPolicy="Always"),
        "spec.template.spec.restartPolicy",
        'Required value: valid values: "OnFailure", "Never"',
    ),
    "restart-policy-unset": (_pod(restartPolicy=None), "spec.template.spec.restartPolicy", "Required value"),
    "restart-policy-unknown": (
        _pod(restartPolicy="Sometimes"),
        "spec.template.spec.restartPolicy",
        'Unsupported value: "Sometimes": supported values: "OnFailure", "Never"',
    ),
    # podReplacementPolicy.
    "replacement-terminating-or-failed": (_with(podReplacementPolicy="TerminatingOrFailed"), None, None),
    "replacement-unknown": (
        _with(podReplacementPolicy="Never"),
        "spec.podReplacementPolicy",
        'Unsupported value: "Never": supported values: "Failed", "TerminatingOrFailed"',
    ),
    "replacement-terminating-with-pfp": (
        _pfp(_exit_rule(), podReplacementPolicy="TerminatingOrFailed"),
        "spec.podReplacementPolicy",
        'Unsupported value: "TerminatingOrFailed": supported values: "Failed"',
    ),
    # successPolicy.
    "success-policy-valid": (_success({"succeededIndexes": "0-2", "succeededCount": 2}), None, None),
    "success-policy-count-only": (_success({"succeededCount": 4}), None, None),
    "success-policy-needs-indexed": (
        _with(successPolicy={"rules": [{"succeededCount": 1}]}),
        "spec.successPolicy",
        "requires indexed completion mode",
    ),
    "success-policy-no-rules": (
        _success(),
        "spec.successPolicy.rules",
        "Required value: at least one rules must be specified when the successPolicy is specified",
    ),
    "success-policy-20-rules": (_success(*[{"succeededCount": 1}] * 20), None, None),
    "success-policy-21-rules": (
        _success(*[{"succeededCount": 1}] * 21),
        "spec.successPolicy.rules",
        "must have at most 20 items",
    ),
    "success-rule-empty": (
        _success({}),
        "spec.successPolicy.rules[0]",
        "at least one of succeededCount or succeededIndexes must be specified",
    ),
    "success-indexes-too-long": (
        _success({"succeededIndexes": "0," * 40000}),
        "spec.successPolicy.rules[0].succeededIndexes",
        "Too long: may not be more than 65536 bytes",
    ),
    "success-indexes-beyond-completions": (
        _success({"succeededIndexes": "0-9"}),
        "spec.successPolicy.rules[0].succeededIndexes",
        'error parsing succeededIndexes: too large index: "9"',
    ),
    "success-indexes-malformed": (
        _success({"succeededIndexes": "1,0"}),
        "spec.successPolicy.rules[0].succeededIndexes",
        "error parsing succeededIndexes: non-increasing order, previous: 1, current: 0",
    ),
    "success-count-negative": (
        _success({"succeededCount": -1}),
        "spec.successPolicy.rules[0].succeededCount",
        GE0,
    ),
    "success-count-above-completions": (
        _success({"succeededCount": 5}),
        "spec.successPolicy.rules[0].succeededCount",
        "must be less than or equal to 4 (the number of specified completions)",
    ),
    "success-count-above-listed": (
        _success({"succeededIndexes": "0", "succeededCount": 2}),
        "spec.successPolicy.rules[0].succeededCount",
        "must be less than or equal to 1 (the number of indexes in the specified succeededIndexes field)",
    ),
    # Selector and generated labels.
    "selector-missing": (_with(selector=None), "spec.selector", "Required value"),
    "selector-missing-matches-nothing": (
        _with(selector=None),
        "spec.template.metadata.labels",
        "`selector` does not match template `labels`",
    ),
    "selector-not-matching-template": (
        _with(selector={"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-1", "app": "x"}}),
        "spec.template.metadata.labels",
        "`selector` does not match template `labels`",
    ),
    "selector-not-auto-generated": (
        _with(selector={"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-1", "app": "x"}}),
        "spec.selector",
        "`selector` not auto-generated",
    ),
    "selector-bad-operator": (
        _with(selector={"matchExpressions": [{"key": "a", "operator": "Near"}]}),
        "spec.selector.matchExpressions[0].operator",
        "not a valid selector operator",
    ),
    "selector-in-without-values": (
        _with(selector={"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
        "spec.selector.matchExpressions[0].values",
        "must be specified when `operator` is 'In' or 'NotIn'",
    ),
    "selector-exists-with-values": (
        _with(selector={"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
        "spec.selector.matchExpressions[0].values",
        "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
    ),
    "selector-bad-label-value": (
        _with(selector={"matchLabels": {"a": "not valid"}}),
        "spec.selector.matchLabels",
        "a valid label must be an empty string",
    ),
    "manual-selector": (
        _with(_template_labels({"app": "x"}), manualSelector=True, selector={"matchLabels": {"app": "x"}}),
        None,
        None,
    ),
    "generated-label-missing": (
        _template_labels(
            {k: v for k, v in job()["spec"]["template"]["metadata"]["labels"].items() if k != "job-name"}
        ),
        "spec.template.metadata.labels[job-name]",
        "Required value: must be 'pi'",
    ),
    "generated-label-wrong": (
        _template_labels(
            {**job()["spec"]["template"]["metadata"]["labels"], "batch.kubernetes.io/job-name": "other"}
        ),
        "spec.template.metadata.labels[batch.kubernetes.io/job-name]",
        "must be 'pi'",
    ),
    "uid-missing": (_meta(uid=""), "metadata.uid", "Required value"),
    # Object metadata and the pod template.
    "name-invalid": (_meta(name="Not_A_Name"), "metadata.name", "a lowercase RFC 1123 subdomain"),
    "template-label-invalid": (
        _template_labels({**job()["spec"]["template"]["metadata"]["labels"], "bad key!": "x"}),
        "spec.template.labels",
        "name part must consist of alphanumeric characters",
    ),
    "no-containers": (_pod(containers=[]), "spec.template.spec.containers", "Required value"),
    "container-name-invalid": (
        _pod(containers=[{"name": "Main", "image": "busybox"}]),
        "spec.template.spec.containers[0].name",
        "a lowercase RFC 1123 label",
    ),
    "duplicate-container-names": (
        _pod(containers=[{"name": "a", "image": "i"}, {"name": "a", "image": "i"}]),
        "spec.template.spec.containers[1].name",
        'Duplicate value: "a"',
    ),
    "missing-image": (
        _pod(containers=[{"name": "a"}]),
        "spec.template.spec.containers[0].image",
        "Required value",
    ),
    "env-name-invalid": (
        _pod(containers=[{"name": "a", "image": "i", "env": [{"name": "A=B"}]}]),
        "spec.template.spec.containers[0].env[0].name",
        "printable ASCII characters other than '='",
    ),
}


def _assert_case(errors: list[FieldError], field: str | None, message: str | None) -> None:
    if field is None:
        assert errors == [], [str(e) for e in errors]
    else:
        assert any(e.field == field and message in e.body() for e in errors if message), [
            str(e) for e in errors
        ]


@pytest.mark.parametrize(("body", "field", "message"), [
    pytest.param(*case, id=name) for name, case in CREATE_CASES.items()
])  # fmt: skip
def test_create_rules(body: dict[str, Any], field: str | None, message: str | None) -> None:
    _assert_case(validate_job(body), field, message)


# --- the jobTemplate of a CronJob ---------------------------------------------------------------------------


def _job_template(**changes: Any) -> dict[str, Any]:
    spec = default_job_spec(job()["spec"] | {"selector": None})
    spec.pop("selector")
    spec["template"].pop("metadata")
    spec.update(changes)
    return {"spec": spec}


TEMPLATE_CASES: dict[str, Case] = {
    "valid": (_job_template(), None, None),
    "selector-set": (
        _job_template(selector={"matchLabels": {"a": "b"}}),
        "spec.jobTemplate.spec.selector",
        "`selector` will be auto-generated",
    ),
    "manual-selector-true": (
        _job_template(manualSelector=True),
        "spec.jobTemplate.spec.manualSelector",
        'Unsupported value: true: supported values: "nil", "false"',
    ),
    "spec-rules-apply": (
        _job_template(parallelism=-1),
        "spec.jobTemplate.spec.parallelism",
        GE0,
    ),
}


@pytest.mark.parametrize(("template", "field", "message"), [
    pytest.param(*case, id=name) for name, case in TEMPLATE_CASES.items()
])  # fmt: skip
def test_job_template_rules(template: dict[str, Any], field: str | None, message: str | None) -> None:
    _assert_case(validate_job_template_spec(template, "spec.jobTemplate"), field, message)


# --- updates ------------------------------------------------------------------------------------------------

UpdateCase = tuple[dict[str, Any], dict[str, Any], str | None, str | None]
ELASTIC = job(completionMode="Indexed", completions=3, parallelism=3)
SUSPENDED = job(suspend=True)
STARTED_SUSPENDED = with_status(SUSPENDED, startTime=T0)
# What the Job controller leaves when it suspends a Job that ran: startTime cleared, the Suspended condition set.
SUSPENDED_AGAIN = with_status(SUSPENDED, conditions=[cond("Suspended", reason="JobSuspended")])
SUSPENDED_WITH_ACTIVE = with_status(SUSPENDED, active=1)
SUSPENDED_AGAIN_STARTED = with_status(
    SUSPENDED, startTime=T0, conditions=[cond("Suspended", reason="JobSuspended")]
)
RESUMED_STARTED = with_status(
    SUSPENDED, startTime=T0, conditions=[cond("Suspended", "False", reason="JobResumed")]
)


def _new_template(base: dict[str, Any], **pod_spec: Any) -> dict[str, Any]:
    body = copy.deepcopy(base)
    body["spec"]["template"]["spec"].update(pod_spec)
    return body


def _new_template_meta(base: dict[str, Any], **meta: Any) -> dict[str, Any]:
    body = copy.deepcopy(base)
    body["spec"]["template"]["metadata"].update(meta)
    return body


def _resources(base: dict[str, Any], **resources: Any) -> dict[str, Any]:
    """``base`` with its container's resources (and an init container's, given ``init``) replaced."""
    body = copy.deepcopy(base)
    pod_spec = body["spec"]["template"]["spec"]
    init = resources.pop("init", None)
    pod_spec["containers"][0]["resources"] = resources
    if init is not None:
        pod_spec["initContainers"] = [{**pod_spec["containers"][0], "name": "init", "resources": init}]
    return body


CPU = {"requests": {"cpu": "10m"}, "limits": {"cpu": "100m"}}
WITH_INIT = _resources(SUSPENDED, init=CPU, **CPU)
MORE_CPU = {"requests": {"cpu": "20m", "nvidia.com/gpu": "1"}, "limits": {"cpu": "1", "nvidia.com/gpu": "1"}}


def _without_prefixed_labels(base: dict[str, Any]) -> dict[str, Any]:
    """A Job created before the batch.kubernetes.io/ labels existed."""
    body = copy.deepcopy(base)
    body["spec"]["selector"] = {"matchLabels": {"controller-uid": "uid-1"}}
    labels = body["spec"]["template"]["metadata"]["labels"]
    for key in ("batch.kubernetes.io/job-name", "batch.kubernetes.io/controller-uid"):
        del labels[key]
    return body


UPDATE_CASES: dict[str, UpdateCase] = {
    "unchanged": (job(), job(), None, None),
    "mutable-fields": (
        job(),
        _with(
            parallelism=5, suspend=True, activeDeadlineSeconds=5, backoffLimit=1, ttlSecondsAfterFinished=9
        ),
        None,
        None,
    ),
    "replacement-policy-mutable": (job(), _with(podReplacementPolicy="Failed"), None, None),
    "max-failed-mutable": (
        job(completionMode="Indexed", completions=4, backoffLimitPerIndex=1, maxFailedIndexes=1),
        _with(
            job(completionMode="Indexed", completions=4, backoffLimitPerIndex=1, maxFailedIndexes=1),
            maxFailedIndexes=2,
        ),
        None,
        None,
    ),
    "spec-rules-still-apply": (job(), _with(parallelism=-1), "spec.parallelism", GE0),
    "name-immutable": (job(), _meta(name="other"), "metadata.name", "field is immutable"),
    "completions-immutable": (job(), _with(completions=3), "spec.completions", "field is immutable"),
    "elastic-indexed-scale": (ELASTIC, _with(ELASTIC, completions=5, parallelism=5), None, None),
    "elastic-indexed-completions-alone": (
        ELASTIC,
        _with(ELASTIC, completions=5),
        "spec.completions",
        "Invalid value: 5: can only be modified in tandem with spec.parallelism",
    ),
    "selector-immutable": (
        job(),
        _with(selector={"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-1", "job-name": "pi"}}),
        "spec.selector",
        "field is immutable",
    ),
    "completion-mode-immutable": (
        job(completions=2),
        _with(job(completions=2), completionMode="Indexed"),
        "spec.completionMode",
        "field is immutable",
    ),
    "pod-failure-policy-immutable": (
        job(),
        _pfp(_exit_rule()),
        "spec.podFailurePolicy",
        "field is immutable",
    ),
    "per-index-immutable": (
        job(completionMode="Indexed", completions=4, backoffLimitPerIndex=1),
        _with(job(completionMode="Indexed", completions=4, backoffLimitPerIndex=1), backoffLimitPerIndex=2),
        "spec.backoffLimitPerIndex",
        "field is immutable",
    ),
    "managed-by-immutable": (job(), _with(managedBy="example.com/x"), "spec.managedBy", "field is immutable"),
    "success-policy-immutable": (
        job(completionMode="Indexed", completions=4),
        _with(job(completionMode="Indexed", completions=4), successPolicy={"rules": [{"succeededCount": 1}]}),
        "spec.successPolicy",
        "field is immutable",
    ),
    "template-immutable": (
        job(),
        _new_template(job(), nodeSelector={"a": "b"}),
        "spec.template",
        "field is immutable",
    ),
    "template-image-immutable-even-suspended": (
        SUSPENDED,
        _new_template(SUSPENDED, containers=[{"name": "main", "image": "other"}]),
        "spec.template.spec",
        "field is immutable",
    ),
    "resources-while-suspended-never-started": (
        WITH_INIT,
        _resources(WITH_INIT, init=MORE_CPU, **MORE_CPU),
        None,
        None,
    ),
    "resources-removed-while-suspended": (WITH_INIT, _resources(WITH_INIT, init={}), None, None),
    "resources-suspended-again-after-start": (
        SUSPENDED_AGAIN,
        _resources(SUSPENDED_AGAIN, **MORE_CPU),
        None,
        None,
    ),
    "resources-suspended-again-start-time-kept": (
        SUSPENDED_AGAIN_STARTED,
        _resources(SUSPENDED_AGAIN_STARTED, **MORE_CPU),
        None,
        None,
    ),
    "resources-not-suspended": (job(), _resources(job(), **MORE_CPU), "spec.template", "field is immutable"),
    "resources-suspended-with-active-pods": (
        SUSPENDED_WITH_ACTIVE,
        _resources(SUSPENDED_WITH_ACTIVE, **MORE_CPU),
        "spec.template",
        "field is immutable",
    ),
    "resources-started-without-suspended-condition": (
        STARTED_SUSPENDED,
        _resources(STARTED_SUSPENDED, **MORE_CPU),
        "spec.template",
        "field is immutable",
    ),
    "resources-suspended-condition-false": (
        RESUMED_STARTED,
        _resources(RESUMED_STARTED, **MORE_CPU),
        "spec.template",
        "field is immutable",
    ),
    "resource-claims-stay-fixed": (
        SUSPENDED,
        _resources(SUSPENDED, claims=[{"name": "gpu"}]),
        "spec.template.spec",
        "field is immutable",
    ),
    "pod-level-resources-stay-fixed": (
        SUSPENDED,
        _new_template(SUSPENDED, resources={"requests": {"cpu": "1"}}),
        "spec.template.spec",
        "field is immutable",
    ),
    "resources-and-image-refuses-the-spec": (
        SUSPENDED,
        _resources(_new_template(SUSPENDED, containers=[{"name": "main", "image": "other"}]), **MORE_CPU),
        "spec.template.spec",
        "field is immutable",
    ),
    "template-name-while-open": (SUSPENDED, _new_template_meta(SUSPENDED, name="renamed"), None, None),
    "scheduling-directives-suspended-again-after-start": (
        SUSPENDED_AGAIN,
        _new_template(SUSPENDED_AGAIN, nodeSelector={"a": "b"}),
        None,
        None,
    ),
    "scheduling-directives-with-active-pods": (
        SUSPENDED_WITH_ACTIVE,
        _new_template(SUSPENDED_WITH_ACTIVE, nodeSelector={"a": "b"}),
        "spec.template",
        "field is immutable",
    ),
    "scheduling-directives-while-suspended-never-started": (
        SUSPENDED,
        _new_template(
            SUSPENDED,
            nodeSelector={"a": "b"},
            tolerations=[{"key": "k", "operator": "Exists"}],
            schedulingGates=[{"name": "g"}],
            affinity={
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
            },
        ),
        None,
        None,
    ),
    "template-labels-while-suspended-never-started": (
        SUSPENDED,
        _new_template_meta(
            SUSPENDED,
            annotations={"a": "b"},
            labels={**SUSPENDED["spec"]["template"]["metadata"]["labels"], "q": "x"},
        ),
        None,
        None,
    ),
    "scheduling-directives-once-started": (
        STARTED_SUSPENDED,
        _new_template(STARTED_SUSPENDED, nodeSelector={"a": "b"}),
        "spec.template",
        "field is immutable",
    ),
    "old-job-without-prefixed-labels": (
        _without_prefixed_labels(job()),
        _with(_without_prefixed_labels(job()), parallelism=2),
        None,
        None,
    ),
}


@pytest.mark.parametrize(("old", "new", "field", "message"), [
    pytest.param(*case, id=name) for name, case in UPDATE_CASES.items()
])  # fmt: skip
def test_update_rules(
    old: dict[str, Any], new: dict[str, Any], field: str | None, message: str | None
) -> None:
    _assert_case(validate_job_update(new, old), field, message)


def test_update_reports_a_spec_problem_once() -> None:
    errors = validate_job_update(_with(parallelism=-1), job())
    assert [e.field for e in errors] == ["spec.parallelism"]


GARBAGE: list[Any] = [
    None,
    [],
    "x",
    {"spec": []},
    {"metadata": "x", "spec": {"parallelism": "x", "template": [], "selector": "x"}},
    {
        "spec": {
            "completionMode": "Indexed",
            "completions": "x",
            "successPolicy": {"rules": ["x", {"succeededIndexes": 5}]},
        }
    },
    {"spec": {"podFailurePolicy": {"rules": [{"onExitCodes": {"values": [[1], {}, None]}}, 7]}}},
    {
        "spec": {
            "podFailurePolicy": "x",
            "template": {"metadata": [], "spec": {"containers": [5, {"name": 5, "env": [1]}]}},
        }
    },
    {"spec": {"selector": {"matchExpressions": [{"operator": ["In"], "values": "x"}], "matchLabels": []}}},
]


@pytest.mark.parametrize("garbage", [pytest.param(g, id=f"garbage-{i}") for i, g in enumerate(GARBAGE)])
def test_malformed_input_never_raises(garbage: Any) -> None:
    validate_job(garbage)
    validate_job_update(garbage, garbage)
    validate_job_update(garbage, job())
    validate_job_update(job(), garbage)
    validate_job_template_spec(garbage, "spec.jobTemplate")
