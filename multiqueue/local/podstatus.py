"""What a pod's status says, from what the local kubelet knows of its containers: the views the kubelet keeps of
each container (running since, how it ended, what it waits for) and the status they make, with the conditions the
kubelet owns. Pure: the kubelet keeps the views up to date and writes what :func:`pod_status` returns.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Final

from multiqueue.api import pods
from multiqueue.api.meta import as_dict, as_list, format_time, metadata
from multiqueue.api.types import Obj
from multiqueue.local import containers, probes
from multiqueue.local.containers import Observation, Seen
from multiqueue.local.node import NODE_IP

# What upstream's kubelet says of a container it cannot find (kubelet_pods.go), in our words per case.
_LOST_MESSAGES: Final = {
    Seen.VANISHED: "The container could not be located: its process ended without recording an exit code",
    Seen.NOTHING: "The container could not be located: the kubelet has no record of it",
}


@dataclasses.dataclass(frozen=True)
class Ended:
    """How a container ended, for its terminated state."""

    exit_code: int
    reason: str = ""
    message: str = ""
    started_at: str | None = None
    finished_at: str | None = None

    @classmethod
    def of(cls, code: int) -> Ended:
        return cls(code, "Completed" if code == 0 else "Error")

    @classmethod
    def observed(cls, seen: Observation) -> Ended:
        if seen.seen is Seen.EXITED and seen.exit_code is not None and seen.start_error is not None:
            finished = format_time(seen.finished_at) if seen.finished_at is not None else None
            return cls(seen.exit_code, "StartError", seen.start_error, seen.started_at, finished)
        if seen.seen is Seen.EXITED and seen.exit_code is not None:
            finished = format_time(seen.finished_at) if seen.finished_at is not None else None
            return dataclasses.replace(
                cls.of(seen.exit_code), started_at=seen.started_at, finished_at=finished
            )
        return cls(
            containers.LOST_EXIT_CODE,
            "ContainerStatusUnknown",
            _LOST_MESSAGES.get(seen.seen, _LOST_MESSAGES[Seen.NOTHING]),
            started_at=seen.started_at,
        )


@dataclasses.dataclass
class ContainerView:
    """What the kubelet knows of one container of a pod, for the pod's status."""

    image: str
    attempt: int = 0  # the attempt it runs or ran last (0: none yet)
    restarts: int = 0
    running_since: str | None = None
    ended: Ended | None = None
    waiting: tuple[str, str] = ("ContainerCreating", "")  # reason, message: while neither running nor ended
    last: Ended | None = None  # how the attempt before ended (lastState)
    probed: bool = False  # it has a readiness probe: ready only once that succeeds
    probe_ready: bool = False  # what its readiness probe says
    startup_probed: bool = False  # it has a startup probe: started only once that succeeds
    probe_started: bool = False  # its startup probe has passed

    def run(self, attempt: int, since: str) -> None:
        self.attempt, self.running_since, self.ended = attempt, since, None
        self.probe_ready = self.probe_started = False

    @property
    def started(self) -> bool:
        """Running, and (with a startup probe) started by it."""
        return self.running_since is not None and (self.probe_started or not self.startup_probed)

    @property
    def ready(self) -> bool:
        """Started, and (with a readiness probe) ready by it."""
        return self.started and (self.probe_ready or not self.probed)

    def end(self, ended: Ended, now: str) -> Ended:
        self.running_since = None
        self.ended = ended if ended.finished_at else dataclasses.replace(ended, finished_at=now)
        return self.ended


@dataclasses.dataclass
class PodView:
    """The containers of one pod as the kubelet last saw them: what its status reports."""

    started: str  # the pod's startTime
    main: dict[str, ContainerView]
    init: dict[str, ContainerView]

    @classmethod
    def of(cls, pod: Obj, started: str) -> PodView:
        spec = as_dict(pod.get("spec"))

        def views(field: str) -> dict[str, ContainerView]:
            found = [as_dict(c) for c in as_list(spec.get(field))]
            return {
                str(c.get("name")): ContainerView(
                    str(c.get("image") or "local"),
                    probed=probes.readiness_of(c) is not None,
                    startup_probed=probes.startup_of(c) is not None,
                )
                for c in found
            }

        view = cls(started, views("containers"), views("initContainers"))
        if view.init:
            for container in view.main.values():
                container.waiting = ("PodInitializing", "")
        return view


