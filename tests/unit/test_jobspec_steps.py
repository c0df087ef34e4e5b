"""The steps of Job create validation on their own: the two policies (jobpolicies), the body rules shared by
create and update (jobspec.validate_job_body), the template labels reader, and a selector's requirements."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from multiqueue.api import jobs
from multiqueue.api.jobpolicies import validate_pod_failure_policy, validate_success_policy
from multiqueue.api.jobspec import validate_job_body
from multiqueue.api.labelselectors import Operator, conjunction, requirement
from tests.unit.jobfixtures import job

EXIT_RULE = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1, 2]}}


def _spec(**fields: Any) -> dict[str, Any]:
    spec = copy.deepcopy(job()["spec"])
    spec.update(fields)
    return spec


def _details(errors: list[Any]) -> list[tuple[str, str]]:
    return [(e.field, e.detail) for e in errors]


@pytest.mark.parametrize(
    ("rules", "backoff_per_index", "expected"),
    [
        pytest.param([EXIT_RULE], None, [], id="exit-codes"),
        pytest.param(
            [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}],
            None,
            [],
            id="pod-conditions",
        ),
        pytest.param(
            [{**EXIT_RULE, "action": "FailIndex"}],
            None,
            [("p.rules[0].action", "requires the backoffLimitPerIndex to be set")],
            id="fail-index-needs-per-index-limit",
        ),
        pytest.param([{**EXIT_RULE, "action": "FailIndex"}], 1, [], id="fail-index"),
        pytest.param(
            [{"action": "Count"}],
            None,
            [("p.rules[0]", "specifying one of OnExitCodes and OnPodConditions is required")],
            id="no-matcher",
        ),
        pytest.param(
            [
                {
                    "action": "FailJob",
                    "onExitCodes": {"operator": "In", "values": [2, 1], "containerName": "x"},
                }
            ],
            None,
            [
                (
                    "p.rules[0].onExitCodes.containerName",
                    "must be one of the container or initContainer names in the pod template",
                ),
                ("p.rules[0].onExitCodes.values", "must be ordered"),
            ],
            id="unordered-and-unknown-container",
        ),
        pytest.param(
            [EXIT_RULE] * 21, None, [("p.rules", "must have at most 20 items")], id="too-many-rules"
        ),
    ],
)
def test_validate_pod_failure_policy(
    rules: list[Any], backoff_per_index: int | None, expected: list[tuple[str, str]]
) -> None:
    spec = _spec(podFailurePolicy={"rules": rules}, backoffLimitPerIndex=backoff_per_index)
    assert _details(validate_pod_failure_policy(spec, "p")) == expected


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        pytest.param([{"succeededIndexes": "0-2", "succeededCount": 2}], [], id="indexes-and-count"),
        pytest.param(
            [],
            [("s.rules", "at least one rules must be specified when the successPolicy is specified")],
            id="empty",
        ),
        pytest.param(
            [{}],
            [("s.rules[0]", "at least one of succeededCount or succeededIndexes must be specified")],
            id="rule-without-criteria",
        ),
        pytest.param(
            [{"succeededCount": 5}],
            [
                (
                    "s.rules[0].succeededCount",
                    "must be less than or equal to 4 (the number of specified completions)",
                )
            ],
            id="count-above-completions",
        ),
        pytest.param(
            [{"succeededIndexes": "0-1", "succeededCount": 3}],
            [
                (
                    "s.rules[0].succeededCount",
                    "must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)",
                )
            ],
            id="count-above-listed",
        ),
    ],
)
def test_validate_success_policy(rules: list[Any], expected: list[tuple[str, str]]) -> None:
    spec = _spec(completionMode="Indexed", completions=4, successPolicy={"rules": rules})
    assert _details(validate_success_policy(spec, "s")) == expected


def _relabel(body: dict[str, Any], **labels: str) -> dict[str, Any]:
    result = copy.deepcopy(body)
    result["spec"]["template"]["metadata"]["labels"].update(labels)
    return result


def _legacy(body: dict[str, Any]) -> dict[str, Any]:
    """A Job as stored before the batch.kubernetes.io/ labels existed: legacy selector and labels only."""
    result = copy.deepcopy(body)
    result["spec"]["selector"] = {"matchLabels": {jobs.LEGACY_CONTROLLER_UID_LABEL: "uid-1"}}
    result["spec"]["template"]["metadata"]["labels"] = {
        jobs.LEGACY_CONTROLLER_UID_LABEL: "uid-1",
        jobs.LEGACY_JOB_NAME_LABEL: "pi",
    }
    return result


@pytest.mark.parametrize(
    ("body", "prefixed", "fields"),
    [
        pytest.param(job(), True, [], id="generated"),
        pytest.param(
            _relabel(job(), **{jobs.JOB_NAME_LABEL: "other"}),
            True,
            ["spec.template.metadata.labels[batch.kubernetes.io/job-name]"],
            id="wrong-prefixed-label",
        ),
        pytest.param(_legacy(job()), False, [], id="created-before-the-prefixed-labels"),
        pytest.param(
            _relabel(_legacy(job()), **{jobs.LEGACY_JOB_NAME_LABEL: "other"}),
            False,
            ["spec.template.metadata.labels[job-name]"],
            id="legacy-label-still-checked",
        ),
        pytest.param(
            job(name="n" * 62, completionMode="Indexed", completions=10),
            True,
            ["metadata.name"],
            id="indexed-hostname-too-long",
        ),
    ],
)
def test_validate_job_body(body: dict[str, Any], prefixed: bool, fields: list[str]) -> None:
    assert [e.field for e in validate_job_body(body, require_prefixed_labels=prefixed)] == fields


@pytest.mark.parametrize(
    ("spec", "labels"),
    [
        pytest.param({"template": {"metadata": {"labels": {"a": "b"}}}}, {"a": "b"}, id="set"),
        pytest.param({"template": {"metadata": {}}}, {}, id="absent"),
        pytest.param({"template": "not an object"}, {}, id="malformed"),
        pytest.param({}, {}, id="no-template"),
    ],
)
def test_template_labels(spec: dict[str, Any], labels: dict[str, str]) -> None:
    assert jobs.template_labels(spec) == labels


@pytest.mark.parametrize(
    ("keys", "text"),
    [
        pytest.param(["b", "a"], "a,b", id="sorted-by-key"),
        pytest.param(["a"], "a", id="one"),
        pytest.param([], "", id="none-selects-everything"),
    ],
)
def test_conjunction(keys: list[str], text: str) -> None:
    selector = conjunction([requirement(k, Operator.EXISTS) for k in keys])
    assert str(selector) == text
    assert selector == conjunction([requirement(k, Operator.EXISTS) for k in reversed(keys)])
    assert selector.empty is (not keys)
