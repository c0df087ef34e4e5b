"""Pod rules and accessors: defaulting, the validation the API server applies, and the facts controllers read.

Validation covers what Jobs and the local kubelet depend on (containers, their names and images, env names,
restartPolicy, immutability on update), not every field of a PodSpec.
"""

from __future__ import annotations

import copy
import re
from datetime import datetime, timedelta
from typing import Any, Final

from multiqueue.api.errors import FieldError, duplicate, forbidden, invalid, not_supported, required
from multiqueue.api.meta import (
    annotations_of,
    as_dict,
    as_list,
    condition_is_true,
    dns1123_label_errors,
    find_condition,
    labels_of,
    metadata,
    parse_time,
    validate_annotations,
    validate_labels,
)
from multiqueue.api.meta import is_deleting as is_deleting
from multiqueue.api.types import Obj

PENDING: Final = "Pending"
RUNNING: Final = "Running"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
RESTART_POLICIES: Final = ("Always", "OnFailure", "Never")
COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
MAX_INT32: Final = 2**31 - 1
_GO_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
# RelaxedEnvironmentVariableValidation is on by default since 1.32: any printable ASCII character but '='.
_ENV_NAME: Final = re.compile(r"[ -<>-~]+")
_ENV_NAME_MSG: Final = (
    "a valid environment variable name must consist only of printable ASCII characters other than '='"
)
# Fields of a pod spec that may change after creation, as upstream allows.
_MUTABLE_SPEC: Final = (
    "activeDeadlineSeconds",
    "tolerations",
    "schedulingGates",
    "terminationGracePeriodSeconds",
)


def _int(value: Any) -> int | None:
    """An integer field, or None when absent or not an integer (JSON booleans are not integers)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# --- defaulting ---------------------------------------------------------------------------------------------


def default_pod_spec(spec: Obj) -> Obj:
    """Upstream's pod spec defaults (also applied to Job and CronJob pod templates)."""
    result = copy.deepcopy(spec)
    result.setdefault("restartPolicy", "Always")
    result.setdefault("dnsPolicy", "ClusterFirst")
    result.setdefault("schedulerName", "default-scheduler")
    result.setdefault("terminationGracePeriodSeconds", 30)
    result.setdefault("securityContext", {})
    for field in ("containers", "initContainers"):
        for container in as_list(result.get(field)):
            if isinstance(container, dict):
                _default_container(container)
    return result


def default_pod(spec: Obj) -> Obj:
    """Upstream's SetDefaults_Pod on a pod's spec: the pod spec defaults, and service links (pods only, not
    templates)."""
    result = default_pod_spec(spec)
    result.setdefault("enableServiceLinks", True)
    return result


def _default_container(container: Obj) -> None:
    image = str(container.get("image") or "")
    tag = image.rsplit("/", 1)[-1]
    latest = "@" not in image and (":" not in tag or tag.endswith(":latest"))
    container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("resources", {})
    for port in as_list(container.get("ports")):
        if isinstance(port, dict) and not port.get("protocol"):
            port["protocol"] = "TCP"


# The tolerations kube-apiserver's DefaultTolerationSeconds admission gives every pod that has none for these.
_DEFAULT_TOLERATIONS: Final = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def admitted_pod_spec(spec: Obj) -> Obj:
    """What kube-apiserver's default admission adds to a new pod (not to templates): the service account it runs
    as, the NoExecute tolerations for an unready or unreachable node, and, for a pod that names no PriorityClass,
    priority 0 with the default preemption policy."""
    result = copy.deepcopy(spec)
    account = result.get("serviceAccountName") or result.get("serviceAccount") or "default"
    result["serviceAccountName"] = result["serviceAccount"] = account
    if not result.get("priorityClassName"):
        result.setdefault("priority", 0)
        result.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = [t for t in as_list(result.get("tolerations")) if isinstance(t, dict)]
    for default in _DEFAULT_TOLERATIONS:
        if not any(
            t.get("key") == default["key"] and t.get("effect") in (None, "", "NoExecute") for t in tolerations
        ):
            tolerations.append(dict(default))
    result["tolerations"] = tolerations
    return result


def qos_class(spec: Any) -> str:
    """Guaranteed, Burstable or BestEffort, from the containers' requests and limits."""
    containers = [as_dict(c) for c in as_list(as_dict(spec).get("containers"))]
    requests = [as_dict(as_dict(c.get("resources")).get("requests")) for c in containers]
    limits = [as_dict(as_dict(c.get("resources")).get("limits")) for c in containers]
    if not any(requests) and not any(limits):
        return "BestEffort"
    guaranteed = all(
        lim.get("cpu") and lim.get("memory") and req.get("cpu", lim["cpu"]) == lim["cpu"]
        and req.get("memory", lim["memory"]) == lim["memory"]
        for req, lim in zip(requests, limits, strict=True)
    )  # fmt: skip
    return "Guaranteed" if guaranteed else "Burstable"