def pod_status(pod: Obj, view: PodView, phase: str, now: str) -> Obj:
    """The pod's status: ``phase``, the conditions the kubelet owns and the containers as ``view`` shows them.
    A condition whose status stays keeps its transition time; reasons and messages that no longer apply are sent
    as null (a strategic merge patch then drops them)."""
    current = as_dict(pod.get("status"))
    existing = {str(as_dict(c).get("type")): as_dict(c) for c in as_list(current.get("conditions"))}

    def condition(type_: str, status: str, reason: str | None = None, message: str | None = None) -> Obj:
        before = existing.get(type_, {})
        since = before.get("lastTransitionTime") if before.get("status") == status else None
        return {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": since or now,
        }

    terminal = phase in (pods.SUCCEEDED, pods.FAILED)
    uninitialized = [n for n, c in view.init.items() if not (c.ended is not None and c.ended.exit_code == 0)]
    unready = [n for n, c in view.main.items() if not c.ready]
    ready: tuple[str, str | None, str | None] = ("True", None, None)
    if terminal:
        ready = ("False", "PodCompleted", None)
    elif unready:
        ready = ("False", "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
    conditions = []
    if "PodScheduled" not in existing:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": view.started})
    conditions += [
        condition("PodReadyToStartContainers", "False" if terminal else "True"),
        condition(
            "Initialized",
            "False" if uninitialized else "True",
            "ContainersNotInitialized" if uninitialized else None,
            f"containers with incomplete status: [{' '.join(uninitialized)}]" if uninitialized else None,
        ),
        condition("ContainersReady", *ready),
        condition("Ready", *ready),
    ]
    uid = str(metadata(pod).get("uid"))
    status: Obj = {
        "phase": phase,
        "hostIP": NODE_IP,
        "hostIPs": [{"ip": NODE_IP}],
        "podIP": NODE_IP,
        "podIPs": [{"ip": NODE_IP}],
        "startTime": view.started,
        # The API server sets it when the pod is made, and it may not change: ours only when it is missing.
        "qosClass": current.get("qosClass") or pods.qos_class(pod.get("spec")),
        "conditions": conditions,
        "containerStatuses": [_container_status(uid, n, c, view.started, now) for n, c in view.main.items()],
    }
    if view.init:
        status["initContainerStatuses"] = [
            _container_status(uid, n, c, view.started, now) for n, c in view.init.items()
        ]
    return status


def _container_status(uid: str, name: str, container: ContainerView, started: str, now: str) -> Obj:
    container_id = _container_id(uid, name, container.attempt) if container.attempt else None
    state: Obj
    if container.ended is not None:
        state = {"terminated": _terminated(container.ended, started, now, container_id)}
    elif container.running_since is not None:
        state = {"running": {"startedAt": container.running_since}}
    else:
        reason, message = container.waiting
        state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    last: Obj = {}
    if container.last is not None:
        previous = _container_id(uid, name, max(container.attempt - 1, 1)) if container.attempt else None
        last = {"terminated": _terminated(container.last, started, now, previous)}
    status: Obj = {
        "name": name,
        "image": container.image,
        "imageID": "",
        "ready": "running" in state and container.ready,
        "started": "running" in state and container.started,
        "restartCount": container.restarts,
        "state": state,
        "lastState": last,
    }
    if container_id is not None:
        status["containerID"] = container_id
    return status


def _container_id(uid: str, name: str, attempt: int) -> str:
    """An id for one attempt of a container, as "<runtime>://<id>" (a container runtime's id is 64 hex digits)."""
    return "multiqueue://" + hashlib.sha256(f"{uid}/{name}/{attempt}".encode()).hexdigest()


def _terminated(ended: Ended, started: str, now: str, container_id: str | None) -> Obj:
    state: Obj = {
        "exitCode": ended.exit_code,
        "reason": ended.reason,
        "startedAt": ended.started_at or started,
        "finishedAt": ended.finished_at or now,
    }
    if ended.message:
        state["message"] = ended.message
    if container_id is not None:
        state["containerID"] = container_id
    return state
