"""What differs between kinds when they are written: defaulting, validation, status handling, deletion.

The generic write path (``rest.py``) calls these hooks; the rules themselves come from ``multiqueue.api`` so the
server enforces exactly what the controllers and the dispatcher check before they write.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime
from typing import Final

from multiqueue.api import cronjobs, jobdefaults, jobspec, jobstatus, jobupdate, pods
from multiqueue.api.errors import FieldError, invalid, required
from multiqueue.api.meta import (
    as_dict,
    as_list,
    format_time,
    metadata,
    validate_object_meta,
    validate_object_meta_update,
)
from multiqueue.api.types import Obj
from multiqueue.apiserver.rules import (
    configs,
    events,
    eventsv1,
    leases,
    namespaces,
    priorityclasses,
    services,
    structural,
)

IMMORTAL_NAMESPACES: Final = frozenset({"default", "kube-system", "kube-public"})
BACKGROUND: Final = "Background"
FOREGROUND: Final = "Foreground"
ORPHAN: Final = "Orphan"
# A CustomResourceDefinition being deleted keeps it until its objects are gone.
CLEANUP_FINALIZER: Final = "customresourcecleanup.apiextensions.k8s.io"
JOB_DELETE_WARNING: Final = (
    "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them "
    "or set propagationPolicy=Orphan to suppress this warning"
)


class Strategy:
    """Defaults for kinds with no rules of their own (ServiceAccounts, Deployments, RBAC kinds, ...)."""

    # A status subresource: writes to the object keep the old status, status writes keep the old spec.
    has_status: bool = False
    # metadata.generation moves when spec changes.
    tracks_generation: bool = False
    default_propagation: str = BACKGROUND
    # A PUT of an object that does not exist creates it (Services, Events, Leases, RBAC kinds).
    allow_create_on_update: bool = False
    # Validated by core's ObjectMeta rules (a finalizer needs a domain unless standard), not only apimachinery's.
    built_in: bool = True

    def __init__(self, namespaced: bool) -> None:
        self.namespaced = namespaced

    def default(self, obj: Obj) -> None:
        """Go's defaulting, which runs on every body the server decodes: creates, updates and patch results."""

    def allocate(self, obj: Obj, old: Obj | None, peers: Callable[[], list[Obj]]) -> list[FieldError]:
        """Before preparation and validation, values drawn from a pool the kind's objects share (``peers``
        lists them all, as stored): a Service's cluster IP and node ports. Errors refuse the write."""
        return []

    def prepare_create(self, obj: Obj, now: datetime) -> None:
        if self.has_status:
            obj.pop("status", None)

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return validate_object_meta(obj.get("metadata"), self.namespaced, built_in=self.built_in)

    def prepare_update(self, new: Obj, old: Obj) -> None:
        if self.has_status:
            _copy_field(new, old, "status")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_object_meta_update(new.get("metadata"), old.get("metadata"), built_in=self.built_in)

    def prepare_status_update(self, new: Obj, old: Obj) -> None:
        for key in old:
            if key not in ("status", "metadata", "apiVersion", "kind"):
                new[key] = copy.deepcopy(old[key])
        for key in [k for k in new if k not in old and k not in ("status", "metadata", "apiVersion", "kind")]:
            del new[key]

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_object_meta_update(new.get("metadata"), old.get("metadata"))

    def prepare_finalize(self, new: Obj, old: Obj) -> None:
        """A Namespace's /finalize, the one write that sets its spec.finalizers: the status stays as stored."""
        _copy_field(new, old, "status")

    def validate_finalize(self, new: Obj, old: Obj) -> list[FieldError]:
        return self.validate_update(new, old)

    def grace_period_seconds(self, obj: Obj, requested: int | None) -> int:
        """Seconds the object stays in Terminating before it is removed; only pods wait."""
        return 0

    def delete_warnings(self, options: Obj) -> list[str]:
        """Warnings a delete with these options earns, whatever becomes of it."""
        return []

    def create_forbidden(self) -> str:
        """Why no object of the kind may be created now (403), or ""."""
        return ""

    def delete_forbidden(self, name: str) -> str:
        """Why the object ``name`` may never be deleted (403, before it is even looked up), or ""."""
        return ""

    def mark_deleting(self, obj: Obj, now: datetime) -> bool:
        """For kinds whose deletion is their own (a CRD cleans up its objects first): mark ``obj`` as being
        deleted and return True, and the generic deletion does not run."""
        return False

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
            obj["spec"] = jobdefaults.default_job_spec(obj["spec"])

    def prepare_create(self, obj: Obj, now: datetime) -> None:
        super().prepare_create(obj, now)
        defaulted = jobdefaults.default_job(obj)
        obj.clear()
        obj.update(defaulted)
        # Go writes the status struct even when nothing set it: a Job no controller of ours runs (a foreign
        # managedBy) reads back with ``status: {}``, and typed clients see an empty status, not none.
        obj.setdefault("status", {})

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return jobspec.validate_job(obj)

    def delete_warnings(self, options: Obj) -> list[str]:
        explicit = options.get("propagationPolicy") is not None or options.get("orphanDependents") is not None
        return [] if explicit else [JOB_DELETE_WARNING]

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return jobupdate.validate_job_update(new, old)

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return jobstatus.validate_job_status_update(new, old)

    def canonicalize(self, obj: Obj) -> None:
        if "status" in obj:
            obj["status"] = jobstatus.stored_status_times(obj).get("status")


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
        pods.default_condition_times(obj)

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

    def delete_forbidden(self, name: str) -> str:
        # kube-apiserver's NamespaceLifecycle admission keeps these three, whether or not they exist.
        return "this namespace may not be deleted" if name in IMMORTAL_NAMESPACES else ""

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
        return namespaces.validate_namespace(obj)

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        # Only /finalize changes what holds a namespace being deleted.
        as_dict(new.setdefault("spec", {}))["finalizers"] = copy.deepcopy(namespaces.spec_finalizers(old))
        if not new["spec"]["finalizers"]:
            del new["spec"]["finalizers"]

    def validate_finalize(self, new: Obj, old: Obj) -> list[FieldError]:
        return super().validate_finalize(new, old) + namespaces.validate_spec_finalizers(new, indexed=True)


