"""Server-side printing: kubectl's columns and cells for each kind, and upstream's HumanDuration."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from multiqueue.api.durations import human_duration
from multiqueue.apiserver.resources import BUILTIN, ResourceType
from multiqueue.apiserver.tables import (
    column_definitions,
    jsonpath_values,
    pod_summary,
    table,
    table_row,
)

NOW = datetime(2026, 1, 10, tzinfo=UTC)
TYPES = {t.key: t for t in BUILTIN}
Obj = dict[str, Any]


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def cells(key: str, obj: Obj) -> list[Any]:
    row: list[Any] = table(TYPES[key], [obj], NOW)["rows"][0]["cells"]
    return row


def columns(rtype: ResourceType) -> list[tuple[str, int]]:
    return [(c["name"], c["priority"]) for c in table(rtype, [], NOW)["columnDefinitions"]]


# --- HumanDuration ------------------------------------------------------------------------------------------

MINUTE, HOUR, DAY = 60, 3600, 86400


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(-2, "<invalid>", id="2s-ahead-is-invalid"),
        pytest.param(-1.5, "0s", id="1.5s-ahead-is-now"),
        pytest.param(-1, "0s", id="1s-ahead-is-now"),
        pytest.param(0.9, "0s", id="under-a-second"),
        pytest.param(59, "59s", id="59s"),
        pytest.param(119, "119s", id="seconds-up-to-2m"),
        pytest.param(2 * MINUTE, "2m", id="2m"),
        pytest.param(2 * MINUTE + 1, "2m1s", id="2m1s"),
        pytest.param(10 * MINUTE - 1, "9m59s", id="9m59s"),
        pytest.param(10 * MINUTE, "10m", id="minutes-only-from-10m"),
        pytest.param(3 * HOUR - 1, "179m", id="minutes-up-to-3h"),
        pytest.param(3 * HOUR, "3h", id="3h"),
        pytest.param(3 * HOUR + MINUTE, "3h1m", id="3h1m"),
        pytest.param(8 * HOUR - 1, "7h59m", id="7h59m"),
        pytest.param(8 * HOUR, "8h", id="hours-only-from-8h"),
        pytest.param(48 * HOUR - 1, "47h", id="hours-up-to-2d"),
        pytest.param(2 * DAY, "2d", id="2d"),
        pytest.param(2 * DAY + HOUR, "2d1h", id="2d1h"),
        pytest.param(8 * DAY - 1, "7d23h", id="7d23h"),
        pytest.param(8 * DAY, "8d", id="days-only-from-8d"),
        pytest.param(730 * DAY - 1, "729d", id="days-up-to-2y"),
        pytest.param(730 * DAY, "2y", id="2y"),
        pytest.param(731 * DAY, "2y1d", id="2y1d"),
        pytest.param(800 * DAY, "2y70d", id="2y70d"),
        pytest.param(8 * 365 * DAY - 1, "7y364d", id="7y364d"),
        pytest.param(8 * 365 * DAY, "8y", id="years-only-from-8y"),
        pytest.param(20 * 365 * DAY, "20y", id="20y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text
    assert human_duration(timedelta(seconds=seconds)) == text


# --- columns of each kind -----------------------------------------------------------------------------------

WIDGETS = ResourceType(
    "example.com",
    "v1",
    "Widget",
    "widgets",
    "widget",
    True,
    printer_columns=(
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Weight", "type": "number", "jsonPath": ".spec.weight", "priority": 1},
        {"name": "Shiny", "type": "boolean", "jsonPath": ".spec.shiny"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ),
)
GADGETS = ResourceType("example.com", "v1", "Gadget", "gadgets", "gadget", False, schema={"type": "object"})


@pytest.mark.parametrize(
    ("rtype", "expected"),
    [
        pytest.param(
            TYPES["batch/jobs"],
            [("Name", 0), ("Status", 0), ("Completions", 0), ("Duration", 0), ("Age", 0),
             ("Containers", 1), ("Images", 1), ("Selector", 1)],
            id="jobs",
        ),
        pytest.param(
            TYPES["pods"],
            [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0),
             ("IP", 1), ("Node", 1), ("Nominated Node", 1), ("Readiness Gates", 1)],
            id="pods",
        ),
        pytest.param(
            TYPES["batch/cronjobs"],
            [("Name", 0), ("Schedule", 0), ("Timezone", 0), ("Suspend", 0), ("Active", 0), ("Last Schedule", 0),
             ("Age", 0), ("Containers", 1), ("Images", 1), ("Selector", 1)],
            id="cronjobs",
        ),
        pytest.param(
            TYPES["nodes"],
            [("Name", 0), ("Status", 0), ("Roles", 0), ("Age", 0), ("Version", 0), ("Internal-IP", 1),
             ("External-IP", 1), ("OS-Image", 1), ("Kernel-Version", 1), ("Container-Runtime", 1)],
            id="nodes",
        ),
        pytest.param(TYPES["namespaces"], [("Name", 0), ("Status", 0), ("Age", 0)], id="namespaces"),
        pytest.param(
            TYPES["events"],
            [("Last Seen", 0), ("Type", 0), ("Reason", 0), ("Object", 0), ("Subobject", 1), ("Source", 1),
             ("Message", 0), ("First Seen", 1), ("Count", 1), ("Name", 1)],
            id="events",
        ),
        pytest.param(TYPES["coordination.k8s.io/leases"], [("Name", 0), ("Holder", 0), ("Age", 0)], id="leases"),
        pytest.param(TYPES["configmaps"], [("Name", 0), ("Data", 0), ("Age", 0)], id="configmaps"),
        pytest.param(TYPES["secrets"], [("Name", 0), ("Type", 0), ("Data", 0), ("Age", 0)], id="secrets"),
        pytest.param(TYPES["serviceaccounts"], [("Name", 0), ("Age", 0)], id="serviceaccounts"),
        pytest.param(
            TYPES["apiextensions.k8s.io/customresourcedefinitions"],
            [("Name", 0), ("Scope", 0), ("Versions", 0), ("Created At", 0), ("Group", 1), ("Kind", 1),
             ("ShortNames", 1), ("Established", 1)],
            id="crds",
        ),
        pytest.param(
            TYPES["services"],
            [("Name", 0), ("Type", 0), ("Cluster-IP", 0), ("External-IP", 0), ("Port(s)", 0), ("Age", 0),
             ("Selector", 1)],
            id="services",
        ),
        pytest.param(
            TYPES["apps/deployments"],
            [("Name", 0), ("Ready", 0), ("Up-to-date", 0), ("Available", 0), ("Age", 0), ("Containers", 1),
             ("Images", 1), ("Selector", 1)],
            id="deployments",
        ),
        pytest.param(TYPES["rbac.authorization.k8s.io/roles"], [("Name", 0), ("Created At", 0)], id="roles"),
        pytest.param(
            TYPES["rbac.authorization.k8s.io/clusterrolebindings"],
            [("Name", 0), ("Role", 0), ("Age", 0), ("Users", 1), ("Groups", 1), ("ServiceAccounts", 1)],
            id="clusterrolebindings",
        ),
        pytest.param(
            TYPES["scheduling.k8s.io/priorityclasses"],
            [("Name", 0), ("Value", 0), ("Global-Default", 0), ("Age", 0), ("PreemptionPolicy", 0)],
            id="priorityclasses",
        ),
        pytest.param(
            WIDGETS,
            [("Name", 0), ("Size", 0), ("Ready", 0), ("Weight", 1), ("Shiny", 0), ("Age", 0)],
            id="custom-printer-columns",
        ),
        pytest.param(GADGETS, [("Name", 0), ("Age", 0)], id="custom-without-printer-columns"),
        pytest.param(
            ResourceType("", "v1", "Thing", "things", "thing", True, model="V1ConfigMap"),
            [("Name", 0), ("Age", 0)],
            id="builtin-without-printer",
        ),
    ],
)  # fmt: skip
def test_columns_of_each_kind(rtype: ResourceType, expected: list[tuple[str, int]]) -> None:
    assert columns(rtype) == expected


def test_column_definitions_carry_type_format_and_the_api_s_descriptions() -> None:
    definitions = table(TYPES["pods"], [], NOW)["columnDefinitions"]
    name, restarts = definitions[0], definitions[3]
    assert name["format"] == "name" and name["type"] == "string"
    assert name["description"].startswith("Name must be unique within a namespace.")
    assert restarts == {
        "name": "Restarts",
        "type": "string",
        "format": "",
        "description": "The number of times the containers in this pod have been restarted and when the last "
        "container in this pod has restarted.",
        "priority": 0,
    }
    custom = {c["name"]: c for c in table(WIDGETS, [], NOW)["columnDefinitions"]}
    assert (
        custom["Size"]["description"] == "Custom resource definition column (in JSONPath format): .spec.size"
    )
    assert custom["Age"]["type"] == "date"


# --- jobs ---------------------------------------------------------------------------------------------------


def job(spec: Obj | None = None, deleting: bool = False, **status: Any) -> Obj:
    meta: Obj = {"name": "pi", "creationTimestamp": ago(HOUR)}
    if deleting:
        meta["deletionTimestamp"] = ago(1)
    base = {
        "completions": 5,
        "parallelism": 2,
        "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
    }
    return {"metadata": meta, "spec": {**base, **(spec or {})}, "status": status}


def conditions(*pairs: tuple[str, str]) -> list[Obj]:
    return [{"type": type_, "status": status} for type_, status in pairs]


@pytest.mark.parametrize(
    ("obj", "status"),
    [
        pytest.param(job(), "Running", id="running"),
        pytest.param(job(conditions=conditions(("Complete", "True"))), "Complete", id="complete"),
        pytest.param(job(conditions=conditions(("Failed", "True"))), "Failed", id="failed"),
        pytest.param(job(deleting=True), "Terminating", id="terminating"),
        pytest.param(job(conditions=conditions(("Suspended", "True"))), "Suspended", id="suspended"),
        pytest.param(job(conditions=conditions(("FailureTarget", "True"))), "FailureTarget", id="failure-target"),
        pytest.param(job(conditions=conditions(("SuccessCriteriaMet", "True"))), "Running", id="success-criteria-met"),
        pytest.param(job(conditions=conditions(("Suspended", "False"))), "Running", id="resumed"),
        pytest.param(
            job(deleting=True, conditions=conditions(("Complete", "True"))), "Complete", id="complete-beats-deleting"
        ),
        pytest.param(
            job(deleting=True, conditions=conditions(("Suspended", "True"))), "Terminating",
            id="deleting-beats-suspended",
        ),
        pytest.param(
            job(conditions=conditions(("FailureTarget", "True"), ("Failed", "True"))), "Failed",
            id="failed-beats-failure-target",
        ),
        pytest.param(
            job(conditions=conditions(("Complete", "False"), ("Complete", "True"))), "Running",
            id="first-condition-of-a-type-counts",
        ),
    ],
)  # fmt: skip
def test_job_status(obj: Obj, status: str) -> None:
    assert cells("batch/jobs", obj)[1] == status


@pytest.mark.parametrize(
    ("spec", "succeeded", "completions"),
    [
        pytest.param({"completions": 5}, 3, "3/5", id="fixed-count"),
        pytest.param({"completions": 0}, 0, "0/0", id="zero-completions"),
        pytest.param({"completions": None, "parallelism": 1}, 0, "0/1", id="work-queue"),
        pytest.param({"completions": None, "parallelism": 1}, 1, "1/1", id="work-queue-done"),
        pytest.param({"completions": None, "parallelism": 4}, 1, "1/1 of 4", id="parallel-work-queue"),
        pytest.param({"completions": None, "parallelism": None}, 0, "0/1", id="no-parallelism"),
        pytest.param({"completions": None, "parallelism": 0}, 0, "0/1", id="zero-parallelism"),
    ],
)
def test_job_completions(spec: Obj, succeeded: int, completions: str) -> None:
    assert cells("batch/jobs", job(spec, succeeded=succeeded))[2] == completions


@pytest.mark.parametrize(
    ("status", "duration"),
    [
        pytest.param({}, "", id="not-started"),
        pytest.param({"startTime": ago(190)}, "3m10s", id="running-since-start"),
        pytest.param({"startTime": ago(HOUR), "completionTime": ago(HOUR - 75)}, "75s", id="finished"),
    ],
)
def test_job_duration(status: Obj, duration: str) -> None:
    assert cells("batch/jobs", job(**status))[3] == duration


def test_job_row_and_wide_cells() -> None:
    selector = {
        "matchLabels": {"batch.kubernetes.io/controller-uid": "abc"},
        "matchExpressions": [{"key": "app", "operator": "In", "values": ["b", "a"]}],
    }
    containers = [{"name": "main", "image": "busybox"}, {"name": "side", "image": "envoy"}]
    obj = job({"selector": selector, "template": {"spec": {"containers": containers}}})
    assert cells("batch/jobs", obj) == [
        "pi", "Running", "0/5", "", "60m", "main,side", "busybox,envoy",
        "app in (a,b),batch.kubernetes.io/controller-uid=abc",
    ]  # fmt: skip
    assert cells("batch/jobs", job())[7] == "<none>"


# --- pods ---------------------------------------------------------------------------------------------------


def pod(
    phase: str = "Running",
    statuses: list[Obj] | None = None,
    init: list[Obj] | None = None,
    *,
    containers: int = 1,
    init_specs: list[Obj] | None = None,
    deleting: bool = False,
    **status: Any,
) -> Obj:
    meta: Obj = {"name": "p", "creationTimestamp": ago(HOUR)}
    if deleting:
        meta["deletionTimestamp"] = ago(1)
    spec: Obj = {"containers": [{"name": f"c{i}"} for i in range(containers)]}
    if init_specs is not None:
        spec["initContainers"] = init_specs
    body: Obj = {"phase": phase, "containerStatuses": statuses or [], **status}
    if init is not None:
        body["initContainerStatuses"] = init
    return {"metadata": meta, "spec": spec, "status": body}


def running(ready: bool = True, **extra: Any) -> Obj:
    return {"ready": ready, "state": {"running": {"startedAt": ago(HOUR)}}, **extra}


def waiting(reason: str) -> Obj:
    return {"ready": False, "state": {"waiting": {"reason": reason}}}


def terminated(code: int = 0, reason: str | None = None, signal: int | None = None) -> Obj:
    state: Obj = {"exitCode": code}
    if reason:
        state["reason"] = reason
    if signal:
        state["signal"] = signal
    return {"ready": False, "state": {"terminated": state}}


TWO_INITS = [{"name": "i0"}, {"name": "i1"}]
SIDECAR = [{"name": "proxy", "restartPolicy": "Always"}]


@pytest.mark.parametrize(
    ("obj", "status"),
    [
        pytest.param(pod("Pending"), "Pending", id="pending"),
        pytest.param(pod("Failed", reason="Evicted"), "Evicted", id="status-reason-evicted"),
        pytest.param(
            pod("Pending", conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]),
            "SchedulingGated",
            id="scheduling-gated",
        ),
        pytest.param(pod("Pending", [waiting("ContainerCreating")]), "ContainerCreating", id="container-creating"),
        pytest.param(pod("Pending", [waiting("ErrImagePull")]), "ErrImagePull", id="image-pull-error"),
        pytest.param(pod("Running", [running()]), "Running", id="running"),
        pytest.param(pod("Running", [waiting("CrashLoopBackOff")]), "CrashLoopBackOff", id="crash-loop"),
        pytest.param(pod("Succeeded", [terminated(0, "Completed")]), "Completed", id="completed"),
        pytest.param(pod("Failed", [terminated(1, "Error")]), "Error", id="error"),
        pytest.param(pod("Failed", [terminated(137, "OOMKilled")]), "OOMKilled", id="oom-killed"),
        pytest.param(pod("Failed", [terminated(3)]), "ExitCode:3", id="exit-code-without-reason"),
        pytest.param(pod("Failed", [terminated(0, signal=9)]), "Signal:9", id="signal-without-reason"),
        pytest.param(
            pod("Running", [terminated(0, "Completed"), running()], containers=2),
            "NotReady",
            id="completed-and-running-not-ready",
        ),
        pytest.param(
            pod("Running", [terminated(0, "Completed"), running()], containers=2,
                conditions=[{"type": "Ready", "status": "True"}]),
            "Running",
            id="completed-and-running-ready",
        ),
        pytest.param(
            pod("Running", [running(), waiting("CrashLoopBackOff")], containers=2),
            "CrashLoopBackOff",
            id="last-container-reason-wins",
        ),
        pytest.param(
            pod("Pending", [waiting("PodInitializing")], [terminated(0, "Completed"), running(False)],
                init_specs=TWO_INITS),
            "Init:1/2",
            id="init-running",
        ),
        pytest.param(
            pod("Pending", [], [waiting("PodInitializing"), waiting("PodInitializing")], init_specs=TWO_INITS),
            "Init:0/2",
            id="init-pod-initializing",
        ),
        pytest.param(
            pod("Pending", [], [terminated(1, "Error")], init_specs=TWO_INITS), "Init:Error", id="init-error"
        ),
        pytest.param(
            pod("Pending", [], [terminated(2)], init_specs=TWO_INITS), "Init:ExitCode:2", id="init-exit-code"
        ),
        pytest.param(
            pod("Pending", [], [terminated(143, signal=15)], init_specs=TWO_INITS), "Init:Signal:15", id="init-signal"
        ),
        pytest.param(
            pod("Pending", [], [waiting("CrashLoopBackOff")], init_specs=TWO_INITS),
            "Init:CrashLoopBackOff",
            id="init-crash-loop",
        ),
        pytest.param(
            pod("Running", [running()], [{**running(), "name": "proxy", "started": True}], init_specs=SIDECAR),
            "Running",
            id="started-sidecar-is-not-initializing",
        ),
        pytest.param(
            pod("Pending", [], [terminated(0, "Completed")], init_specs=TWO_INITS), "Pending",
            id="init-exit-0-is-not-a-failure",
        ),
        pytest.param(
            pod("Pending", [], [{**running(False), "name": "proxy", "started": False}], init_specs=SIDECAR),
            "Init:0/1",
            id="sidecar-not-started-yet",
        ),
        pytest.param(pod("Running", [running()], deleting=True), "Terminating", id="terminating"),
        pytest.param(
            pod("Succeeded", [terminated(0, "Completed")], deleting=True),
            "Completed",
            id="deleting-a-finished-pod-keeps-its-status",
        ),
        pytest.param(pod("Running", [running()], deleting=True, reason="NodeLost"), "Unknown", id="node-lost"),
    ],
)  # fmt: skip
def test_pod_status_reason(obj: Obj, status: str) -> None:
    assert cells("pods", obj)[2] == status


@pytest.mark.parametrize(
    ("obj", "ready", "restarts"),
    [
        pytest.param(pod("Running", [running(), running(False)], containers=2), "1/2", "0", id="one-of-two-ready"),
        pytest.param(
            pod("Running", [running(restartCount=3, lastState={"terminated": {"finishedAt": ago(300)}})]),
            "1/1",
            "3 (5m ago)",
            id="restarts-with-last-restart",
        ),
        pytest.param(pod("Running", [running(restartCount=2)]), "1/1", "2", id="restarts-without-last-state"),
        pytest.param(
            pod("Running", [running()], [{**running(), "name": "proxy", "started": True, "restartCount": 1}],
                init_specs=SIDECAR),
            "2/2",
            "1",
            id="sidecar-counts-as-a-container",
        ),
        pytest.param(
            pod("Pending", [], [{**terminated(1, "Error"), "restartCount": 4}], init_specs=TWO_INITS),
            "0/1",
            "4",
            id="init-restarts-while-initializing",
        ),
        pytest.param(
            pod("Running", [running(restartCount=1)], [{**terminated(0, "Completed"), "restartCount": 5}],
                init_specs=[{"name": "setup"}]),
            "1/1",
            "1",
            id="finished-init-restarts-not-counted",
        ),
    ],
)  # fmt: skip
def test_pod_ready_and_restarts(obj: Obj, ready: str, restarts: str) -> None:
    row = cells("pods", obj)
    assert (row[1], row[3]) == (ready, restarts)


def test_pod_wide_cells() -> None:
    obj = pod("Running", [running()], podIPs=[{"ip": "10.0.0.7"}, {"ip": "fd00::7"}], podIP="10.0.0.7",
              nominatedNodeName="n2", conditions=[{"type": "gate-a", "status": "True"}])  # fmt: skip
    obj["spec"].update(
        nodeName="n1", readinessGates=[{"conditionType": "gate-a"}, {"conditionType": "gate-b"}]
    )
    assert cells("pods", obj) == ["p", "1/1", "Running", "0", "60m", "10.0.0.7", "n1", "n2", "1/2"]
    bare = cells("pods", pod("Pending", podIP="10.0.0.8"))
    assert bare[5:] == ["10.0.0.8", "<none>", "<none>", "<none>"]


def test_pod_summary_is_the_status_column() -> None:
    summary = pod_summary(pod("Failed", [terminated(1, "Error")]))
    assert (summary.ready, summary.total, summary.reason, summary.restarts) == (0, 1, "Error", 0)


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        pytest.param("Succeeded", [{"type": "Completed", "status": "True", "reason": "Succeeded",
                                    "message": "The pod has completed successfully."}], id="succeeded"),
        pytest.param("Failed", [{"type": "Completed", "status": "True", "reason": "Failed",
                                 "message": "The pod failed."}], id="failed"),
        pytest.param("Running", None, id="running"),
    ],
)  # fmt: skip
def test_finished_pod_rows_carry_the_completed_condition(phase: str, expected: list[Obj] | None) -> None:
    assert table(TYPES["pods"], [pod(phase)], NOW)["rows"][0].get("conditions") == expected


# --- cronjobs, nodes, namespaces, events, leases and the rest -----------------------------------------------


def test_cronjob_cells() -> None:
    cronjob = {
        "metadata": {"name": "nightly", "creationTimestamp": ago(DAY)},
        "spec": {
            "schedule": "0 2 * * *",
            "timeZone": "Europe/Berlin",
            "suspend": False,
            "jobTemplate": {
                "spec": {
                    "selector": {"matchLabels": {"a": "b"}},
                    "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                }
            },
        },
        "status": {"active": [{"name": "x"}, {"name": "y"}], "lastScheduleTime": ago(HOUR)},
    }
    assert cells("batch/cronjobs", cronjob) == [
        "nightly", "0 2 * * *", "Europe/Berlin", "False", 2, "60m", "24h", "c", "i", "a=b",
    ]  # fmt: skip
    fresh = {"metadata": {"name": "new"}, "spec": {"schedule": "@hourly"}}
    assert cells("batch/cronjobs", fresh) == [
        "new", "@hourly", "<none>", "<unset>", 0, "<none>", "<unknown>", "", "", "<none>",
    ]  # fmt: skip


def node(
    ready: str | None = "True", unschedulable: bool = False, labels: Obj | None = None, **status: Any
) -> Obj:
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready})
    return {
        "metadata": {"name": "n1", "creationTimestamp": ago(3 * DAY), "labels": labels or {}},
        "spec": {"unschedulable": unschedulable},
        "status": {"conditions": conditions, "nodeInfo": {"kubeletVersion": "v1.33.0"}, **status},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(node(), ["n1", "Ready", "<none>", "3d", "v1.33.0"], id="ready"),
        pytest.param(node("False"), ["n1", "NotReady", "<none>", "3d", "v1.33.0"], id="not-ready"),
        pytest.param(node("Unknown"), ["n1", "NotReady", "<none>", "3d", "v1.33.0"], id="ready-unknown"),
        pytest.param(node(None), ["n1", "Unknown", "<none>", "3d", "v1.33.0"], id="no-ready-condition"),
        pytest.param(
            node(unschedulable=True), ["n1", "Ready,SchedulingDisabled", "<none>", "3d", "v1.33.0"], id="cordoned"
        ),
        pytest.param(
            node(labels={"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": "",
                         "kubernetes.io/role": "gpu", "node-role.kubernetes.io/": ""}),
            ["n1", "Ready", "control-plane,gpu,worker", "3d", "v1.33.0"],
            id="roles-from-both-label-forms",
        ),
    ],
)  # fmt: skip
def test_node_cells(obj: Obj, expected: list[Any]) -> None:
    assert cells("nodes", obj)[:5] == expected


def test_node_wide_cells() -> None:
    addresses = [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.1"}]
    obj = node(addresses=addresses)
    obj["status"]["nodeInfo"].update(osImage="Debian", kernelVersion="6.1")
    assert cells("nodes", obj)[5:] == ["10.0.0.1", "<none>", "Debian", "6.1", "<unknown>"]
    obj["status"]["nodeInfo"]["architecture"] = "arm64"
    assert cells("nodes", obj)[8] == "6.1 (arm64)", (
        "the architecture follows the kernel when the node says it"
    )


@pytest.mark.parametrize(
    ("key", "obj", "expected"),
    [
        pytest.param(
            "namespaces", {"metadata": {"name": "default", "creationTimestamp": ago(90)}, "status": {"phase": "Active"}},
            ["default", "Active", "90s"], id="namespace",
        ),
        pytest.param(
            "namespaces", {"metadata": {"name": "old", "deletionTimestamp": ago(1)}, "status": {"phase": "Terminating"}},
            ["old", "Terminating", "<unknown>"], id="namespace-terminating",
        ),
        pytest.param(
            "coordination.k8s.io/leases",
            {"metadata": {"name": "multiqueue", "creationTimestamp": ago(600)}, "spec": {"holderIdentity": "pod-a"}},
            ["multiqueue", "pod-a", "10m"], id="lease",
        ),
        pytest.param(
            "coordination.k8s.io/leases", {"metadata": {"name": "free"}, "spec": {}}, ["free", "", "<unknown>"],
            id="lease-without-holder",
        ),
        pytest.param(
            "configmaps", {"metadata": {"name": "cm"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}},
            ["cm", 3, "<unknown>"], id="configmap-counts-binary-data",
        ),
        pytest.param(
            "secrets", {"metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dg=="}},
            ["s", "Opaque", 1, "<unknown>"], id="secret",
        ),
        pytest.param("serviceaccounts", {"metadata": {"name": "default"}}, ["default", "<unknown>"], id="serviceaccount"),
        pytest.param(
            "apiextensions.k8s.io/customresourcedefinitions",
            {"metadata": {"name": "widgets.example.com", "creationTimestamp": "2026-01-09T08:07:06Z"},
             "spec": {"group": "example.com", "scope": "Namespaced",
                      "names": {"kind": "Widget", "shortNames": ["wd", "wdg"]},
                      "versions": [{"name": "v2", "served": True}, {"name": "v1", "served": True, "storage": True},
                                   {"name": "v0", "served": False}]},
             "status": {"conditions": [{"type": "Established", "status": "True"}]}},
            ["widgets.example.com", "Namespaced", "v1(storage),v2", "2026-01-09T08:07:06Z", "example.com", "Widget",
             "wd,wdg", True],
            id="crd",
        ),
        pytest.param(
            "apiextensions.k8s.io/customresourcedefinitions", {"metadata": {"name": "new.example.com"}},
            ["new.example.com", "", "", "", "", "", "", False], id="crd-not-established",
        ),
        pytest.param(
            "services",
            {"metadata": {"name": "web", "creationTimestamp": ago(60)},
             "spec": {"type": "ClusterIP", "clusterIPs": ["10.0.0.7", "fd00::7"], "selector": {"b": "2", "a": "1"},
                      "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}},
            ["web", "ClusterIP", "10.0.0.7", "<none>", "80/TCP,53/UDP", "60s", "a=1,b=2"], id="service-cluster-ip",
        ),
        pytest.param(
            "services",
            {"metadata": {"name": "np"},
             "spec": {"type": "NodePort", "externalIPs": ["1.2.3.4"], "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}]}},
            ["np", "NodePort", "<none>", "1.2.3.4", "80:30080/TCP", "<unknown>", "<none>"], id="service-node-port",
        ),
        pytest.param(
            "services",
            {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "externalIPs": ["9.9.9.9"]},
             "status": {"loadBalancer": {"ingress": [{"hostname": "b.example"}, {"ip": "5.6.7.8"}]}}},
            ["lb", "LoadBalancer", "<none>", "5.6.7.8,b.example,9.9.9.9", "<none>", "<unknown>", "<none>"],
            id="service-load-balancer",
        ),
        pytest.param(
            "services", {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer"}},
            ["lb", "LoadBalancer", "<none>", "<pending>", "<none>", "<unknown>", "<none>"], id="service-pending",
        ),
        pytest.param(
            "services", {"metadata": {"name": "ext"}, "spec": {"type": "ExternalName", "externalName": "db.example"}},
            ["ext", "ExternalName", "<none>", "db.example", "<none>", "<unknown>", "<none>"], id="service-external-name",
        ),
        pytest.param(
            "apps/deployments",
            {"metadata": {"name": "d", "creationTimestamp": ago(60)},
             "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "d"}},
                      "template": {"spec": {"containers": [{"name": "a", "image": "i"}, {"name": "b", "image": "j"}]}}},
             "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 1}},
            ["d", "2/3", 3, 1, "60s", "a,b", "i,j", "app=d"], id="deployment",
        ),
        pytest.param(
            "apps/deployments", {"metadata": {"name": "d"}, "spec": {}},
            ["d", "0/1", 0, 0, "<unknown>", "", "", "<none>"], id="deployment-replicas-default-to-one",
        ),
        pytest.param(
            "rbac.authorization.k8s.io/rolebindings",
            {"metadata": {"name": "b", "creationTimestamp": ago(60)}, "roleRef": {"kind": "Role", "name": "r"},
             "subjects": [{"kind": "User", "name": "ann"}, {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"},
                          {"kind": "User", "name": "bob"}, {"kind": "Group", "name": "devs"}]},
            ["b", "Role/r", "60s", "ann, bob", "devs", "ns/sa"], id="rolebinding",
        ),
        pytest.param(
            "rbac.authorization.k8s.io/clusterroles",
            {"metadata": {"name": "view", "creationTimestamp": "2026-01-09T08:07:06Z"}},
            ["view", "2026-01-09T08:07:06Z"], id="clusterrole-created-at",
        ),
        pytest.param(
            "scheduling.k8s.io/priorityclasses",
            {"metadata": {"name": "high"}, "value": 1000, "globalDefault": True, "preemptionPolicy": "Never"},
            ["high", 1000, True, "<unknown>", "Never"], id="priorityclass",
        ),
        pytest.param(
            "scheduling.k8s.io/priorityclasses", {"metadata": {"name": "low"}, "value": -5},
            ["low", -5, False, "<unknown>", ""], id="priorityclass-no-default",
        ),
    ],
)  # fmt: skip
def test_simple_kinds(key: str, obj: Obj, expected: list[Any]) -> None:
    assert cells(key, obj) == expected


def event(**fields: Any) -> Obj:
    base: Obj = {
        "metadata": {"name": "pi.1"},
        "involvedObject": {"kind": "Job", "name": "pi", "fieldPath": "spec.template"},
        "type": "Normal",
        "reason": "SuccessfulCreate",
        "message": "Created pod: pi-abc\n",
        "source": {"component": "job-controller"},
    }
    return {**base, **fields}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            event(firstTimestamp=ago(3 * DAY), lastTimestamp=ago(2 * DAY), count=6),
            ["2d", "Normal", "SuccessfulCreate", "job/pi", "spec.template", "job-controller",
             "Created pod: pi-abc", "3d", 6, "pi.1"],
            id="classic",
        ),
        pytest.param(
            event(firstTimestamp=ago(300)),
            ["5m", "Normal", "SuccessfulCreate", "job/pi", "spec.template", "job-controller",
             "Created pod: pi-abc", "5m", 1, "pi.1"],
            id="last-seen-defaults-to-first-seen",
        ),
        pytest.param(
            event(eventTime="2026-01-09T23:59:00.000000Z", source={}, reportingComponent="kubelet",
                  reportingInstance="node-1"),
            ["60s", "Normal", "SuccessfulCreate", "job/pi", "spec.template", "kubelet, node-1",
             "Created pod: pi-abc", "60s", 1, "pi.1"],
            id="new-api-event-time",
        ),
        pytest.param(
            event(eventTime=ago(HOUR), series={"count": 4, "lastObservedTime": ago(120)}),
            ["2m", "Normal", "SuccessfulCreate", "job/pi", "spec.template", "job-controller",
             "Created pod: pi-abc", "60m", 4, "pi.1"],
            id="series",
        ),
        pytest.param(
            event(involvedObject={"kind": "Node"}, source={"component": "kubelet", "host": "n1"}),
            ["<unknown>", "Normal", "SuccessfulCreate", "node", "", "kubelet, n1", "Created pod: pi-abc",
             "<unknown>", 1, "pi.1"],
            id="object-without-name",
        ),
    ],
)  # fmt: skip
def test_event_cells(obj: Obj, expected: list[Any]) -> None:
    assert cells("events", obj) == expected


# --- custom resources ---------------------------------------------------------------------------------------

WIDGET: Obj = {
    "metadata": {"name": "w1", "creationTimestamp": ago(2 * HOUR)},
    "spec": {"size": 3, "weight": 2.5, "shiny": True, "tags": ["a", "b"], "labels": {"x": "y"}},
    "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]},
}


def test_custom_resource_cells_follow_the_printer_columns() -> None:
    assert table(WIDGETS, [WIDGET], NOW)["rows"][0]["cells"] == ["w1", 3, "True", 2.5, True, "120m"]
    empty = {"metadata": {"name": "w2"}}
    assert table(WIDGETS, [empty], NOW)["rows"][0]["cells"] == ["w2", None, None, None, None, None]
    assert table(GADGETS, [WIDGET], NOW)["rows"][0]["cells"] == ["w1", "120m"]


@pytest.mark.parametrize(
    ("kind", "path", "cell"),
    [
        pytest.param("string", ".spec.size", "3", id="string-of-integer"),
        pytest.param("string", ".spec.weight", "2.5", id="string-of-float"),
        pytest.param("string", ".spec.shiny", "true", id="string-of-boolean"),
        pytest.param("string", ".spec.tags", '["a","b"]', id="string-of-list-is-json"),
        pytest.param("string", ".spec.labels", '{"x":"y"}', id="string-of-map-is-json"),
        pytest.param("string", ".spec.huge", "1e+06", id="float-as-go-prints-it"),
        pytest.param("string", ".spec.tiny", "5e-05", id="small-float-as-go-prints-it"),
        pytest.param("integer", ".spec.weight", 2, id="integer-of-float-truncates"),
        pytest.param("integer", ".spec.shiny", None, id="integer-of-boolean-is-empty"),
        pytest.param("number", ".spec.size", 3.0, id="number-of-integer"),
        pytest.param("boolean", ".spec.size", None, id="boolean-of-integer-is-empty"),
        pytest.param("date", ".metadata.creationTimestamp", "120m", id="date-is-an-age"),
        pytest.param("date", ".spec.when", "<invalid>", id="date-unparseable"),
        pytest.param("date", ".spec.never", "<unknown>", id="date-empty"),
        pytest.param("date", ".spec.size", None, id="date-of-integer-is-empty"),
        pytest.param("string", ".spec.missing", None, id="missing-is-empty"),
    ],
)
def test_printer_column_types(kind: str, path: str, cell: Any) -> None:
    rtype = ResourceType("example.com", "v1", "Widget", "widgets", "widget", True,
                         printer_columns=({"name": "X", "type": kind, "jsonPath": path},))  # fmt: skip
    obj = {**WIDGET, "spec": {**WIDGET["spec"], "huge": 1e6, "tiny": 0.00005, "when": "soon", "never": ""}}
    assert table(rtype, [obj], NOW)["rows"][0]["cells"][1] == cell


@pytest.mark.parametrize(
    ("path", "values"),
    [
        pytest.param(".spec.size", [3], id="fields"),
        pytest.param("{.spec.size}", [3], id="braces"),
        pytest.param("$.spec.size", [3], id="root"),
        pytest.param(".spec.tags[1]", ["b"], id="index"),
        pytest.param(".spec.tags[-1]", ["b"], id="negative-index"),
        pytest.param(".spec.tags[5]", [], id="index-out-of-range"),
        pytest.param(".spec.tags[*]", ["a", "b"], id="every-item"),
        pytest.param(".spec.labels.*", ["y"], id="every-value"),
        pytest.param(".spec['labels']['x']", ["y"], id="quoted-keys"),
        pytest.param('.status.conditions[?(@.type=="Ready")].status', ["True"], id="filter-equal"),
        pytest.param(".status.conditions[?(@.type!='Ready')].type", ["Synced"], id="filter-not-equal"),
        pytest.param(".status.conditions[?(@.reason)].type", [], id="filter-exists"),
        pytest.param(".spec.missing.deeper", [], id="missing"),
        pytest.param(".spec.tags[0:1]", [], id="slices-unsupported"),
        pytest.param("..size", [], id="recursive-descent-unsupported"),
    ],
)
def test_jsonpath_subset(path: str, values: list[Any]) -> None:
    assert jsonpath_values(WIDGET, path) == values


# --- rows, includeObject, headers ---------------------------------------------------------------------------

CONFIG: Obj = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "c", "namespace": "default", "uid": "u1", "resourceVersion": "7"},
    "data": {"k": "v"},
}


@pytest.mark.parametrize(
    ("include", "expected"),
    [
        pytest.param(
            "Metadata",
            {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": CONFIG["metadata"]},
            id="metadata",
        ),
        pytest.param(
            None,
            {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": CONFIG["metadata"]},
            id="default-is-metadata",
        ),
        pytest.param(
            "",
            {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": CONFIG["metadata"]},
            id="empty-is-metadata",
        ),
        pytest.param("Object", CONFIG, id="object"),
        pytest.param("None", None, id="none"),
    ],
)
def test_include_object(include: str | None, expected: Obj | None) -> None:
    row = table(TYPES["configmaps"], [CONFIG], NOW, include)["rows"][0]
    assert row.get("object") == expected
    assert row == table_row(TYPES["configmaps"], CONFIG, NOW, include)


def test_include_object_rejects_other_values() -> None:
    with pytest.raises(ValueError, match="includeObject"):
        table(TYPES["configmaps"], [CONFIG], NOW, "Everything")


def test_partial_metadata_is_a_copy() -> None:
    row = table(TYPES["configmaps"], [CONFIG], NOW)["rows"][0]
    row["object"]["metadata"]["name"] = "changed"
    assert CONFIG["metadata"]["name"] == "c"


def test_table_shape_headers_and_list_metadata() -> None:
    listing = table(
        TYPES["configmaps"], [CONFIG, CONFIG], NOW, list_meta={"resourceVersion": "9", "continue": "x"}
    )
    assert listing["kind"] == "Table" and listing["apiVersion"] == "meta.k8s.io/v1"
    assert listing["metadata"] == {"resourceVersion": "9", "continue": "x"}
    assert len(listing["rows"]) == 2 and len(listing["columnDefinitions"]) == 3
    assert listing["columnDefinitions"] == column_definitions(TYPES["configmaps"])
    later_event = table(TYPES["configmaps"], [CONFIG], NOW, headers=False)
    assert later_event["columnDefinitions"] == [] and later_event["rows"][0]["cells"] == ["c", 1, "<unknown>"]
