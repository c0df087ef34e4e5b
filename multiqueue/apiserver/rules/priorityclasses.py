"""PriorityClasses (scheduling.k8s.io/v1): defaults and the limits kube-apiserver puts on user-defined ones."""

from __future__ import annotations

from typing import Final

from multiqueue.api.errors import FieldError, forbidden, immutable, not_supported, required
from multiqueue.api.meta import metadata, validate_object_meta, validate_object_meta_update
from multiqueue.api.types import Obj

HIGHEST_USER_DEFINABLE: Final = 1_000_000_000
SYSTEM_PREFIX: Final = "system-"
# The built-in classes a name with the system prefix must be exactly: name -> value.
SYSTEM_CLASSES: Final = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}
PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"
PREEMPTION_POLICIES: Final = (PREEMPT_LOWER_PRIORITY, "Never")


def default_priority_class(pc: Obj) -> None:
    if pc.get("preemptionPolicy") is None:
        pc["preemptionPolicy"] = PREEMPT_LOWER_PRIORITY


def _system_class_error(name: str, value: object, global_default: bool) -> str:
    if name not in SYSTEM_CLASSES:
        return f"{name} is not a known system priority class"
    if value != SYSTEM_CLASSES[name]:
        return f"value of {name} PriorityClass must be {SYSTEM_CLASSES[name]}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return ""


def validate_priority_class(pc: Obj) -> list[FieldError]:
    errs = validate_object_meta(pc.get("metadata"), namespaced=False)
    name = str(metadata(pc).get("name") or "")
    value = pc.get("value", 0)
    if name.startswith(SYSTEM_PREFIX):
        problem = _system_class_error(name, value, pc.get("globalDefault") is True)
        if problem:
            detail = f"priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: "
            errs.append(forbidden("metadata.name", detail + problem))
    elif isinstance(value, int) and value > HIGHEST_USER_DEFINABLE:
        detail = f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE}"
        errs.append(forbidden("value", detail))
    policy = pc.get("preemptionPolicy")
    if policy is not None:
        if policy == "":
            errs.append(required("preemptionPolicy"))
        elif policy not in PREEMPTION_POLICIES:
            errs.append(not_supported("preemptionPolicy", policy, list(PREEMPTION_POLICIES)))
    return errs


def validate_priority_class_update(new: Obj, old: Obj) -> list[FieldError]:
    """Value and preemption policy are set once."""
    errs = validate_object_meta_update(new.get("metadata"), old.get("metadata"))
    if new.get("value", 0) != old.get("value", 0):
        errs.append(forbidden("value", "may not be changed in an update."))
    if new.get("preemptionPolicy") != old.get("preemptionPolicy"):
        errs.append(immutable("preemptionPolicy", new.get("preemptionPolicy")))
    return errs
