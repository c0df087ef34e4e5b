"""Pod facts the controllers read, and the pod template validation Jobs rely on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from multiqueue.api import pods
from multiqueue.api.errors import FieldError

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"


def at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(UTC)


def pod(
    phase: str | None = "Running",
    *,
    conditions: list[dict[str, Any]] | None = None,
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    spec: dict[str, Any] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    status: dict[str, Any] = {} if phase is None else {"phase": phase}
    if conditions is not None:
        status["conditions"] = conditions
    if containers is not None:
        status["containerStatuses"] = containers
    if init is not None:
        status["initContainerStatuses"] = init
    return {"metadata": {"name": "p", **meta}, "spec": spec or {}, "status": status}


def terminated(name: str, code: int = 0, finished: str | None = T1, restarts: int = 0) -> dict[str, Any]:
    state: dict[str, Any] = {"exitCode": code}
    if finished is not None:
        state["finishedAt"] = finished
    return {"name": name, "restartCount": restarts, "state": {"terminated": state}}


def running(name: str, restarts: int = 0) -> dict[str, Any]:
    return {"name": name, "restartCount": restarts, "state": {"running": {"startedAt": T0}}}


READY = {"type": "Ready", "status": "True", "lastTransitionTime": T0}
NOT_READY = {"type": "Ready", "status": "False", "lastTransitionTime": T2}


@pytest.mark.parametrize(
    ("body", "phase", "terminal", "active", "ready"),
    [
        pytest.param(pod(None), "Pending", False, True, False, id="no-phase-yet"),
        pytest.param(pod("Pending"), "Pending", False, True, False, id="pending"),
        pytest.param(pod(conditions=[READY]), "Running", False, True, True, id="running-ready"),
        pytest.param(pod(conditions=[NOT_READY]), "Running", False, True, False, id="running-not-ready"),
        pytest.param(pod(deletionTimestamp=T1), "Running", False, False, False, id="deleting"),
        pytest.param(pod("Succeeded"), "Succeeded", True, False, False, id="succeeded"),
        pytest.param(pod("Failed"), "Failed", True, False, False, id="failed"),
    ],
)
def test_pod_state(body: dict[str, Any], phase: str, terminal: bool, active: bool, ready: bool) -> None:
    assert (pods.phase(body), pods.is_terminal(body), pods.is_active(body), pods.is_ready(body)) == (
        phase,
        terminal,
        active,
        ready,
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            pod("Failed", containers=[terminated("a", finished=T1), terminated("b", finished=T2)]),
            T2,
            id="latest-container-finish",
        ),
        pytest.param(
            pod("Failed", containers=[terminated("a", finished=T1), running("b")], conditions=[NOT_READY]),
            T2,
            id="a-container-still-running-so-ready-false-time",
        ),
        pytest.param(
            pod(
                "Succeeded",
                containers=[terminated("a", finished=T0)],
                init=[terminated("sidecar", finished=T2), terminated("setup", finished=T1)],
                spec={"initContainers": [{"name": "sidecar", "restartPolicy": "Always"}, {"name": "setup"}]},
            ),
            T2,
            id="sidecar-finishes-last",
        ),
        pytest.param(
            pod(
                "Succeeded",
                containers=[terminated("a", finished=T0)],
                init=[terminated("setup", finished=T2)],
            ),
            T0,
            id="plain-init-containers-ignored",
        ),
        pytest.param(pod("Failed", conditions=[NOT_READY]), T2, id="ready-turned-false"),
        pytest.param(
            pod("Failed", conditions=[READY], deletionTimestamp=T2, deletionGracePeriodSeconds=60),
            T1,
            id="deletion-minus-grace-period",
        ),
        pytest.param(pod("Failed", creationTimestamp=T0), T0, id="creation-as-last-resort"),
        pytest.param(pod("Failed"), None, id="nothing-known"),
    ],
)
def test_finish_time(body: dict[str, Any], expected: str | None) -> None:
    assert pods.finish_time(body) == (None if expected is None else at(expected))


def test_exit_codes_of_containers_then_init_containers() -> None:
    body = pod(
        "Failed",
        containers=[terminated("main", 3), running("side")],
        init=[terminated("setup", 0), {"name": "bad", "state": {"terminated": {"exitCode": "x"}}}],
    )
    assert pods.exit_codes(body) == [("main", 3), ("setup", 0)]


def test_restart_count_sums_all_containers() -> None:
    body = pod(containers=[running("a", 2), running("b", 1)], init=[terminated("i", restarts=4)])
    assert pods.restart_count(body) == 7
    assert pods.restart_count(pod(containers=[{"restartCount": "x"}, {"restartCount": True}])) == 0


@pytest.mark.parametrize(
    ("annotations", "labels", "expected"),
    [
        pytest.param({pods.COMPLETION_INDEX: "3"}, {}, 3, id="annotation"),
        pytest.param({}, {pods.COMPLETION_INDEX: "4"}, 4, id="label-when-no-annotation"),
        pytest.param({pods.COMPLETION_INDEX: "1"}, {pods.COMPLETION_INDEX: "2"}, 1, id="annotation-wins"),
        pytest.param({pods.COMPLETION_INDEX: "07"}, {}, 7, id="leading-zero-as-atoi"),
        pytest.param(
            {pods.COMPLETION_INDEX: "x"}, {pods.COMPLETION_INDEX: "2"}, None, id="malformed-annotation"
        ),
        pytest.param({pods.COMPLETION_INDEX: "-1"}, {}, None, id="negative"),
        pytest.param({pods.COMPLETION_INDEX: ""}, {}, None, id="empty"),
        pytest.param({}, {}, None, id="absent"),
    ],
)
def test_completion_index(annotations: dict[str, str], labels: dict[str, str], expected: int | None) -> None:
    assert pods.completion_index(pod(annotations=annotations, labels=labels)) == expected


# --- pod template validation --------------------------------------------------------------------------------


def template(
    *containers: dict[str, Any], init: list[dict[str, Any]] | None = None, **meta: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init is not None:
        spec["initContainers"] = init
    return {"metadata": meta, "spec": spec}


MAIN = {"name": "main", "image": "busybox"}

TEMPLATE_CASES: dict[str, tuple[dict[str, Any], str | None, str | None]] = {
    "valid": (template(MAIN, {"name": "side", "image": "x", "env": [{"name": "MY.VAR-1"}]}), None, None),
    "no-containers": (template(), "t.spec.containers", "Required value"),
    "container-name-missing": (template({"image": "x"}), "t.spec.containers[0].name", "Required value"),
    "container-name-not-a-label": (
        template({"name": "Main_1", "image": "x"}),
        "t.spec.containers[0].name",
        "RFC 1123 label",
    ),
    "container-name-duplicate": (
        template(MAIN, MAIN),
        "t.spec.containers[1].name",
        'Duplicate value: "main"',
    ),
    "init-container-name-clash": (
        template(MAIN, init=[{"name": "main", "image": "x"}]),
        "t.spec.initContainers[0].name",
        'Duplicate value: "main"',
    ),
    "image-missing": (template({"name": "main"}), "t.spec.containers[0].image", "Required value"),
    "env-name-missing": (
        template({**MAIN, "env": [{"value": "x"}]}),
        "t.spec.containers[0].env[0].name",
        "Required value",
    ),
    "env-name-relaxed": (template({**MAIN, "env": [{"name": "1 weird:name"}]}), None, None),
    "env-name-with-equals": (
        template({**MAIN, "env": [{"name": "A=B"}]}),
        "t.spec.containers[0].env[0].name",
        "must consist only of printable ASCII characters other than '='",
    ),
    "label-invalid": (template(MAIN, labels={"a": "not valid"}), "t.labels", "a valid label must be"),
    "annotation-invalid": (
        template(MAIN, annotations={"bad key!": "x"}),
        "t.annotations",
        "name part must consist",
    ),
    "container-not-an-object": (template("main"), "t.spec.containers[0]", "must be an object"),
}


@pytest.mark.parametrize(("body", "field", "message"), [
    pytest.param(*case, id=name) for name, case in TEMPLATE_CASES.items()
])  # fmt: skip
def test_validate_pod_template(body: dict[str, Any], field: str | None, message: str | None) -> None:
    errors = pods.validate_pod_template(body, "t")
    if field is None:
        assert errors == [], [str(e) for e in errors]
    else:
        assert any(e.field == field and message in e.body() for e in errors if message), [
            str(e) for e in errors
        ]


def _errors(spec: dict[str, Any]) -> list[str]:
    return [str(e) for e in pods.validate_pod_spec({"containers": [MAIN], **spec}, "spec")]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"restartPolicy": "Never"}, [], id="restart-policy-valid"),
        pytest.param({}, ["spec.restartPolicy: Required value"], id="restart-policy-missing"),
        pytest.param(
            {"restartPolicy": "Sometimes"},
            [
                'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'
            ],
            id="restart-policy-unknown",
        ),
        pytest.param(
            {"restartPolicy": "Never", "activeDeadlineSeconds": 0},
            ["spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"],
            id="active-deadline-zero",
        ),
        pytest.param(
            {"restartPolicy": "Never", "terminationGracePeriodSeconds": -1},
            ["spec.terminationGracePeriodSeconds: Invalid value: -1: must be greater than or equal to 0"],
            id="grace-negative",
        ),
        pytest.param(
            {"restartPolicy": "Never", "activeDeadlineSeconds": 1, "terminationGracePeriodSeconds": 0},
            [],
            id="deadline-and-grace-valid",
        ),
    ],
)
def test_validate_pod_spec(spec: dict[str, Any], expected: list[str]) -> None:
    assert _errors(spec) == expected


def test_pod_spec_update_allows_images_only() -> None:
    old = {"containers": [MAIN], "restartPolicy": "Never"}
    assert (
        pods.validate_pod_spec_update({**old, "containers": [{**MAIN, "image": "other"}]}, old, "spec") == []
    )
    errors: list[FieldError] = pods.validate_pod_spec_update({**old, "restartPolicy": "Always"}, old, "spec")
    assert [e.field for e in errors] == ["spec"]


@pytest.mark.parametrize(
    "garbage",
    [
        None,
        [],
        "x",
        {"status": [], "metadata": "x"},
        {
            "status": {
                "phase": 3,
                "conditions": "x",
                "containerStatuses": [None, {"state": []}, {"restartCount": []}],
            }
        },
        {
            "spec": {"initContainers": "x"},
            "status": {"initContainerStatuses": [{"state": {"terminated": []}}]},
        },
        {
            "metadata": {
                "annotations": {pods.COMPLETION_INDEX: 5},
                "deletionTimestamp": 5,
                "deletionGracePeriodSeconds": "x",
            }
        },
        {"metadata": {"deletionTimestamp": T1, "deletionGracePeriodSeconds": "x"}, "spec": {"containers": 5}},
    ],
)
def test_malformed_input_never_raises(garbage: Any) -> None:
    for reader in (
        pods.phase,
        pods.is_terminal,
        pods.is_active,
        pods.is_ready,
        pods.finish_time,
        pods.exit_codes,
        pods.restart_count,
        pods.completion_index,
    ):
        reader(garbage)
    spec = garbage.get("spec") if isinstance(garbage, dict) else garbage
    pods.validate_pod_template(garbage, "t")
    pods.validate_pod_spec(spec, "spec")
    pods.validate_pod_spec_update(spec, garbage, "spec")


TOLERATE_NOT_READY: dict[str, Any] = {
    "key": "node.kubernetes.io/not-ready",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}
TOLERATE_UNREACHABLE: dict[str, Any] = {
    "key": "node.kubernetes.io/unreachable",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({}, {"serviceAccountName": "default", "serviceAccount": "default", "priority": 0, "preemptionPolicy": "PreemptLowerPriority", "tolerations": [TOLERATE_NOT_READY, TOLERATE_UNREACHABLE]}, id="nothing-set"),
        pytest.param({"serviceAccount": "runner"}, {"serviceAccountName": "runner", "serviceAccount": "runner"}, id="old-account-field"),
        pytest.param({"priorityClassName": "high"}, {"priorityClassName": "high"}, id="named-class-left-to-its-admission"),
        pytest.param({"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]}, {"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}, TOLERATE_NOT_READY]}, id="own-toleration-kept"),
        pytest.param({"tolerations": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}, {"tolerations": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}, TOLERATE_NOT_READY, TOLERATE_UNREACHABLE]}, id="other-effect-does-not-count"),
    ],
)  # fmt: skip
def test_admission_completes_a_new_pod_as_kube_apiserver_does(
    spec: dict[str, Any], expected: dict[str, Any]
) -> None:
    admitted = pods.admitted_pod_spec(spec)
    assert {k: admitted[k] for k in expected} == expected
    if "priorityClassName" in spec:
        assert "priority" not in admitted and "preemptionPolicy" not in admitted


@pytest.mark.parametrize(
    ("spec", "links"),
    [
        pytest.param({}, True, id="on-by-default"),
        pytest.param({"enableServiceLinks": False}, False, id="kept-off"),
    ],
)
def test_pods_default_service_links_where_templates_do_not(spec: dict[str, Any], links: bool) -> None:
    assert pods.default_pod(spec)["enableServiceLinks"] is links
    assert pods.default_pod_spec(spec).get("enableServiceLinks") == spec.get("enableServiceLinks")
