"""What differs between kinds when they are written: defaulting, validation, status handling, deletion.

The generic write path (``rest.py``) calls these hooks; the rules themselves come from ``multiqueue.api`` so the
server enforces exactly what the controllers and the dispatcher check before they write.
"""

from __future__ import annotations

import base64
import copy
from datetime import datetime
from typing import Final

from multiqueue.api import cronjobs, jobs, pods
from multiqueue.api.errors import FieldError, forbidden, invalid, required
from multiqueue.api.meta import as_dict, as_list, metadata, validate_object_meta, validate_object_meta_update
from multiqueue.api.types import Obj

BACKGROUND: Final = "Background"
FOREGROUND: Final = "Foreground"
ORPHAN: Final = "Orphan"


class Strategy:
    """Defaults for kinds with no special rules (ConfigMaps, Secrets, Leases, Events, ...)."""

    # A status subresource: writes to the object keep the old status, status writes keep the old spec.
    has_status: bool = False
    # metadata.generation moves when spec changes.
    tracks_generation: bool = False
    default_propagation: str = BACKGROUND

    def __init__(self, namespaced: bool) -> None:
        self.namespaced = namespaced

    def default(self, obj: Obj) -> None:
        """Go's defaulting, which runs on every body the server decodes: creates, updates and patch results."""

    def prepare_create(self, obj: Obj, now: datetime) -> None:
        if self.has_status:
            obj.pop("status", None)

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return validate_object_meta(obj.get("metadata"), self.namespaced)

    def prepare_update(self, new: Obj, old: Obj) -> None:
        if self.has_status:
            _copy_field(new, old, "status")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_object_meta_update(new.get("metadata"), old.get("metadata"))

    def prepare_status_update(self, new: Obj, old: Obj) -> None:
        for key in old:
            if key not in ("status", "metadata", "apiVersion", "kind"):
                new[key] = copy.deepcopy(old[key])
        for key in [k for k in new if k not in old and k not in ("status", "metadata", "apiVersion", "kind")]:
            del new[key]

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_object_meta_update(new.get("metadata"), old.get("metadata"))

    def grace_period_seconds(self, obj: Obj, requested: int | None) -> int:
        """Seconds the object stays in Terminating before it is removed; only pods wait."""
        return 0

    def canonicalize(self, obj: Obj) -> None:
        """After validation, before storing: the object as Go would encode what it decoded (validation saw it as
        written, later writes are judged against what is stored)."""

    def reset_fields(self, subresource: str) -> tuple[str, ...]:
        """The fields writes to this endpoint cannot set (upstream's GetResetFields): nobody comes to own them."""
        if subresource == "status":
            return ("spec",)
        return ("status",) if self.has_status else ()


def _copy_field(new: Obj, old: Obj, key: str) -> None:
    if key in old:
        new[key] = copy.deepcopy(old[key])
    else:
        new.pop(key, None)