class NodeStrategy(Strategy):
    has_status = True


class ConfigMapStrategy(Strategy):
    def validate_create(self, obj: Obj) -> list[FieldError]:
        return configs.validate_configmap(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return configs.validate_configmap_update(new, old)


class SecretStrategy(Strategy):
    def default(self, obj: Obj) -> None:
        # Decoding folds stringData into data and defaults the type, on every write.
        configs.default_secret(obj)
        configs.fold_string_data(obj)

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return configs.validate_secret(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return configs.validate_secret_update(new, old)


class CustomResourceDefinitionStrategy(Strategy):
    has_status = True
    tracks_generation = True
    built_in = False

    def default(self, obj: Obj) -> None:
        spec = as_dict(obj.get("spec"))
        names = as_dict(spec.get("names"))
        if names.get("kind"):
            names.setdefault("singular", str(names["kind"]).lower())
            names.setdefault("listKind", f"{names['kind']}List")
        spec.setdefault("conversion", {"strategy": "None"})
        for version in as_list(spec.get("versions")):
            structural.stored_schema(as_dict(as_dict(version).get("schema")).get("openAPIV3Schema"))

    def prepare_create(self, obj: Obj, now: datetime) -> None:
        # A new definition's status as Go writes it: no conditions yet, names not yet accepted.
        storage = [
            str(v.get("name"))
            for v in as_list(as_dict(obj.get("spec")).get("versions"))
            if as_dict(v).get("storage")
        ]
        obj["status"] = {
            "conditions": None,
            "acceptedNames": {"plural": "", "kind": ""},
            "storedVersions": storage[:1],
        }

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

    def mark_deleting(self, obj: Obj, now: datetime) -> bool:
        meta = metadata(obj)
        meta["deletionTimestamp"] = format_time(now)
        meta["finalizers"] = [*as_list(meta.get("finalizers")), CLEANUP_FINALIZER]
        status = as_dict(obj.setdefault("status", {}))
        conditions = [c for c in as_list(status.get("conditions")) if as_dict(c).get("type") != "Terminating"]
        message = "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"
        terminating = {"type": "Terminating", "status": "True", "lastTransitionTime": format_time(now)}
        status["conditions"] = [
            *conditions,
            {**terminating, "reason": "InstanceDeletionPending", "message": message},
        ]
        return True

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = super().validate_update(new, old)
        for field in ("group", "scope"):
            if as_dict(new.get("spec")).get(field) != as_dict(old.get("spec")).get(field):
                errs.append(
                    invalid(f"spec.{field}", as_dict(new.get("spec")).get(field), "field is immutable")
                )
        return errs


class CustomResourceStrategy(Strategy):
    """Objects of a CRD's kind, checked against the schema of the version they are written in."""

    built_in = False

    def __init__(
        self, namespaced: bool, has_status: bool, schemas: dict[str, Obj | None], terminating: bool = False
    ) -> None:
        super().__init__(namespaced)
        self.has_status = has_status
        self.tracks_generation = True
        self.schemas = schemas  # apiVersion -> openAPIV3Schema
        self.terminating = terminating  # the definition is being deleted

    def _schema(self, obj: Obj) -> Obj | None:
        return self.schemas.get(str(obj.get("apiVersion")))

    def default(self, obj: Obj) -> None:
        # Decoding reported the unknown fields of a create or update; a patch's are dropped silently.
        structural.prune(obj, self._schema(obj))
        structural.apply_defaults(obj, self._schema(obj))

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return super().validate_create(obj) + structural.validate(obj, self._schema(obj))

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return super().validate_update(new, old) + structural.validate(new, self._schema(new))

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = super().validate_status_update(new, old)
        if "status" not in new:
            return errs
        status_schema = as_dict(as_dict(self._schema(new)).get("properties")).get("status")
        return errs + structural.validate(new["status"], as_dict(status_schema), under="status")

    def create_forbidden(self) -> str:
        return (
            "create not allowed while custom resource definition is terminating" if self.terminating else ""
        )

    def reset_fields(self, subresource: str) -> tuple[str, ...]:
        return ("metadata", "spec") if subresource == "status" else super().reset_fields(subresource)

    def prepare_status_update(self, new: Obj, old: Obj) -> None:
        """A status write changes the status only: the metadata stays as stored too, but for the record of who
        wrote it (managedFields)."""
        super().prepare_status_update(new, old)
        meta = metadata(new)  # the same dict the caller holds
        managed = meta.get("managedFields")
        meta.clear()
        meta.update(copy.deepcopy(metadata(old)))
        if managed is not None:
            meta["managedFields"] = managed


class PriorityClassStrategy(Strategy):
    def prepare_create(self, obj: Obj, now: datetime) -> None:
        super().prepare_create(obj, now)
        # Set once, as upstream does; its value is immutable, so nothing would move it.
        metadata(obj)["generation"] = 1

    def default(self, obj: Obj) -> None:
        priorityclasses.default_priority_class(obj)

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return priorityclasses.validate_priority_class(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return priorityclasses.validate_priority_class_update(new, old)


class EventStrategy(Strategy):
    allow_create_on_update = True

    def default(self, obj: Obj) -> None:
        events.default_event(obj)

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return events.validate_event(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return super().validate_update(new, old) + events.validate_event_update(new)


class EventsV1Strategy(Strategy):
    """Events written through events.k8s.io/v1 (objects in that version's shape; stored as core ones)."""

    allow_create_on_update = True

    def default(self, obj: Obj) -> None:
        eventsv1.default_event(obj)

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return eventsv1.validate_create(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return eventsv1.validate_update(new, old)


class LeaseStrategy(Strategy):
    allow_create_on_update = True

    def prepare_create(self, obj: Obj, now: datetime) -> None:
        leases.drop_disabled_fields(obj, None)

    def prepare_update(self, new: Obj, old: Obj) -> None:
        leases.drop_disabled_fields(new, old)

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return leases.validate_lease(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return leases.validate_lease_update(new, old)


class ServiceStrategy(Strategy):
    has_status = True
    allow_create_on_update = True

    def default(self, obj: Obj) -> None:
        services.default_service(obj)

    def allocate(self, obj: Obj, old: Obj | None, peers: Callable[[], list[Obj]]) -> list[FieldError]:
        return services.allocate(obj, old, peers())

    def prepare_create(self, obj: Obj, now: datetime) -> None:
        obj["status"] = {"loadBalancer": {}}

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return services.validate_service(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return services.validate_service_update(new, old)


class CreateOnUpdateStrategy(Strategy):
    """Kinds whose PUT creates what is missing and that have no other rules here (RBAC roles and bindings)."""

    allow_create_on_update = True


_BUILTIN: Final[dict[str, type[Strategy]]] = {
    "scheduling.k8s.io/priorityclasses": PriorityClassStrategy,
    "events": EventStrategy,
    "events.k8s.io/events": EventsV1Strategy,
    "configmaps": ConfigMapStrategy,
    "coordination.k8s.io/leases": LeaseStrategy,
    "services": ServiceStrategy,
    "rbac.authorization.k8s.io/roles": CreateOnUpdateStrategy,
    "rbac.authorization.k8s.io/rolebindings": CreateOnUpdateStrategy,
    "rbac.authorization.k8s.io/clusterroles": CreateOnUpdateStrategy,
    "rbac.authorization.k8s.io/clusterrolebindings": CreateOnUpdateStrategy,
    "batch/jobs": JobStrategy,
    "batch/cronjobs": CronJobStrategy,
    "pods": PodStrategy,
    "namespaces": NamespaceStrategy,
    "nodes": NodeStrategy,
    "secrets": SecretStrategy,
    "apiextensions.k8s.io/customresourcedefinitions": CustomResourceDefinitionStrategy,
}


def strategy_for(resource: str, namespaced: bool) -> Strategy:
    """The strategy of a built-in ``resource`` (``batch/jobs``: a type's :attr:`ResourceType.resource`)."""
    return _BUILTIN.get(resource, Strategy)(namespaced)
