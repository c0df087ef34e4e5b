"""meta.k8s.io/v1 Tables: the server-side printing behind ``kubectl get``, with upstream's columns and cells."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Final

from multiqueue.api import jobs, pods
from multiqueue.api.meta import as_dict, as_list, find_condition, metadata, parse_time
from multiqueue.local.apiserver.resources import ResourceType

Obj = dict[str, Any]
Column = tuple[str, str, str, int]  # name, type, description, priority (1 = only with -o wide)
Cells = Callable[[Obj, datetime], list[Any]]


def human_duration(seconds: float) -> str:
    """Upstream's duration.HumanDuration: '45s', '3m10s', '5h', '2d5h', '3y45d'..."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y{rest}d" if rest else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _age(obj: Obj, now: datetime) -> str:
    created = parse_time(metadata(obj).get("creationTimestamp"))
    return "<unknown>" if created is None else human_duration((now - created).total_seconds())


def _since(stamp: Any, now: datetime) -> str:
    moment = parse_time(stamp)
    return "<none>" if moment is None else human_duration((now - moment).total_seconds())


def _name(obj: Obj) -> str:
    return str(metadata(obj).get("name", ""))


# --- jobs ---------------------------------------------------------------------------------------------------


def job_status(job: Obj) -> str:
    if jobs.is_complete(job):
        return "Complete"
    if jobs.is_failed(job):
        return "Failed"
    if metadata(job).get("deletionTimestamp"):
        return "Terminating"
    for condition in (jobs.SUCCESS_CRITERIA_MET, jobs.FAILURE_TARGET, jobs.SUSPENDED):
        if jobs.has_condition(job, condition):
            return condition
    return "Running"


def _job_cells(job: Obj, now: datetime) -> list[Any]:
    spec, status = jobs.spec_of(job), jobs.status_of(job)
    succeeded = status.get("succeeded") or 0
    total = jobs.completions(job)
    if total is not None:
        completions = f"{succeeded}/{total}"
    else:
        parallelism = spec.get("parallelism") or 0
        completions = f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"
    started, finished = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    duration = "" if started is None else human_duration(((finished or now) - started).total_seconds())
    containers = [
        as_dict(c) for c in as_list(as_dict(as_dict(spec.get("template")).get("spec")).get("containers"))
    ]
    selector = ",".join(
        f"{k}={v}" for k, v in as_dict(as_dict(spec.get("selector")).get("matchLabels")).items()
    )
    return [
        _name(job),
        job_status(job),
        completions,
        duration,
        _age(job, now),
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
        selector or "<none>",
    ]


# --- pods ---------------------------------------------------------------------------------------------------


def pod_status(pod: Obj) -> str:
    """The STATUS column: phase, refined by container states, as kubectl prints it."""
    status = as_dict(pod.get("status"))
    reason = str(status.get("reason") or pods.phase(pod))
    init_statuses = pods.container_statuses(pod, init=True)
    init_total = len(as_list(as_dict(pod.get("spec")).get("initContainers")))
    initializing = False
    for i, cs in enumerate(init_statuses):
        state = as_dict(cs.get("state"))
        terminated, waiting = as_dict(state.get("terminated")), as_dict(state.get("waiting"))
        if terminated and terminated.get("exitCode") == 0:
            continue
        if terminated:
            detail = terminated.get("reason") or f"ExitCode:{terminated.get('exitCode')}"
            reason = f"Init:{detail}"
        elif waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{init_total}"
        initializing = True
        break
    if not initializing:
        has_running = False
        for cs in reversed(pods.container_statuses(pod)):
            state = as_dict(cs.get("state"))
            waiting, terminated = as_dict(state.get("waiting")), as_dict(state.get("terminated"))
            if waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated.get("reason"):
                reason = str(terminated["reason"])
            elif terminated:
                signal = terminated.get("signal")
                reason = f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode')}"
            elif state.get("running") and cs.get("ready"):
                has_running = True
        if reason == "Completed" and has_running:
            reason = "Running" if find_condition(status.get("conditions"), "Ready") else "NotReady"
    if metadata(pod).get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return reason