class JobStrategy(Strategy):
    has_status = True
    tracks_generation = True
    # batch/v1 Jobs orphan their pods unless told otherwise, for compatibility with old clients; kubectl asks
    # for Background explicitly.
    default_propagation = ORPHAN

    def default(self, obj: Obj) -> None:
        if isinstance(obj.get("spec"), dict):
            obj["spec"] = jobs.default_job_spec(obj["spec"])

    def prepare_create(self, obj: Obj, now: datetime) -> None:
        super().prepare_create(obj, now)
        defaulted = jobs.default_job(obj)
        obj.clear()
        obj.update(defaulted)
        # Go writes the status struct even when nothing set it: a Job no controller of ours runs (a foreign
        # managedBy) reads back with ``status: {}``, and typed clients see an empty status, not none.
        obj.setdefault("status", {})

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return jobs.validate_job(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return jobs.validate_job_update(new, old)

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return jobs.validate_job_status_update(new, old)

    def canonicalize(self, obj: Obj) -> None:
        if "status" in obj:
            obj["status"] = jobs.stored_status_times(obj).get("status")


class CronJobStrategy(Strategy):
    has_status = True
    tracks_generation = True

    def default(self, obj: Obj) -> None:
        # Only the spec has defaults; the object stays the same dict (callers hold its metadata).
        obj["spec"] = cronjobs.default_cronjob(obj)["spec"]
        # Go writes the structs that are not pointers even when empty.
        template = as_dict(as_dict(obj.get("spec")).get("jobTemplate"))
        template.setdefault("metadata", {})
        as_dict(as_dict(template.get("spec")).get("template")).setdefault("metadata", {})

    def prepare_create(self, obj: Obj, now: datetime) -> None:
        super().prepare_create(obj, now)
        obj.setdefault("status", {})

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return cronjobs.validate_cronjob(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return cronjobs.validate_cronjob_update(new, old)


class PodStrategy(Strategy):
    has_status = True
    tracks_generation = True

    def default(self, obj: Obj) -> None:
        obj["spec"] = pods.default_pod(as_dict(obj.get("spec")))

    def prepare_create(self, obj: Obj, now: datetime) -> None:
        super().prepare_create(obj, now)
        obj["spec"] = pods.admitted_pod_spec(as_dict(obj.get("spec")))
        obj["status"] = {"phase": "Pending", "qosClass": pods.qos_class(obj["spec"])}

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return validate_object_meta(obj.get("metadata"), True) + pods.validate_pod_spec(
            obj.get("spec"), "spec"
        )

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = super().validate_update(new, old)
        return errs + pods.validate_pod_spec_update(new.get("spec"), old.get("spec"), "spec")

    def reset_fields(self, subresource: str) -> tuple[str, ...]:
        if subresource == "status":
            return ("spec", "metadata.deletionTimestamp", "metadata.ownerReferences")
        return super().reset_fields(subresource)

    def grace_period_seconds(self, obj: Obj, requested: int | None) -> int:
        spec = as_dict(obj.get("spec"))
        phase = as_dict(obj.get("status")).get("phase")
        # Nothing runs an unscheduled or finished pod, so nobody would confirm a graceful deletion.
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            return 0
        if requested is not None:
            return max(requested, 0)
        default = spec.get("terminationGracePeriodSeconds")
        return default if isinstance(default, int) and default >= 0 else 30


class NamespaceStrategy(Strategy):
    has_status = True

    def default(self, obj: Obj) -> None:
        name = metadata(obj).get("name")
        if name:
            labels = as_dict(metadata(obj).setdefault("labels", {}))
            labels["kubernetes.io/metadata.name"] = str(name)

    def prepare_create(self, obj: Obj, now: datetime) -> None:
        super().prepare_create(obj, now)
        spec = as_dict(obj.setdefault("spec", {}))
        if "kubernetes" not in as_list(spec.get("finalizers")):
            spec["finalizers"] = [*as_list(spec.get("finalizers")), "kubernetes"]
        obj["status"] = {"phase": "Active"}

    def validate_create(self, obj: Obj) -> list[FieldError]:
        name = metadata(obj).get("name")
        errs = validate_object_meta(obj.get("metadata"), False)
        if isinstance(name, str) and len(name) > 63:
            errs.append(invalid("metadata.name", name, "must be no more than 63 characters"))
        return errs


class NodeStrategy(Strategy):
    has_status = True


class SecretStrategy(Strategy):
    def default(self, obj: Obj) -> None:
        # Decoding folds stringData into data and defaults the type, on every write.
        if not obj.get("type"):
            obj["type"] = "Opaque"
        _fold_string_data(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = super().validate_update(new, old)
        if new.get("type") != old.get("type"):
            errs.append(invalid("type", new.get("type"), "field is immutable"))
        if old.get("immutable") is True and (
            new.get("data") != old.get("data") or new.get("immutable") is not True
        ):
            errs.append(forbidden("data", "field is immutable when `immutable` is set"))
        return errs


def _fold_string_data(secret: Obj) -> None:
    """``stringData`` is write-only: each entry goes into ``data`` base64-encoded (winning over the same key
    there) and the field itself is never stored."""
    plain = secret.pop("stringData", None)
    if isinstance(plain, dict) and plain:
        current = secret.get("data")
        data: dict[str, object] = dict(current) if isinstance(current, dict) else {}
        for key, value in plain.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        secret["data"] = data


class CustomResourceDefinitionStrategy(Strategy):
    has_status = True
    tracks_generation = True

    def validate_create(self, obj: Obj) -> list[FieldError]:
        errs = validate_object_meta(obj.get("metadata"), False)
        spec = as_dict(obj.get("spec"))
        names = as_dict(spec.get("names"))
        group = spec.get("group")
        if not group:
            errs.append(required("spec.group"))
        for field in ("plural", "kind"):
            if not names.get(field):
                errs.append(required(f"spec.names.{field}"))
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            errs.append(invalid("spec.scope", spec.get("scope"), 'must be "Namespaced" or "Cluster"'))
        versions = [v for v in as_list(spec.get("versions")) if isinstance(v, dict)]
        if not versions:
            errs.append(required("spec.versions", "must have exactly one version marked as storage version"))
        elif sum(1 for v in versions if v.get("storage") is True) != 1:
            errs.append(
                invalid("spec.versions", None, "must have exactly one version marked as storage version")
            )
        expected = f"{names.get('plural')}.{group}"
        if metadata(obj).get("name") != expected:
            errs.append(
                invalid(
                    "metadata.name", metadata(obj).get("name"), 'must be spec.names.plural+"."+spec.group'
                )
            )
        return errs

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = super().validate_update(new, old)
        for field in ("group", "scope"):
            if as_dict(new.get("spec")).get(field) != as_dict(old.get("spec")).get(field):
                errs.append(
                    invalid(f"spec.{field}", as_dict(new.get("spec")).get(field), "field is immutable")
                )
        return errs


class CustomResourceStrategy(Strategy):
    def __init__(self, namespaced: bool, has_status: bool) -> None:
        super().__init__(namespaced)
        self.has_status = has_status
        self.tracks_generation = True

    def reset_fields(self, subresource: str) -> tuple[str, ...]:
        return ("metadata", "spec") if subresource == "status" else super().reset_fields(subresource)

    def prepare_status_update(self, new: Obj, old: Obj) -> None:
        # The status endpoint of a custom resource writes its status only: the metadata stays as stored too, but
        # for the record of who wrote it.
        super().prepare_status_update(new, old)
        managed = metadata(new).get("managedFields")
        new["metadata"] = copy.deepcopy(as_dict(old.get("metadata")))
        if managed is not None:
            new["metadata"]["managedFields"] = managed


class PriorityClassStrategy(Strategy):
    def prepare_create(self, obj: Obj, now: datetime) -> None:
        super().prepare_create(obj, now)
        # Set once, as upstream does; its value is immutable, so nothing would move it.
        metadata(obj)["generation"] = 1

    def default(self, obj: Obj) -> None:
        if not obj.get("preemptionPolicy"):
            obj["preemptionPolicy"] = "PreemptLowerPriority"


class EventStrategy(Strategy):
    def default(self, obj: Obj) -> None:
        # Fields Go writes whether set or not: times as null, strings as "".
        for field, zero in (
            ("eventTime", None),
            ("firstTimestamp", None),
            ("lastTimestamp", None),
            ("reportingComponent", ""),
            ("reportingInstance", ""),
        ):
            obj.setdefault(field, zero)


_BUILTIN: Final[dict[str, type[Strategy]]] = {
    "scheduling.k8s.io/priorityclasses": PriorityClassStrategy,
    "events": EventStrategy,
    "batch/jobs": JobStrategy,
    "batch/cronjobs": CronJobStrategy,
    "pods": PodStrategy,
    "namespaces": NamespaceStrategy,
    "nodes": NodeStrategy,
    "secrets": SecretStrategy,
    "apiextensions.k8s.io/customresourcedefinitions": CustomResourceDefinitionStrategy,
}


def strategy_for(key: str, namespaced: bool) -> Strategy:
    return _BUILTIN.get(key, Strategy)(namespaced)
