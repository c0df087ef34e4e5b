"""meta.k8s.io/v1 Tables: the server-side printing behind ``kubectl get``, with upstream's columns and cells.

kubectl asks for ``as=Table`` and prints what the server computed; a plain list would leave it with NAME and AGE.
As upstream, every column is filled (those of priority 1 are shown only with ``-o wide``), built-in kinds use
the cells of kubectl's own printers, custom kinds their CRD's additionalPrinterColumns, and each row carries the
object's metadata (``includeObject``) so kubectl can name what it printed. Times are measured against ``now``,
so tables are pure and testable.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Final

import kubernetes.client.models as models

from multiqueue.api.durations import human_duration
from multiqueue.api.errors import SelectorError, go_float
from multiqueue.api.labelselectors import label_selector_from_dict
from multiqueue.api.meta import as_dict, as_list, find_condition, metadata, parse_time
from multiqueue.api.types import Obj
from multiqueue.apiserver.resources import ResourceType
from multiqueue.apiserver.rules import eventsv1

Cells = Callable[[Obj, datetime], list[Any]]

INCLUDE_NONE: Final = "None"
INCLUDE_METADATA: Final = "Metadata"
INCLUDE_OBJECT: Final = "Object"
TABLE_API_VERSION: Final = "meta.k8s.io/v1"


# --- durations and small cell formats -----------------------------------------------------------------------


def _since(stamp: Any, now: datetime) -> str:
    """Time since ``stamp``; "<unknown>" when it is missing, as upstream prints a zero timestamp."""
    moment = parse_time(stamp)
    return "<unknown>" if moment is None else human_duration(now - moment)


def _age(obj: Obj, now: datetime) -> str:
    return _since(metadata(obj).get("creationTimestamp"), now)


def _name(obj: Obj) -> str:
    return str(metadata(obj).get("name") or "")


def _bool_text(value: Any) -> str:
    return "<unset>" if value is None else ("True" if value is True else "False")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _containers(pod_spec: Any) -> tuple[str, str]:
    """(names, images) of a pod spec's containers, comma-separated: the wide CONTAINERS and IMAGES cells."""
    containers = [as_dict(c) for c in as_list(as_dict(pod_spec).get("containers"))]
    return ",".join(str(c.get("name") or "") for c in containers), ",".join(
        str(c.get("image") or "") for c in containers
    )


def format_label_selector(selector: Any) -> str:
    """A metav1.LabelSelector as upstream prints it: requirements sorted by key, "<none>" when it selects all."""
    try:
        parsed = label_selector_from_dict(selector)
    except SelectorError:
        return "<error>"
    text = ",".join(str(r) for r in sorted(parsed.requirements, key=lambda r: r.key))
    return text or "<none>"


@functools.cache
def _doc(model: str, field: str) -> str:
    """The API's own description of a field, from the client's models (upstream uses these for columns)."""
    for name, info in getattr(models, model).model_fields.items():
        if field in (name, info.serialization_alias):
            return info.description or ""
    return ""


# --- columns ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str
    priority: int = 0  # 1: shown only with -o wide
    format: str = ""

    def definition(self) -> Obj:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


@dataclasses.dataclass(frozen=True)
class Printer:
    columns: tuple[Column, ...]
    cells: Cells


def _name_column() -> Column:
    return Column("Name", "string", _doc("V1ObjectMeta", "name"), format="name")


def _age_column() -> Column:
    return Column("Age", "string", _doc("V1ObjectMeta", "creationTimestamp"))


def _template_columns(selector_doc: str) -> tuple[Column, ...]:
    return (
        Column("Containers", "string", "Names of each container in the template.", 1),
        Column("Images", "string", "Images referenced by each container in the template.", 1),
        Column("Selector", "string", selector_doc, 1),
    )


# --- jobs ---------------------------------------------------------------------------------------------------


def _has_condition(obj: Obj, type_: str) -> bool:
    """Upstream reads the first condition of a type, and only its status."""
    condition = find_condition(as_dict(obj.get("status")).get("conditions"), type_)
    return condition is not None and condition.get("status") == "True"


def job_status(job: Obj) -> str:
    """The STATUS column of a Job, first match wins: finished, being deleted, suspended, failing, running."""
    if _has_condition(job, "Complete"):
        return "Complete"
    if _has_condition(job, "Failed"):
        return "Failed"
    if metadata(job).get("deletionTimestamp"):
        return "Terminating"
    if _has_condition(job, "Suspended"):
        return "Suspended"
    if _has_condition(job, "FailureTarget"):
        return "FailureTarget"
    return "Running"