# --- validation ---------------------------------------------------------------------------------------------


def _validate_env(env: list[Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, variable in enumerate(env):
        name = as_dict(variable).get("name")
        if not name:
            errs.append(required(f"{path}[{i}].name"))
        elif not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            errs.append(invalid(f"{path}[{i}].name", name, _ENV_NAME_MSG))
    return errs


def _validate_container(container: Any, path: str, names: set[str]) -> list[FieldError]:
    """One container; ``names`` holds the names already taken and receives this one."""
    if not isinstance(container, dict):
        return [invalid(path, container, "must be an object")]
    errs: list[FieldError] = []
    name = container.get("name")
    if not name:
        errs.append(required(f"{path}.name"))
    elif not isinstance(name, str):
        errs.append(invalid(f"{path}.name", name, "must be a string"))
    else:
        errs += [invalid(f"{path}.name", name, m) for m in dns1123_label_errors(name)]
        if name in names:
            errs.append(duplicate(f"{path}.name", name))
        names.add(name)
    if not container.get("image"):
        errs.append(required(f"{path}.image"))
    errs += _validate_env(as_list(container.get("env")), f"{path}.env")
    for field in ("command", "args"):
        value = container.get(field)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            errs.append(invalid(f"{path}.{field}", value, "must be a list of strings"))
    return errs


def _validate_containers(spec: Obj, path: str) -> list[FieldError]:
    """Names are unique across containers and init containers; upstream reports a clash at the init container."""
    containers = as_list(spec.get("containers"))
    errs = [] if containers else [required(f"{path}.containers")]
    names: set[str] = set()
    regular = [
        e for i, c in enumerate(containers) for e in _validate_container(c, f"{path}.containers[{i}]", names)
    ]
    for i, container in enumerate(as_list(spec.get("initContainers"))):
        errs += _validate_container(container, f"{path}.initContainers[{i}]", names)
    return errs + regular


def validate_pod_spec(spec: Any, path: str, check_restart_policy: bool = True) -> list[FieldError]:
    """``check_restart_policy`` is off for controllers' templates, which have their own stricter rule."""
    data = as_dict(spec)
    errs = _validate_containers(data, path)
    policy = data.get("restartPolicy")
    if check_restart_policy and not policy:
        errs.append(required(f"{path}.restartPolicy"))
    elif check_restart_policy and policy not in RESTART_POLICIES:
        errs.append(not_supported(f"{path}.restartPolicy", policy, list(RESTART_POLICIES)))
    deadline = data.get("activeDeadlineSeconds")
    if deadline is not None and not 1 <= (_int(deadline) or 0) <= MAX_INT32:
        detail = f"must be between 1 and {MAX_INT32}, inclusive"
        errs.append(invalid(f"{path}.activeDeadlineSeconds", deadline, detail))
    grace = data.get("terminationGracePeriodSeconds")
    if grace is not None and (_int(grace) is None or grace < 0):
        errs.append(
            invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be greater than or equal to 0")
        )
    return errs


def validate_pod_template(template: Any, path: str) -> list[FieldError]:
    """A controller's pod template: its labels, annotations and spec (restartPolicy is the controller's rule)."""
    data = as_dict(template)
    meta = as_dict(data.get("metadata"))
    # Upstream's ValidatePodTemplateSpec names these "<path>.labels", without "metadata".
    errs = validate_labels(meta.get("labels"), f"{path}.labels")
    errs += validate_annotations(meta.get("annotations"), f"{path}.annotations")
    return errs + validate_pod_spec(data.get("spec"), f"{path}.spec", check_restart_policy=False)


def validate_pod_spec_update(new: Any, old: Any, path: str) -> list[FieldError]:
    """After creation only images and a few scheduling fields may change (upstream's rule)."""
    new_spec, old_spec = as_dict(new), as_dict(old)
    masked_new = {k: v for k, v in new_spec.items() if k not in _MUTABLE_SPEC}
    masked_old = {k: v for k, v in old_spec.items() if k not in _MUTABLE_SPEC}
    for spec in (masked_new, masked_old):
        for field in ("containers", "initContainers"):
            if field in spec:
                spec[field] = [
                    {k: v for k, v in as_dict(c).items() if k != "image"} for c in as_list(spec[field])
                ]
    if "nodeName" not in old_spec:
        masked_new.pop("nodeName", None)  # binding an unscheduled pod
    if masked_new != masked_old:
        return [
            forbidden(
                path,
                "pod updates may not change fields other than `spec.containers[*].image`,"
                "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions "
                "to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it "
                "was previously negative)",
            )
        ]
    return []


def default_condition_times(pod: Obj) -> None:
    """A condition's times are structs in Go, never left out: unset ones read back as null."""
    for condition in as_list(as_dict(pod.get("status")).get("conditions")):
        if isinstance(condition, dict):
            condition.setdefault("lastProbeTime", None)
            condition.setdefault("lastTransitionTime", None)


# --- what controllers read ----------------------------------------------------------------------------------


def _status(pod: Any) -> Obj:
    return as_dict(as_dict(pod).get("status"))


def phase(pod: Any) -> str:
    """The pod's phase; a pod the kubelet has not reported on yet is Pending."""
    return str(_status(pod).get("phase") or PENDING)


def is_terminal(pod: Any) -> bool:
    return phase(pod) in (SUCCEEDED, FAILED)


def is_active(pod: Any) -> bool:
    """Counts toward a Job's ``active``: not finished and not being deleted."""
    return not is_terminal(pod) and not is_deleting(pod)


def has_condition(pod: Any, type_: str) -> bool:
    return condition_is_true(_status(pod).get("conditions"), type_)


def is_ready(pod: Any) -> bool:
    return has_condition(pod, "Ready")


def is_scheduled(pod: Any) -> bool:
    return bool(as_dict(as_dict(pod).get("spec")).get("nodeName"))


def container_statuses(pod: Any, init: bool = False) -> list[Obj]:
    field = "initContainerStatuses" if init else "containerStatuses"
    return [as_dict(s) for s in as_list(_status(pod).get(field))]


def _terminated(status: Obj) -> Obj:
    return as_dict(as_dict(status.get("state")).get("terminated"))


def exit_codes(pod: Any) -> list[tuple[str, int]]:
    """(container name, exit code) of terminated containers, then of init containers: podFailurePolicy's order."""
    codes: list[tuple[str, int]] = []
    for status in container_statuses(pod) + container_statuses(pod, init=True):
        code = _int(_terminated(status).get("exitCode"))
        if code is not None:
            codes.append((str(status.get("name", "")), code))
    return codes


def restart_count(pod: Any) -> int:
    """Restarts of all containers: with restartPolicy OnFailure, the Job's backoffLimit counts these."""
    statuses = container_statuses(pod) + container_statuses(pod, init=True)
    return sum(_int(s.get("restartCount")) or 0 for s in statuses)


def _containers_finished_at(pod: Any) -> datetime | None:
    """The last finishedAt once every container (and every sidecar) has terminated, else None."""
    sidecars = {
        as_dict(c).get("name")
        for c in as_list(as_dict(as_dict(pod).get("spec")).get("initContainers"))
        if as_dict(c).get("restartPolicy") == "Always"
    }
    statuses = container_statuses(pod) + [
        s for s in container_statuses(pod, init=True) if s.get("name") in sidecars
    ]
    stamps = [parse_time(_terminated(s).get("finishedAt")) for s in statuses]
    known = [s for s in stamps if s is not None]
    return max(known) if known and len(known) == len(stamps) else None


def finish_time(pod: Any) -> datetime | None:
    """When the pod ended, as upstream's Job controller reckons it for back-off and for ordering finished pods.

    The containers' last finishedAt; else when Ready turned False; else the deletion time minus its grace
    period; else the creation time. None only when even that is missing.
    """
    finished = _containers_finished_at(pod)
    if finished is not None:
        return finished
    ready = find_condition(_status(pod).get("conditions"), "Ready")
    changed = (
        parse_time(ready.get("lastTransitionTime")) if ready and ready.get("status") == "False" else None
    )
    if changed is not None:
        return changed
    meta = metadata(pod)
    deleted = parse_time(meta.get("deletionTimestamp"))
    if deleted is not None:
        return deleted - timedelta(seconds=_int(meta.get("deletionGracePeriodSeconds")) or 0)
    return parse_time(meta.get("creationTimestamp"))


def completion_index(pod: Any) -> int | None:
    """The pod's completion index: the annotation, or the label when there is no annotation.

    None when it is missing or malformed; parsed like Go's strconv.Atoi (so "07" is 7), negatives refused.
    """
    annotations = annotations_of(pod)
    value = (
        annotations[COMPLETION_INDEX]
        if COMPLETION_INDEX in annotations
        else labels_of(pod).get(COMPLETION_INDEX)
    )
    if not isinstance(value, str) or not _GO_INTEGER.fullmatch(value):
        return None
    index = int(value)
    return index if index >= 0 else None
