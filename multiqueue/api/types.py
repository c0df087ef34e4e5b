"""Value types every layer shares, free of any I/O: an object as the API server sent it, where a kind lives in
the API, and an event a decide step wants recorded."""

from __future__ import annotations

import dataclasses
from typing import Any, Final

Obj = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API: enough to build every URL for it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


JOBS: Final = Resource("batch", "v1", "jobs", "Job")
CRONJOBS: Final = Resource("batch", "v1", "cronjobs", "CronJob")
PODS: Final = Resource("", "v1", "pods", "Pod")
EVENTS: Final = Resource("", "v1", "events", "Event")
NAMESPACES: Final = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES: Final = Resource("", "v1", "nodes", "Node", namespaced=False)
SECRETS: Final = Resource("", "v1", "secrets", "Secret")
CONFIGMAPS: Final = Resource("", "v1", "configmaps", "ConfigMap")
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases", "Lease")
PRIORITY_CLASSES: Final = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
CRDS: Final = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)

NORMAL: Final = "Normal"
WARNING: Final = "Warning"


@dataclasses.dataclass(frozen=True)
class Event:
    """An event a decide step wants recorded; an executor hands it to an event recorder."""

    type: str
    reason: str
    message: str
