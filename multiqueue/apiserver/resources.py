"""The resource types a local API server serves: the built-in kinds and those CustomResourceDefinitions add.

One :class:`ResourceType` describes everything discovery, OpenAPI, routing and tables need to know about a kind;
behaviour specific to a kind (defaulting, validation) lives in the strategies, keyed by
:attr:`ResourceType.resource`. Two types may share one storage (:attr:`ResourceType.key`): the versions of a CRD,
and Events, served as core v1 and as events.k8s.io/v1 over the same objects.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

ALL_VERBS: Final = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
# Namespaces are deleted one by one (upstream serves no deletecollection for them).
NAMESPACE_VERBS: Final = tuple(v for v in ALL_VERBS if v != "deletecollection")
# Kinds a client creates to ask a question (reviews): answered, never stored.
CREATE_ONLY: Final = ("create",)


@dataclasses.dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    # Name of the official client's model class (``V1Job``), from which OpenAPI schemas are generated.
    model: str | None = None
    # For kinds a CRD defines: its openAPIV3Schema and printer columns, served as given.
    schema: dict[str, Any] | None = dataclasses.field(default=None, compare=False)
    printer_columns: tuple[dict[str, Any], ...] = dataclasses.field(default=(), compare=False)
    # The storage key of another type whose objects this one serves, converted (events.k8s.io/v1 Events are
    # the core v1 ones); "" when the type has its own.
    stored_as: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """``batch/jobs``; core kinds have no group: ``pods``. Unique per served group and resource."""
        return f"{self.group}/{self.plural}" if self.group else self.plural

    @property
    def key(self) -> str:
        """The storage key: :attr:`resource`, or the key of the type whose objects this one serves."""
        return self.stored_as or self.resource

    @property
    def storage_group(self) -> str:
        """The group of the objects as stored: errors that name the kind (422 Invalid, a failed precondition)
        name it in this group, as upstream names the internal type (core for events.k8s.io Events)."""
        return self.key.rpartition("/")[0]

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The URL path of the collection or of one object."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base = f"{base}/namespaces/{namespace}"
        base = f"{base}/{self.plural}"
        return f"{base}/{name}" if name else base


BUILTIN: Final = (
    ResourceType(
        "",
        "v1",
        "Namespace",
        "namespaces",
        "namespace",
        False,
        ("ns",),
        (),
        ("status", "finalize"),
        NAMESPACE_VERBS,
        model="V1Namespace",
    ),
    ResourceType(
        "", "v1", "Pod", "pods", "pod", True, ("po",), ("all",), ("eviction", "log", "status"), model="V1Pod"
    ),
    ResourceType("", "v1", "Event", "events", "event", True, ("ev",), model="CoreV1Event"),
    ResourceType("", "v1", "ConfigMap", "configmaps", "configmap", True, ("cm",), model="V1ConfigMap"),
    ResourceType("", "v1", "Secret", "secrets", "secret", True, model="V1Secret"),
    ResourceType("", "v1", "Node", "nodes", "node", False, ("no",), (), ("status",), model="V1Node"),
    ResourceType(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        "serviceaccount",
        True,
        ("sa",),
        model="V1ServiceAccount",
    ),
    ResourceType("batch", "v1", "Job", "jobs", "job", True, (), ("all",), ("status",), model="V1Job"),
    ResourceType(
        "batch",
        "v1",
        "CronJob",
        "cronjobs",
        "cronjob",
        True,
        ("cj",),
        ("all",),
        ("status",),
        model="V1CronJob",
    ),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", "lease", True, model="V1Lease"),
    # The core Events again, as the newer API shows them (client-go's events recorder writes here).
    ResourceType(
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        "event",
        True,
        ("ev",),
        model="EventsV1Event",
        stored_as="events",
    ),
    # Stored and served, not acted on (no controllers for them): so manifests such as deploy/ apply here too.
    ResourceType(
        "", "v1", "Service", "services", "service", True, ("svc",), ("all",), ("status",), model="V1Service"
    ),
    ResourceType(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        "deployment",
        True,
        ("deploy",),
        ("all",),
        ("status",),
        model="V1Deployment",
    ),
    ResourceType("rbac.authorization.k8s.io", "v1", "Role", "roles", "role", True, model="V1Role"),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        "rolebinding",
        True,
        model="V1RoleBinding",
    ),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        "clusterrole",
        False,
        model="V1ClusterRole",
    ),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        "clusterrolebinding",
        False,
        model="V1ClusterRoleBinding",
    ),
    ResourceType(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        "priorityclass",
        False,
        ("pc",),
        model="V1PriorityClass",
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        False,
        verbs=CREATE_ONLY,
        model="V1SelfSubjectAccessReview",
    ),
    ResourceType(
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        "selfsubjectreview",
        False,
        verbs=CREATE_ONLY,
        model="V1SelfSubjectReview",
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        "customresourcedefinition",
        False,
        ("crd", "crds"),
        ("api-extensions",),
        ("status",),
        model="V1CustomResourceDefinition",
    ),
)
