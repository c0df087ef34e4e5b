"""Pod rules and accessors: defaulting, the validation the API server applies, and the facts controllers read.

Validation covers what Jobs depend on (containers, names, images, env names, restartPolicy, immutability on
update), not every field of a PodSpec.
"""

from __future__ import annotations

import copy
import re
from datetime import datetime
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

Obj = dict[str, Any]

PENDING: Final = "Pending"
RUNNING: Final = "Running"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
RESTART_POLICIES: Final = ("Always", "OnFailure", "Never")
COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
_ENV_NAME: Final = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
# Fields of a pod spec that may change after creation, as upstream allows.
_MUTABLE_SPEC: Final = (
    "activeDeadlineSeconds",
    "tolerations",
    "schedulingGates",
    "terminationGracePeriodSeconds",
)


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


def _default_container(container: Obj) -> None:
    image = str(container.get("image") or "")
    tag = image.rsplit("/", 1)[-1]
    latest = "@" not in image and (":" not in tag or tag.endswith(":latest"))
    container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("resources", {})


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


def validate_pod_spec(spec: Any, path: str, check_restart_policy: bool = True) -> list[FieldError]:
    """``check_restart_policy`` is off for controllers' templates, whose own rules on it are stricter."""
    if not isinstance(spec, dict):
        return [required(path)]
    errs: list[FieldError] = []
    containers = as_list(spec.get("containers"))
    if not containers:
        errs.append(required(f"{path}.containers"))
    names: set[str] = set()
    for field in ("initContainers", "containers"):
        for i, container in enumerate(as_list(spec.get(field))):
            errs += _validate_container(container, f"{path}.{field}[{i}]", names)
    policy = spec.get("restartPolicy")
    if check_restart_policy and policy not in RESTART_POLICIES:
        errs.append(not_supported(f"{path}.restartPolicy", policy, list(RESTART_POLICIES)))
    for field in ("activeDeadlineSeconds", "terminationGracePeriodSeconds"):
        value = spec.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            errs.append(invalid(f"{path}.{field}", value, "must be greater than or equal to 0"))
    return errs


def _validate_container(container: Any, path: str, names: set[str]) -> list[FieldError]:
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
    for i, env in enumerate(as_list(container.get("env"))):
        env_name = as_dict(env).get("name")
        if not env_name:
            errs.append(required(f"{path}.env[{i}].name"))
        elif not isinstance(env_name, str) or not _ENV_NAME.fullmatch(env_name):
            errs.append(
                invalid(
                    f"{path}.env[{i}].name",
                    env_name,
                    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', "
                    "or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or "
                    "'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')",
                )
            )
    for field in ("command", "args"):
        value = container.get(field)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            errs.append(invalid(f"{path}.{field}", value, "must be a list of strings"))
    return errs


def validate_pod_template(template: Any, path: str) -> list[FieldError]:
    """A pod template of a controller: its metadata and its spec."""
    data = as_dict(template)
    meta = as_dict(data.get("metadata"))
    errs = validate_labels(meta.get("labels"), f"{path}.metadata.labels")
    errs += validate_annotations(meta.get("annotations"), f"{path}.metadata.annotations")
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


# --- what controllers read ----------------------------------------------------------------------------------


def phase(pod: Any) -> str:
    return str(as_dict(as_dict(pod).get("status")).get("phase") or PENDING)


def is_terminal(pod: Any) -> bool:
    return phase(pod) in (SUCCEEDED, FAILED)


def is_deleting(pod: Any) -> bool:
    return bool(metadata(pod).get("deletionTimestamp"))


def is_active(pod: Any) -> bool:
    """Counts toward a Job's ``active``: not finished and not being deleted."""
    return not is_terminal(pod) and not is_deleting(pod)


def is_ready(pod: Any) -> bool:
    return condition_is_true(as_dict(as_dict(pod).get("status")).get("conditions"), "Ready")


def is_scheduled(pod: Any) -> bool:
    return bool(as_dict(as_dict(pod).get("spec")).get("nodeName"))


def container_statuses(pod: Any, init: bool = False) -> list[Obj]:
    status = as_dict(as_dict(pod).get("status"))
    field = "initContainerStatuses" if init else "containerStatuses"
    return [as_dict(s) for s in as_list(status.get(field))]


def exit_codes(pod: Any) -> list[tuple[str, int]]:
    """(container name, exit code) of terminated containers, then of init containers (podFailurePolicy order)."""
    codes: list[tuple[str, int]] = []
    for init in (False, True):
        for cs in container_statuses(pod, init):
            terminated = as_dict(as_dict(cs.get("state")).get("terminated"))
            code = terminated.get("exitCode")
            if isinstance(code, int) and not isinstance(code, bool):
                codes.append((str(cs.get("name", "")), code))
    return codes


def restart_count(pod: Any) -> int:
    return sum(
        int(cs.get("restartCount") or 0) for cs in container_statuses(pod) + container_statuses(pod, True)
    )


def finish_time(pod: Any) -> datetime | None:
    """When the pod finished: the latest container finishedAt, else the Ready condition's last change."""
    latest: datetime | None = None
    for cs in container_statuses(pod) + container_statuses(pod, True):
        stamp = parse_time(as_dict(as_dict(cs.get("state")).get("terminated")).get("finishedAt"))
        if stamp is not None and (latest is None or stamp > latest):
            latest = stamp
    if latest is not None:
        return latest
    ready = find_condition(as_dict(as_dict(pod).get("status")).get("conditions"), "Ready")
    if ready is not None:
        stamp = parse_time(ready.get("lastTransitionTime"))
        if stamp is not None:
            return stamp
    return parse_time(metadata(pod).get("deletionTimestamp")) or parse_time(
        metadata(pod).get("creationTimestamp")
    )


def completion_index(pod: Any) -> int | None:
    """The pod's completion index from its annotation (or label), None when absent or malformed."""
    value = annotations_of(pod).get(COMPLETION_INDEX) or labels_of(pod).get(COMPLETION_INDEX)
    if not isinstance(value, str) or not value.isdigit() or (len(value) > 1 and value.startswith("0")):
        return None
    return int(value)


def has_condition(pod: Any, type_: str) -> bool:
    return condition_is_true(as_dict(as_dict(pod).get("status")).get("conditions"), type_)
