"""What the local kubelet writes as pod status and node status, as upstream's kubelet writes them: tables of cases,
no server."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from multiqueue.local.node import (
    NodeFacts,
    lease_body,
    node_conditions,
    node_labels,
    node_status,
    read_node_facts,
    status_differs,
)
from multiqueue.local.podstatus import Ended, PodView, pod_status

Obj = dict[str, Any]
T0, T1, T2 = "2030-01-01T00:00:00Z", "2030-01-01T00:00:05Z", "2030-01-01T00:00:09Z"


def pod(*, init: bool = False, status: Obj | None = None, resources: Obj | None = None) -> Obj:
    container: Obj = {"name": "main", "image": "busybox:1.36"}
    if resources is not None:
        container["resources"] = resources
    spec: Obj = {"nodeName": "node-1", "containers": [container, {"name": "side", "image": "busybox"}]}
    if init:
        spec["initContainers"] = [{"name": "setup", "image": "busybox"}]
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
        "spec": spec,
        "status": status or {},
    }


def conditions(status: Obj) -> dict[str, tuple[str, str | None, str | None]]:
    return {c["type"]: (c["status"], c.get("reason"), c.get("message")) for c in status["conditions"]}


def by_name(status: Obj, field: str = "containerStatuses") -> dict[str, Obj]:
    return {s["name"]: s for s in status[field]}


def test_running_pod() -> None:
    subject = pod(status={"phase": "Pending", "qosClass": "BestEffort"})
    view = PodView.of(subject, T0)
    for container in view.main.values():
        container.run(1, T1)
    status = pod_status(subject, view, "Running", T1)
    assert conditions(status) == {
        "PodScheduled": ("True", None, None),
        "PodReadyToStartContainers": ("True", None, None),
        "Initialized": ("True", None, None),
        "ContainersReady": ("True", None, None),
        "Ready": ("True", None, None),
    }
    assert (status["phase"], status["startTime"], status["qosClass"]) == ("Running", T0, "BestEffort")
    assert (status["hostIP"], status["podIP"], status["hostIPs"], status["podIPs"]) == (
        "127.0.0.1",
        "127.0.0.1",
        [{"ip": "127.0.0.1"}],
        [{"ip": "127.0.0.1"}],
    )
    main = by_name(status)["main"]
    assert main["state"] == {"running": {"startedAt": T1}}
    assert (main["ready"], main["started"], main["restartCount"], main["image"]) == (
        True,
        True,
        0,
        "busybox:1.36",
    )
    assert main["containerID"].startswith("multiqueue://") and len(main["containerID"]) == 13 + 64
    assert main["lastState"] == {}
    assert "initContainerStatuses" not in status


def test_a_container_in_crash_loop_back_off_makes_the_pod_not_ready() -> None:
    subject = pod()
    view = PodView.of(subject, T0)
    view.main["side"].run(1, T0)
    main = view.main["main"]
    main.run(1, T0)
    main.restarts = 1
    main.last = main.end(Ended.of(2), T1)
    main.ended = None
    main.waiting = ("CrashLoopBackOff", "back-off 10s restarting failed container=main pod=p_default(u-1)")
    status = pod_status(subject, view, "Running", T1)
    assert conditions(status)["ContainersReady"] == (
        "False",
        "ContainersNotReady",
        "containers with unready status: [main]",
    )
    assert conditions(status)["Ready"] == conditions(status)["ContainersReady"]
    reported = by_name(status)["main"]
    assert reported["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert reported["lastState"]["terminated"]["exitCode"] == 2
    assert reported["lastState"]["terminated"]["reason"] == "Error"
    assert reported["lastState"]["terminated"]["finishedAt"] == T1
    assert (reported["restartCount"], reported["ready"]) == (1, False)


def test_a_finished_pod_is_completed_and_keeps_transition_times_that_did_not_change() -> None:
    earlier = {
        "phase": "Running",
        "qosClass": "Burstable",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2029-12-31T23:59:59Z"},
            {"type": "Initialized", "status": "True", "lastTransitionTime": T0},
            {"type": "Ready", "status": "True", "lastTransitionTime": T0},
        ],
    }
    subject = pod(status=earlier)
    view = PodView.of(subject, T0)
    view.main["main"].run(1, T0)
    view.main["main"].end(Ended.of(0), T1)
    view.main["side"].run(1, T0)
    view.main["side"].end(Ended(137, "ContainerStatusUnknown", "could not be located"), T1)
    status = pod_status(subject, view, "Failed", T2)
    assert conditions(status) == {
        "PodReadyToStartContainers": ("False", None, None),
        "Initialized": ("True", None, None),
        "ContainersReady": ("False", "PodCompleted", None),
        "Ready": ("False", "PodCompleted", None),
    }, "PodScheduled is the scheduler's: it stays as it is"
    times = {c["type"]: c["lastTransitionTime"] for c in status["conditions"]}
    assert times == {"PodReadyToStartContainers": T2, "Initialized": T0, "ContainersReady": T2, "Ready": T2}
    assert status["qosClass"] == "Burstable", "the API server's, never changed"
    side = by_name(status)["side"]["state"]["terminated"]
    assert side == {
        "exitCode": 137,
        "reason": "ContainerStatusUnknown",
        "message": "could not be located",
        "startedAt": T0,
        "finishedAt": T1,
        "containerID": by_name(status)["side"]["containerID"],
    }
    assert by_name(status)["main"]["state"]["terminated"]["reason"] == "Completed"
    assert not by_name(status)["main"]["started"]


def test_init_containers_hold_the_pod_pending() -> None:
    subject = pod(init=True, resources={"limits": {"cpu": "1", "memory": "1Gi"}})
    view = PodView.of(subject, T0)
    view.init["setup"].run(1, T0)
    status = pod_status(subject, view, "Pending", T1)
    assert conditions(status)["Initialized"] == (
        "False",
        "ContainersNotInitialized",
        "containers with incomplete status: [setup]",
    )
    assert conditions(status)["Ready"] == (
        "False",
        "ContainersNotReady",
        "containers with unready status: [main side]",
    )
    assert by_name(status)["main"]["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert by_name(status, "initContainerStatuses")["setup"]["state"] == {"running": {"startedAt": T0}}
    assert status["qosClass"] == "Burstable", "computed when the API server left none"


def test_an_init_container_that_failed_fails_the_pod() -> None:
    subject = pod(init=True)
    view = PodView.of(subject, T0)
    view.init["setup"].run(1, T0)
    view.init["setup"].end(Ended.of(1), T1)
    status = pod_status(subject, view, "Failed", T1)
    assert conditions(status)["Initialized"][0] == "False"
    assert by_name(status, "initContainerStatuses")["setup"]["state"]["terminated"]["exitCode"] == 1
    assert by_name(status)["main"]["state"] == {"waiting": {"reason": "PodInitializing"}}


# --- the Node -----------------------------------------------------------------------------------------------------

FACTS = NodeFacts(
    "m" * 32, "0" * 8 + "-0000-0000-0000-" + "0" * 12, "boot", "6.1.0", "Debian", "amd64", 2, 1024, 2048
)


def test_node_status_and_labels() -> None:
    status = node_status(FACTS, "node-1", "process", 110, 10250, node_conditions([], T0))
    assert status["addresses"] == [
        {"type": "InternalIP", "address": "127.0.0.1"},
        {"type": "Hostname", "address": "node-1"},
    ]
    assert (
        status["capacity"]
        == status["allocatable"]
        == {
            "cpu": "2",
            "memory": "1024Ki",
            "pods": "110",
            "ephemeral-storage": "2048Ki",
        }
    )
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
    assert set(status["nodeInfo"]) == {
        "machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
        "kubeletVersion", "kubeProxyVersion", "operatingSystem", "architecture",
    }  # fmt: skip
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
        ("Ready", "True", "KubeletReady"),
    ]
    labels = node_labels("node-1", "simulate", "arm64")
    assert {k: labels[k] for k in ("kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch")} == {
        "kubernetes.io/hostname": "node-1",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "arm64",
    }
    assert labels["multiqueue.dev/kubelet-mode"] == "simulate"


def test_node_conditions_keep_their_transition_times_and_move_their_heartbeats() -> None:
    first = node_conditions([], T0)
    later = node_conditions(first, T1)
    assert {c["lastTransitionTime"] for c in later} == {T0}
    assert {c["lastHeartbeatTime"] for c in later} == {T1}
    unknown = [{**c, "status": "Unknown"} if c["type"] == "Ready" else c for c in later]
    fixed = {c["type"]: c for c in node_conditions(unknown, T2)}
    assert fixed["Ready"]["lastTransitionTime"] == T2
    assert fixed["DiskPressure"]["lastTransitionTime"] == T0


@pytest.mark.parametrize(
    ("change", "differs"),
    [
        ({}, False),
        ({"heartbeat": T2}, False),
        ({"ready": "Unknown"}, True),
        ({"port": 1}, True),
        ({"pods": 5}, True),
    ],
)
def test_status_differs_sets_heartbeats_aside(change: Obj, differs: bool) -> None:
    desired = node_status(FACTS, "node-1", "process", 110, 10250, node_conditions([], T1))
    conditions = [{**c, "lastHeartbeatTime": change.get("heartbeat", T1)} for c in node_conditions([], T1)]
    if "ready" in change:
        conditions[-1]["status"] = change["ready"]
    current = node_status(
        FACTS,
        "node-1",
        "process",
        change.get("pods", 110),
        change.get("port", 10250),
        list(reversed(conditions)),
    )
    assert status_differs(desired, current) is differs


def test_the_lease_is_held_by_the_node_and_owned_by_it() -> None:
    lease = lease_body("node-1", 40, datetime(2030, 1, 1, 0, 0, 1, 250000, tzinfo=UTC), "uid-1")
    assert lease["metadata"] == {
        "name": "node-1",
        "namespace": "kube-node-lease",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "uid-1"}],
    }
    assert lease["spec"] == {
        "holderIdentity": "node-1",
        "leaseDurationSeconds": 40,
        "renewTime": "2030-01-01T00:00:01.250000Z",
    }


def test_this_machine_has_every_fact(tmp_path: Path) -> None:
    facts = read_node_facts(tmp_path)
    info = facts.node_info("process")
    assert all(isinstance(v, str) for v in info.values())
    assert all(info[k] for k in info if k != "kubeProxyVersion")
    assert facts.cpu >= 1 and facts.memory_kib > 0 and facts.disk_kib > 0
