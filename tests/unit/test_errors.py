"""Field errors print and convert to Status objects the way upstream's API server does."""

from __future__ import annotations

from multiqueue.api import errors


def test_field_error_messages_match_upstream_format() -> None:
    assert str(errors.invalid("spec.parallelism", -1, "must be greater than or equal to 0")) == (
        "spec.parallelism: Invalid value: -1: must be greater than or equal to 0"
    )
    assert str(errors.required("spec.selector")) == "spec.selector: Required value"
    assert str(
        errors.not_supported("spec.template.spec.restartPolicy", "Always", ["OnFailure", "Never"])
    ) == (
        'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never"'
    )
    assert (
        str(errors.too_long("spec.managedBy", 63))
        == "spec.managedBy: Too long: may not be more than 63 bytes"
    )
    assert str(errors.forbidden("spec", "nope")) == "spec: Forbidden: nope"


def test_invalid_status_carries_causes() -> None:
    errs = [
        errors.invalid("status.succeeded", 1, "cannot decrease the succeeded counter"),
        errors.required("status.startTime", "startTime is required"),
    ]
    st = errors.invalid_status("Job", "batch", "pi", errs)
    assert st["code"] == 422
    assert st["reason"] == "Invalid"
    assert st["kind"] == "Status"
    assert st["status"] == "Failure"
    assert st["message"].startswith('Job.batch "pi" is invalid: [status.succeeded: Invalid value: 1: ')
    assert st["details"]["group"] == "batch"
    assert st["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 1: cannot decrease the succeeded counter",
            "field": "status.succeeded",
        },
        {
            "reason": "FieldValueRequired",
            "message": "Required value: startTime is required",
            "field": "status.startTime",
        },
    ]


def test_single_error_message_has_no_brackets() -> None:
    st = errors.invalid_status("Pod", "", "p", [errors.required("spec.containers")])
    assert st["message"] == 'Pod "p" is invalid: spec.containers: Required value'
    assert "group" not in st["details"]


def test_other_statuses() -> None:
    assert errors.not_found_status("jobs", "batch", "x")["message"] == 'jobs.batch "x" not found'
    assert errors.already_exists_status("pods", "", "p")["code"] == 409
    conflict = errors.conflict_status("jobs", "batch", "x", "the object has been modified")
    assert conflict["reason"] == "Conflict"
    assert (
        conflict["message"] == 'Operation cannot be fulfilled on jobs.batch "x": the object has been modified'
    )
    assert errors.gone_status("too old resource version: 1 (5)")["code"] == 410