def _pod_cells(pod: Obj, now: datetime) -> list[Any]:
    statuses = pods.container_statuses(pod)
    total = len(as_list(as_dict(pod.get("spec")).get("containers")))
    ready = sum(1 for cs in statuses if cs.get("ready"))
    status = as_dict(pod.get("status"))
    spec = as_dict(pod.get("spec"))
    return [
        _name(pod),
        f"{ready}/{total}",
        pod_status(pod),
        pods.restart_count(pod),
        _age(pod, now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        "<none>",
    ]


# --- other kinds --------------------------------------------------------------------------------------------


def _cronjob_cells(cronjob: Obj, now: datetime) -> list[Any]:
    spec, status = as_dict(cronjob.get("spec")), as_dict(cronjob.get("status"))
    template_spec = as_dict(
        as_dict(as_dict(as_dict(spec.get("jobTemplate")).get("spec")).get("template")).get("spec")
    )
    containers = [as_dict(c) for c in as_list(template_spec.get("containers"))]
    return [
        _name(cronjob),
        spec.get("schedule", ""),
        spec.get("timeZone") or "<none>",
        "True" if spec.get("suspend") else "False",
        len(as_list(status.get("active"))),
        _since(status.get("lastScheduleTime"), now),
        _age(cronjob, now),
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
        "<none>",
    ]


def _node_cells(node: Obj, now: datetime) -> list[Any]:
    ready = find_condition(as_dict(node.get("status")).get("conditions"), "Ready")
    state = "Ready" if ready is not None and ready.get("status") == "True" else "NotReady"
    if as_dict(node.get("spec")).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = as_dict(metadata(node).get("labels"))
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    version = as_dict(as_dict(node.get("status")).get("nodeInfo")).get("kubeletVersion", "")
    return [_name(node), state, ",".join(roles) or "<none>", _age(node, now), version]


def _namespace_cells(namespace: Obj, now: datetime) -> list[Any]:
    return [_name(namespace), as_dict(namespace.get("status")).get("phase", ""), _age(namespace, now)]


def _event_cells(event: Obj, now: datetime) -> list[Any]:
    involved = as_dict(event.get("involvedObject"))
    last = event.get("lastTimestamp") or event.get("eventTime") or metadata(event).get("creationTimestamp")
    return [
        _since(last, now),
        event.get("type", ""),
        event.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        event.get("message", ""),
    ]


def _lease_cells(lease: Obj, now: datetime) -> list[Any]:
    return [_name(lease), as_dict(lease.get("spec")).get("holderIdentity") or "<none>", _age(lease, now)]


def _default_cells(obj: Obj, now: datetime) -> list[Any]:
    return [_name(obj), _age(obj, now)]


_NAME: Final = ("Name", "string", "Name must be unique within a namespace.", 0)
_AGE: Final = ("Age", "string", "Time since the object was created.", 0)
_PRINTERS: Final[dict[str, tuple[list[Column], Cells]]] = {
    "batch/jobs": (
        [
            _NAME,
            ("Status", "string", "Status of the job.", 0),
            (
                "Completions",
                "string",
                "The desired number of successfully finished pods the job should be run with.",
                0,
            ),
            ("Duration", "string", "Time required to complete the job.", 0),
            _AGE,
            ("Containers", "string", "Names of each container in the template.", 1),
            ("Images", "string", "Images referenced by each container in the template.", 1),
            ("Selector", "string", "A label query over pods that should match the pod count.", 1),
        ],
        _job_cells,
    ),
    "pods": (
        [
            _NAME,
            ("Ready", "string", "The aggregate readiness state of this pod for accepting traffic.", 0),
            ("Status", "string", "The aggregate status of the containers in this pod.", 0),
            ("Restarts", "string", "The number of times the containers in this pod have been restarted.", 0),
            _AGE,
            ("IP", "string", "IP address allocated to the pod.", 1),
            ("Node", "string", "Name of the node where the pod is scheduled.", 1),
            ("Nominated Node", "string", "Name of the node where the pod may be scheduled.", 1),
            ("Readiness Gates", "string", "Pod readiness gates.", 1),
        ],
        _pod_cells,
    ),
    "batch/cronjobs": (
        [
            _NAME,
            ("Schedule", "string", "The schedule in Cron format.", 0),
            ("Timezone", "string", "The time zone name for the given schedule.", 0),
            ("Suspend", "boolean", "Whether subsequent executions are suspended.", 0),
            ("Active", "integer", "Number of currently running jobs.", 0),
            ("Last Schedule", "string", "When the job was last successfully scheduled.", 0),
            _AGE,
            ("Containers", "string", "Names of each container in the template.", 1),
            ("Images", "string", "Images referenced by each container in the template.", 1),
            ("Selector", "string", "A label query over pods.", 1),
        ],
        _cronjob_cells,
    ),
    "nodes": (
        [
            _NAME,
            ("Status", "string", "The status of the node.", 0),
            ("Roles", "string", "The roles of the node.", 0),
            _AGE,
            ("Version", "string", "Kubelet version.", 0),
        ],
        _node_cells,
    ),
    "namespaces": ([_NAME, ("Status", "string", "The status of the namespace.", 0), _AGE], _namespace_cells),
    "events": (
        [
            ("Last Seen", "string", "Time since the event was last seen.", 0),
            ("Type", "string", "Type of the event.", 0),
            ("Reason", "string", "Why the event happened.", 0),
            ("Object", "string", "The object the event is about.", 0),
            ("Message", "string", "A human-readable description.", 0),
        ],
        _event_cells,
    ),
    "coordination.k8s.io/leases": (
        [_NAME, ("Holder", "string", "The holder of the lease.", 0), _AGE],
        _lease_cells,
    ),
}


def _crd_printer(rtype: ResourceType) -> tuple[list[Column], Cells]:
    """Columns of a CRD's additionalPrinterColumns (simple ``.a.b`` JSONPaths), then AGE."""
    columns: list[Column] = [_NAME]
    paths: list[str] = []
    for column in rtype.printer_columns:
        columns.append(
            (
                str(column.get("name", "")),
                str(column.get("type", "string")),
                str(column.get("description", "")),
                int(column.get("priority") or 0),
            )
        )
        paths.append(str(column.get("jsonPath", "")))
    columns.append(_AGE)

    def cells(obj: Obj, now: datetime) -> list[Any]:
        values: list[Any] = []
        for path in paths:
            current: Any = obj
            for part in path.strip(".").split("."):
                current = as_dict(current).get(part) if part else current
            values.append("<none>" if current is None else current)
        return [_name(obj), *values, _age(obj, now)]

    return columns, cells


def table(
    rtype: ResourceType, objects: Iterable[Obj], now: datetime, include_object: str = "Metadata"
) -> Obj:
    """A Table of ``objects``; each row carries the object, its metadata only, or nothing (``includeObject``)."""
    if rtype.printer_columns:
        columns, cells = _crd_printer(rtype)
    else:
        columns, cells = _PRINTERS.get(rtype.key, ([_NAME, _AGE], _default_cells))
    rows = []
    for obj in objects:
        row: Obj = {"cells": cells(obj, now)}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": metadata(obj),
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": [
            {
                "name": name,
                "type": type_,
                "format": "name" if name == "Name" else "",
                "description": d,
                "priority": p,
            }
            for name, type_, d, p in columns
        ],
        "rows": rows,
    }