def job_completions(job: Obj) -> str:
    """COMPLETIONS: "3/5"; a work queue (no completions) needs one success: "1/1", or "0/1 of 4" in parallel."""
    spec, succeeded = as_dict(job.get("spec")), _int(as_dict(job.get("status")).get("succeeded"))
    completions = spec.get("completions")
    if isinstance(completions, int) and not isinstance(completions, bool):
        return f"{succeeded}/{completions}"
    parallelism = _int(spec.get("parallelism"))
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _job_duration(job: Obj, now: datetime) -> str:
    status = as_dict(job.get("status"))
    started = parse_time(status.get("startTime"))
    if started is None:
        return ""
    completed = parse_time(status.get("completionTime"))
    return human_duration((completed or now) - started)


def _job_cells(job: Obj, now: datetime) -> list[Any]:
    spec = as_dict(job.get("spec"))
    names, images = _containers(as_dict(spec.get("template")).get("spec"))
    return [
        _name(job),
        job_status(job),
        job_completions(job),
        _job_duration(job, now),
        _age(job, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def _job_printer() -> Printer:
    columns = (
        _name_column(),
        Column("Status", "string", "Status of the job."),
        Column("Completions", "string", _doc("V1JobStatus", "succeeded")),
        Column("Duration", "string", "Time required to complete the job."),
        _age_column(),
        *_template_columns(_doc("V1JobSpec", "selector")),
    )
    return Printer(columns, _job_cells)


def _cronjob_cells(cronjob: Obj, now: datetime) -> list[Any]:
    spec, status = as_dict(cronjob.get("spec")), as_dict(cronjob.get("status"))
    job_spec = as_dict(as_dict(spec.get("jobTemplate")).get("spec"))
    names, images = _containers(as_dict(job_spec.get("template")).get("spec"))
    last = status.get("lastScheduleTime")
    return [
        _name(cronjob),
        str(spec.get("schedule") or ""),
        spec.get("timeZone") or "<none>",
        _bool_text(spec.get("suspend")),
        len(as_list(status.get("active"))),
        "<none>" if last is None else _since(last, now),
        _age(cronjob, now),
        names,
        images,
        format_label_selector(job_spec.get("selector")),
    ]


def _cronjob_printer() -> Printer:
    columns = (
        _name_column(),
        Column("Schedule", "string", _doc("V1CronJobSpec", "schedule")),
        Column("Timezone", "string", _doc("V1CronJobSpec", "timeZone")),
        Column("Suspend", "boolean", _doc("V1CronJobSpec", "suspend")),
        Column("Active", "integer", _doc("V1CronJobStatus", "active")),
        Column("Last Schedule", "string", _doc("V1CronJobStatus", "lastScheduleTime")),
        _age_column(),
        *_template_columns(_doc("V1JobSpec", "selector")),
    )
    return Printer(columns, _cronjob_cells)


# --- pods ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PodSummary:
    """What READY, STATUS and RESTARTS show, computed together as upstream does (they share one pass)."""

    ready: int
    total: int
    reason: str
    restarts: int
    last_restart: datetime | None


def _terminated_reason(terminated: Obj, prefix: str) -> str:
    if terminated.get("reason"):
        return f"{prefix}{terminated['reason']}"
    if _int(terminated.get("signal")):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{_int(terminated.get('exitCode'))}"


def _later(current: datetime | None, status: Obj) -> datetime | None:
    """The later of ``current`` and when this container last terminated (its lastState)."""
    finished = parse_time(as_dict(as_dict(status.get("lastState")).get("terminated")).get("finishedAt"))
    if finished is None or (current is not None and current >= finished):
        return current
    return finished


def pod_summary(pod: Obj) -> PodSummary:
    """READY, STATUS and RESTARTS of a pod, with upstream's precedence of reasons.

    The phase (or status.reason, e.g. Evicted) is refined by the scheduling gate, then by the first init container
    that has not succeeded (Init:2/3, Init:CrashLoopBackOff, Init:Error...), else by the containers, last one
    first (ContainerCreating, CrashLoopBackOff, Completed, Error, ExitCode:N...); a pod being deleted reads
    Terminating until it has finished. Sidecars (init containers that always restart) count as containers.
    """
    spec, status = as_dict(pod.get("spec")), as_dict(pod.get("status"))
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    conditions = as_list(status.get("conditions"))
    for condition in conditions:
        if (
            as_dict(condition).get("type") == "PodScheduled"
            and as_dict(condition).get("reason") == "SchedulingGated"
        ):
            reason = "SchedulingGated"
    init_specs = [as_dict(c) for c in as_list(spec.get("initContainers"))]
    sidecars = {str(c.get("name")) for c in init_specs if c.get("restartPolicy") == "Always"}
    total = len(as_list(spec.get("containers"))) + len(sidecars)
    ready = restarts = sidecar_restarts = 0
    last_restart: datetime | None = None
    sidecar_last_restart: datetime | None = None
    initializing = False
    for index, init in enumerate(as_dict(s) for s in as_list(status.get("initContainerStatuses"))):
        restarts += _int(init.get("restartCount"))
        last_restart = _later(last_restart, init)
        is_sidecar = str(init.get("name")) in sidecars
        if is_sidecar:
            sidecar_restarts += _int(init.get("restartCount"))
            sidecar_last_restart = _later(sidecar_last_restart, init)
        state = as_dict(init.get("state"))
        terminated, waiting = state.get("terminated"), as_dict(state.get("waiting"))
        if isinstance(terminated, dict) and _int(terminated.get("exitCode")) == 0:
            continue
        if is_sidecar and init.get("started") is True:
            ready += 1 if init.get("ready") is True else 0
            continue
        if isinstance(terminated, dict):
            reason = _terminated_reason(terminated, "Init:")
        elif waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break
    initialized = find_condition(conditions, "Initialized")
    if not initializing or (initialized is not None and initialized.get("status") == "True"):
        restarts, last_restart = sidecar_restarts, sidecar_last_restart
        running = False
        for container in reversed([as_dict(s) for s in as_list(status.get("containerStatuses"))]):
            restarts += _int(container.get("restartCount"))
            last_restart = _later(last_restart, container)
            state = as_dict(container.get("state"))
            terminated, waiting = state.get("terminated"), as_dict(state.get("waiting"))
            if waiting.get("reason"):
                reason = str(waiting["reason"])
            elif isinstance(terminated, dict):
                reason = _terminated_reason(terminated, "")
            elif container.get("ready") is True and isinstance(state.get("running"), dict):
                running = True
                ready += 1
        if reason == "Completed" and running:
            pod_ready = find_condition(conditions, "Ready")
            reason = "Running" if pod_ready is not None and pod_ready.get("status") == "True" else "NotReady"
    if metadata(pod).get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    return PodSummary(ready, total, reason, restarts, last_restart)


def _pod_cells(pod: Obj, now: datetime) -> list[Any]:
    spec, status = as_dict(pod.get("spec")), as_dict(pod.get("status"))
    summary = pod_summary(pod)
    restarts = str(summary.restarts)
    if summary.restarts and summary.last_restart is not None:
        restarts += f" ({human_duration(now - summary.last_restart)} ago)"
    ips = [as_dict(ip).get("ip") for ip in as_list(status.get("podIPs"))]
    gates = [as_dict(g).get("conditionType") for g in as_list(spec.get("readinessGates"))]
    gates_cell = "<none>"
    if gates:
        passed = sum(1 for gate in gates if _has_condition(pod, str(gate)))
        gates_cell = f"{passed}/{len(gates)}"
    return [
        _name(pod),
        f"{summary.ready}/{summary.total}",
        summary.reason,
        restarts,
        _age(pod, now),
        (ips[0] if ips else status.get("podIP")) or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_cell,
    ]


def _pod_printer() -> Printer:
    columns = (
        _name_column(),
        Column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
        Column("Status", "string", "The aggregate status of the containers in this pod."),
        Column(
            "Restarts",
            "string",
            "The number of times the containers in this pod have been restarted and when the last container "
            "in this pod has restarted.",
        ),
        _age_column(),
        Column("IP", "string", _doc("V1PodStatus", "podIP"), 1),
        Column("Node", "string", _doc("V1PodSpec", "nodeName"), 1),
        Column("Nominated Node", "string", _doc("V1PodStatus", "nominatedNodeName"), 1),
        Column("Readiness Gates", "string", _doc("V1PodSpec", "readinessGates"), 1),
    )
    return Printer(columns, _pod_cells)


def _pod_row_conditions(pod: Obj) -> list[Obj]:
    """Finished pods' rows say so, as upstream's do (the Completed row condition)."""
    phase = as_dict(pod.get("status")).get("phase")
    if phase == "Succeeded":
        message = "The pod has completed successfully."
    elif phase == "Failed":
        message = "The pod failed."
    else:
        return []
    return [{"type": "Completed", "status": "True", "reason": phase, "message": message}]


# --- other built-in kinds -----------------------------------------------------------------------------------


def _node_cells(node: Obj, now: datetime) -> list[Any]:
    status = as_dict(node.get("status"))
    ready = find_condition(status.get("conditions"), "Ready")
    states = ["Unknown"] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    if as_dict(node.get("spec")).get("unschedulable"):
        states.append("SchedulingDisabled")
    roles = set()
    for key, value in as_dict(metadata(node).get("labels")).items():
        if key.startswith("node-role.kubernetes.io/") and key.removeprefix("node-role.kubernetes.io/"):
            roles.add(key.removeprefix("node-role.kubernetes.io/"))
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    info = as_dict(status.get("nodeInfo"))
    addresses = [as_dict(a) for a in as_list(status.get("addresses"))]

    def address(kind: str) -> str:
        return next((str(a.get("address")) for a in addresses if a.get("type") == kind), "<none>")

    return [
        _name(node),
        ",".join(states),
        ",".join(sorted(roles)) or "<none>",
        _age(node, now),
        str(info.get("kubeletVersion") or ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        _kernel(info),
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _kernel(info: Obj) -> str:
    """KERNEL-VERSION, with the architecture after it when the node says which."""
    kernel = str(info.get("kernelVersion") or "<unknown>")
    return f"{kernel} ({info['architecture']})" if info.get("architecture") else kernel


def _node_printer() -> Printer:
    columns = (
        _name_column(),
        Column("Status", "string", "The status of the node"),
        Column("Roles", "string", "The roles of the node"),
        _age_column(),
        Column("Version", "string", _doc("V1NodeSystemInfo", "kubeletVersion")),
        Column("Internal-IP", "string", _doc("V1NodeStatus", "addresses"), 1),
        Column("External-IP", "string", _doc("V1NodeStatus", "addresses"), 1),
        Column("OS-Image", "string", _doc("V1NodeSystemInfo", "osImage"), 1),
        Column("Kernel-Version", "string", _doc("V1NodeSystemInfo", "kernelVersion"), 1),
        Column("Container-Runtime", "string", _doc("V1NodeSystemInfo", "containerRuntimeVersion"), 1),
    )
    return Printer(columns, _node_cells)


def _event_cells(event: Obj, now: datetime) -> list[Any]:
    first = event.get("firstTimestamp")
    first_seen = _since(first if parse_time(first) else event.get("eventTime"), now)
    last = event.get("lastTimestamp")
    last_seen = _since(last, now) if parse_time(last) else first_seen
    count = _int(event.get("count"))
    series = event.get("series")
    if isinstance(series, dict):
        last_seen = _since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1  # a singleton event of the newer API carries no count
    involved = as_dict(event.get("involvedObject"))
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = as_dict(event.get("source"))
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return [
        last_seen,
        str(event.get("type") or ""),
        str(event.get("reason") or ""),
        target,
        str(involved.get("fieldPath") or ""),
        f"{component}, {instance}" if instance else str(component),
        str(event.get("message") or "").strip(),
        first_seen,
        count,
        _name(event),
    ]


def _event_printer() -> Printer:
    columns = (
        Column("Last Seen", "string", _doc("CoreV1Event", "lastTimestamp")),
        Column("Type", "string", _doc("CoreV1Event", "type")),
        Column("Reason", "string", _doc("CoreV1Event", "reason")),
        Column("Object", "string", _doc("CoreV1Event", "involvedObject")),
        Column("Subobject", "string", _doc("V1ObjectReference", "fieldPath"), 1),
        Column("Source", "string", _doc("CoreV1Event", "source"), 1),
        Column("Message", "string", _doc("CoreV1Event", "message")),
        Column("First Seen", "string", _doc("CoreV1Event", "firstTimestamp"), 1),
        Column("Count", "string", _doc("CoreV1Event", "count"), 1),
        dataclasses.replace(_name_column(), priority=1),
    )
    return Printer(columns, _event_cells)


def _events_v1_printer() -> Printer:
    """events.k8s.io/v1 Events print as the core ones (upstream prints both from the one internal Event)."""
    core = _event_printer()
    return Printer(core.columns, lambda obj, now: core.cells(eventsv1.to_core(obj), now))


def _format_labels(labels: Any) -> str:
    """A map of labels as upstream prints one: ``k=v`` sorted by key, comma-separated; "<none>" when empty."""
    pairs = sorted(as_dict(labels).items())
    return ",".join(f"{key}={value}" for key, value in pairs) or "<none>"


def _service_external_ip(spec: Obj, status: Obj) -> str:
    """EXTERNAL-IP by the Service's type: its externalIPs, a load balancer's addresses, or the external name."""
    external = [str(ip) for ip in as_list(spec.get("externalIPs"))]
    kind = spec.get("type")
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        ingress = [as_dict(i) for i in as_list(as_dict(status.get("loadBalancer")).get("ingress"))]
        balancers = sorted(
            {str(i.get("ip") or i.get("hostname")) for i in ingress if i.get("ip") or i.get("hostname")}
        )
        return ",".join([*balancers, *external]) or "<pending>"
    if kind == "ExternalName":
        return str(spec.get("externalName") or "")
    return "<unknown>"


def _service_ports(spec: Obj) -> str:
    pieces = []
    for port in (as_dict(p) for p in as_list(spec.get("ports"))):
        node_port = _int(port.get("nodePort"))
        number = f"{_int(port.get('port'))}:{node_port}" if node_port > 0 else str(_int(port.get("port")))
        pieces.append(f"{number}/{port.get('protocol') or ''}")
    return ",".join(pieces) or "<none>"


def _service_cells(service: Obj, now: datetime) -> list[Any]:
    spec, status = as_dict(service.get("spec")), as_dict(service.get("status"))
    cluster_ips = as_list(spec.get("clusterIPs"))
    return [
        _name(service),
        str(spec.get("type") or ""),
        str(cluster_ips[0]) if cluster_ips else "<none>",
        _service_external_ip(spec, status),
        _service_ports(spec),
        _age(service, now),
        _format_labels(spec.get("selector")),
    ]


def _service_printer() -> Printer:
    columns = (
        _name_column(),
        Column("Type", "string", _doc("V1ServiceSpec", "type")),
        Column("Cluster-IP", "string", _doc("V1ServiceSpec", "clusterIP")),
        Column("External-IP", "string", _doc("V1ServiceSpec", "externalIPs")),
        Column("Port(s)", "string", _doc("V1ServiceSpec", "ports")),
        _age_column(),
        Column("Selector", "string", _doc("V1ServiceSpec", "selector"), 1),
    )
    return Printer(columns, _service_cells)


def _deployment_cells(deployment: Obj, now: datetime) -> list[Any]:
    spec, status = as_dict(deployment.get("spec")), as_dict(deployment.get("status"))
    names, images = _containers(as_dict(spec.get("template")).get("spec"))
    desired = spec.get("replicas", 1)  # upstream's default, which it has always written by then
    return [
        _name(deployment),
        f"{_int(status.get('readyReplicas'))}/{_int(desired)}",
        _int(status.get("updatedReplicas")),
        _int(status.get("availableReplicas")),
        _age(deployment, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def _deployment_printer() -> Printer:
    columns = (
        _name_column(),
        Column("Ready", "string", "Number of the pod with ready state"),
        Column("Up-to-date", "string", _doc("V1DeploymentStatus", "updatedReplicas")),
        Column("Available", "string", _doc("V1DeploymentStatus", "availableReplicas")),
        _age_column(),
        *_template_columns(_doc("V1DeploymentSpec", "selector")),
    )
    return Printer(columns, _deployment_cells)


def _binding_printer(model: str, which: str) -> Printer:
    """RoleBindings and ClusterRoleBindings: the role, and with -o wide the subjects by kind."""

    def cells(binding: Obj, now: datetime) -> list[Any]:
        role = as_dict(binding.get("roleRef"))
        subjects = [as_dict(s) for s in as_list(binding.get("subjects"))]

        def named(kind: str) -> str:
            chosen = [s for s in subjects if s.get("kind") == kind]
            if kind == "ServiceAccount":
                return ", ".join(f"{s.get('namespace') or ''}/{s.get('name') or ''}" for s in chosen)
            return ", ".join(str(s.get("name") or "") for s in chosen)

        role_name = f"{role.get('kind') or ''}/{role.get('name') or ''}"
        return [
            _name(binding),
            role_name,
            _age(binding, now),
            named("User"),
            named("Group"),
            named("ServiceAccount"),
        ]

    columns = (
        _name_column(),
        Column("Role", "string", _doc(model, "roleRef")),
        _age_column(),
        Column("Users", "string", f"Users in the {which}", 1),
        Column("Groups", "string", f"Groups in the {which}", 1),
        Column("ServiceAccounts", "string", f"ServiceAccounts in the {which}", 1),
    )
    return Printer(columns, cells)


def _priority_class_cells(priority_class: Obj, now: datetime) -> list[Any]:
    return [
        _name(priority_class),
        _int(priority_class.get("value")),
        priority_class.get("globalDefault") is True,
        _age(priority_class, now),
        str(priority_class.get("preemptionPolicy") or ""),
    ]


def _priority_class_printer() -> Printer:
    columns = (
        _name_column(),
        Column("Value", "integer", _doc("V1PriorityClass", "value")),
        Column("Global-Default", "boolean", _doc("V1PriorityClass", "globalDefault")),
        _age_column(),
        Column("PreemptionPolicy", "string", _doc("V1PriorityClass", "preemptionPolicy")),
    )
    return Printer(columns, _priority_class_cells)


def _created_at(obj: Obj) -> str:
    created = parse_time(metadata(obj).get("creationTimestamp"))
    return "" if created is None else created.strftime("%Y-%m-%dT%H:%M:%SZ")


def _crd_cells(crd: Obj, now: datetime) -> list[Any]:
    spec = as_dict(crd.get("spec"))
    versions = sorted(
        f"{v.get('name')}(storage)" if v.get("storage") else str(v.get("name"))
        for v in (as_dict(v) for v in as_list(spec.get("versions")))
        if v.get("served")
    )
    names = as_dict(spec.get("names"))
    established = find_condition(as_dict(crd.get("status")).get("conditions"), "Established")
    return [
        _name(crd),
        str(spec.get("scope") or ""),
        ",".join(versions),
        _created_at(crd),
        str(spec.get("group") or ""),
        str(names.get("kind") or ""),
        ",".join(str(n) for n in as_list(names.get("shortNames"))),
        established is not None and established.get("status") == "True",
    ]


def _crd_printer() -> Printer:
    columns = (
        _name_column(),
        Column("Scope", "string", "Cluster/Namespaced"),
        Column("Versions", "string", "Served versions"),
        Column("Created At", "date", _doc("V1ObjectMeta", "creationTimestamp")),
        Column("Group", "string", "API group", 1),
        Column("Kind", "string", "CustomResource kind", 1),
        Column("ShortNames", "string", "Short names", 1),
        Column("Established", "boolean", "Established status", 1),
    )
    return Printer(columns, _crd_cells)


def _simple_printer(middle: tuple[Column, ...], cells: Callable[[Obj], list[Any]]) -> Printer:
    """NAME, the kind's own columns, AGE."""
    return Printer(
        (_name_column(), *middle, _age_column()), lambda obj, now: [_name(obj), *cells(obj), _age(obj, now)]
    )


def _created_at_printer() -> Printer:
    """What upstream's default table convertor prints for kinds without a printer of their own (Roles,
    ClusterRoles): NAME, CREATED AT."""
    columns = (_name_column(), Column("Created At", "date", _doc("V1ObjectMeta", "creationTimestamp")))
    return Printer(columns, lambda obj, now: [_name(obj), _created_at(obj)])


@functools.cache
def _builtin_printers() -> dict[str, Printer]:
    return {
        "batch/jobs": _job_printer(),
        "batch/cronjobs": _cronjob_printer(),
        "pods": _pod_printer(),
        "nodes": _node_printer(),
        "events": _event_printer(),
        "events.k8s.io/events": _events_v1_printer(),
        "namespaces": _simple_printer(
            (Column("Status", "string", "The status of the namespace"),),
            lambda ns: [str(as_dict(ns.get("status")).get("phase") or "")],
        ),
        "coordination.k8s.io/leases": _simple_printer(
            (Column("Holder", "string", _doc("V1LeaseSpec", "holderIdentity")),),
            lambda lease: [str(as_dict(lease.get("spec")).get("holderIdentity") or "")],
        ),
        "configmaps": _simple_printer(
            (Column("Data", "string", _doc("V1ConfigMap", "data")),),
            lambda cm: [len(as_dict(cm.get("data"))) + len(as_dict(cm.get("binaryData")))],
        ),
        "secrets": _simple_printer(
            (
                Column("Type", "string", _doc("V1Secret", "type")),
                Column("Data", "string", _doc("V1Secret", "data")),
            ),
            lambda secret: [str(secret.get("type") or ""), len(as_dict(secret.get("data")))],
        ),
        "services": _service_printer(),
        "apps/deployments": _deployment_printer(),
        "rbac.authorization.k8s.io/roles": _created_at_printer(),
        "rbac.authorization.k8s.io/clusterroles": _created_at_printer(),
        "rbac.authorization.k8s.io/rolebindings": _binding_printer("V1RoleBinding", "roleBinding"),
        "rbac.authorization.k8s.io/clusterrolebindings": _binding_printer(
            "V1ClusterRoleBinding", "clusterRoleBinding"
        ),
        "scheduling.k8s.io/priorityclasses": _priority_class_printer(),
        "apiextensions.k8s.io/customresourcedefinitions": _crd_printer(),
    }


# --- custom resources: additionalPrinterColumns -------------------------------------------------------------

_STEP: Final = re.compile(
    r"""\.(?P<field>[^.\[\]]+)"""
    r"""|\[(?P<index>-?\d+)\]"""
    r"""|\[(?P<all>\*)\]"""
    r"""|\[(?P<quote>['"])(?P<key>.*?)(?P=quote)\]"""
    r"""|\[\?\(@(?P<test>(?:\.[^.\s=!)]+)+)\s*(?:(?P<op>==|!=)\s*(?P<value>"[^"]*"|'[^']*'|[^)\s]+))?\s*\)\]"""
)


def _parse_jsonpath(path: str) -> list[tuple[str, Any]] | None:
    """The steps of a simple JSONPath: fields, ``['key']``, ``[n]``, ``[*]``, ``[?(@.a.b=="x")]`` filters.

    None when ``path`` uses anything else (slices, unions, recursive descent).
    """
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    text = text.removeprefix("$")
    steps: list[tuple[str, Any]] = []
    position = 0
    while position < len(text):
        match = _STEP.match(text, position)
        if match is None:
            return None
        position = match.end()
        if match["field"] is not None:
            steps.append(("all", None) if match["field"] == "*" else ("key", match["field"]))
        elif match["index"] is not None:
            steps.append(("index", int(match["index"])))
        elif match["all"] is not None:
            steps.append(("all", None))
        elif match["quote"] is not None:
            steps.append(("key", match["key"]))
        else:
            fields = match["test"].strip(".").split(".")
            steps.append(("filter", (fields, match["op"], _literal(match["value"]))))
    return steps


def _literal(text: str | None) -> Any:
    if text is None:
        return None
    if text[0] in "'\"":
        return text[1:-1]
    try:
        return json.loads(text)
    except ValueError:
        return text


def _filter_passes(item: Any, test: tuple[list[str], str | None, Any]) -> bool:
    fields, op, expected = test
    current: Any = item
    for name in fields:
        if not isinstance(current, dict) or name not in current:
            return False
        current = current[name]
    if op is None:
        return True
    return bool(current == expected) == (op == "==")


def jsonpath_values(obj: Any, path: str) -> list[Any]:
    """The values ``path`` selects in ``obj``, in order; missing keys select nothing (they are not errors)."""
    steps = _parse_jsonpath(path)
    if steps is None:
        return []
    current = [obj]
    for step, argument in steps:
        found: list[Any] = []
        for value in current:
            keyed = step == "key" and isinstance(value, dict) and argument in value
            if keyed or (
                step == "index" and isinstance(value, list) and -len(value) <= argument < len(value)
            ):
                found.append(value[argument])
            elif step == "all" and isinstance(value, (dict, list)):
                found.extend(value.values() if isinstance(value, dict) else value)
            elif step == "filter" and isinstance(value, list):
                found.extend(item for item in value if _filter_passes(item, argument))
        current = found
    return current


def _jsonpath_text(value: Any) -> str | None:
    """A value as kubectl's JSONPath printing shows it: maps and lists as JSON, scalars as Go prints them."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, (dict, list)):
        text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return str(value)


def _typed_cell(kind: str, value: Any, now: datetime) -> Any:
    """A printer column's cell for its declared type; None (kubectl shows <none>) when the value does not fit."""
    if kind == "string":
        return _jsonpath_text(value)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "integer":
        return int(value) if number else None
    if kind == "number":
        return float(value) if number else None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind == "date" and isinstance(value, str):
        if not value:
            return "<unknown>"
        moment = parse_time(value)
        return "<invalid>" if moment is None else human_duration(now - moment)
    return None


def _custom_printer(rtype: ResourceType) -> Printer:
    """A CRD's additionalPrinterColumns after NAME, or upstream's default AGE column when it declares none."""
    age = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    declared = [as_dict(c) for c in rtype.printer_columns] or [
        {**age, "description": _doc("V1ObjectMeta", "creationTimestamp")}
    ]
    columns = [_name_column()]
    for column in declared:
        path = str(column.get("jsonPath") or "")
        description = (
            column.get("description") or f"Custom resource definition column (in JSONPath format): {path}"
        )
        columns.append(
            Column(
                str(column.get("name") or ""),
                str(column.get("type") or "string"),
                str(description),
                _int(column.get("priority")),
                str(column.get("format") or ""),
            )
        )

    def cells(obj: Obj, now: datetime) -> list[Any]:
        row: list[Any] = [_name(obj)]
        for column in declared:
            values = jsonpath_values(obj, str(column.get("jsonPath") or ""))
            row.append(_typed_cell(str(column.get("type") or "string"), values[0], now) if values else None)
        return row

    return Printer(tuple(columns), cells)


def printer_for(rtype: ResourceType) -> Printer:
    """The columns and cells of a kind.

    kubectl's own printers for built-in kinds, NAME and AGE for built-in kinds without one, and for kinds a CRD
    defines (no client model) its additionalPrinterColumns.
    """
    if rtype.model is None:
        return _custom_printer(rtype)
    return _builtin_printers().get(rtype.resource) or _simple_printer((), lambda obj: [])


# --- tables -------------------------------------------------------------------------------------------------


def include_object_policy(value: str | None) -> str:
    """The ``includeObject`` query parameter, checked: None, Metadata (the default) or Object."""
    if not value:
        return INCLUDE_METADATA
    if value not in (INCLUDE_NONE, INCLUDE_METADATA, INCLUDE_OBJECT):
        raise ValueError(
            f'includeObject: Unsupported value: "{value}": supported values: "None", "Metadata", "Object"'
        )
    return value


def column_definitions(rtype: ResourceType) -> list[Obj]:
    return [column.definition() for column in printer_for(rtype).columns]


def _row(printer: Printer, rtype: ResourceType, obj: Obj, now: datetime, policy: str) -> Obj:
    row: Obj = {"cells": printer.cells(obj, now)}
    conditions = _pod_row_conditions(obj) if rtype.key == "pods" else []
    if conditions:
        row["conditions"] = conditions
    if policy == INCLUDE_OBJECT:
        row["object"] = obj
    elif policy == INCLUDE_METADATA:
        partial = {
            "kind": "PartialObjectMetadata",
            "apiVersion": TABLE_API_VERSION,
            "metadata": metadata(obj),
        }
        row["object"] = json.loads(json.dumps(partial))  # a copy: callers may change the object later
    return row


def table_row(
    rtype: ResourceType, obj: Obj, now: datetime, include_object: str | None = INCLUDE_METADATA
) -> Obj:
    """One row of ``rtype``'s table: its cells, and the object as ``includeObject`` asks."""
    return _row(printer_for(rtype), rtype, obj, now, include_object_policy(include_object))


def table(
    rtype: ResourceType,
    objects: Iterable[Obj],
    now: datetime,
    include_object: str | None = INCLUDE_METADATA,
    *,
    headers: bool = True,
    list_meta: Obj | None = None,
) -> Obj:
    """A meta.k8s.io/v1 Table of ``objects``, cells computed against ``now``.

    A watch sends each event as a one-row table and, as upstream, the column definitions only with the first:
    pass ``headers=False`` for the others. ``list_meta`` (resourceVersion, continue, remainingItemCount) becomes
    the table's metadata. Raises ValueError for an ``includeObject`` that is not None, Metadata or Object.
    """
    printer = printer_for(rtype)
    policy = include_object_policy(include_object)
    return {
        "kind": "Table",
        "apiVersion": TABLE_API_VERSION,
        "metadata": dict(list_meta or {}),
        "columnDefinitions": [c.definition() for c in printer.columns] if headers else [],
        "rows": [_row(printer, rtype, obj, now, policy) for obj in objects],
    }
