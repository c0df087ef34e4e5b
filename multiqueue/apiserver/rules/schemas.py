"""The structure of a kind as server-side apply sees it, read from the kind's OpenAPI v3 schema.

Each node of an object is a scalar, a map, a list, or untyped (decided by the value found). Maps are structs (fields
the schema declares) or maps proper (any key, ``additionalProperties``); both are granular, their fields owned one
by one, unless ``x-kubernetes-map-type: atomic`` makes the whole value one field. Lists are atomic, sets of
primitives, or keyed by some fields of their items: ``x-kubernetes-list-type``/``x-kubernetes-list-map-keys`` say
which, or else the strategic-merge annotations (``x-kubernetes-patch-strategy: merge`` with a merge key). This is
how kube-openapi converts schemas for upstream's structured-merge-diff, and the server reads the same document it
serves, so what kubectl sees in /openapi/v3 is what apply does.

Built-in kinds' documents are generated from the client's models with upstream's list types, map keys and atomic
structs and maps (openapi_facts.json, from k8s.io/api v0.37.2); the tables here add what apply needs beyond them:
defaults of list keys, and each kind's zero value.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, Final, Literal

from multiqueue.api.types import Obj

ListKind = Literal["atomic", "set", "map"]
_REF_PREFIX: Final = "#/components/schemas/"

_CORE: Final = "io.k8s.api.core.v1"

# Defaults of list-key fields other than their type's zero value: an item without the key has the default.
KEY_DEFAULTS: Final[dict[tuple[str, str], Any]] = {
    (f"{_CORE}.ContainerPort", "protocol"): "TCP",
    (f"{_CORE}.ServicePort", "protocol"): "TCP",
}

# What a new object of each built-in kind is before decoding fills it: Go's zero value, as encoded. A create is
# compared against it, so the structs Go always writes are not new fields of the object.
_TEMPLATE: Final[Obj] = {"metadata": {}, "spec": {"containers": None}}
ZERO_OBJECTS: Final[dict[tuple[str, str], Obj]] = {
    ("", "Pod"): {"metadata": {}, "spec": {"containers": None}, "status": {}},
    ("", "Namespace"): {"metadata": {}, "spec": {}, "status": {}},
    ("", "Service"): {"metadata": {}, "spec": {}, "status": {"loadBalancer": {}}},
    ("", "Event"): {
        "metadata": {},
        "involvedObject": {},
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "eventTime": None,
        "reportingComponent": "",
        "reportingInstance": "",
    },
    ("events.k8s.io", "Event"): {
        "metadata": {},
        "eventTime": None,
        "regarding": {},
        "deprecatedSource": {},
        "deprecatedFirstTimestamp": None,
        "deprecatedLastTimestamp": None,
    },
    ("", "Node"): {
        "metadata": {},
        "spec": {},
        "status": {
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "nodeInfo": {
                name: ""
                for name in (
                    "architecture",
                    "bootID",
                    "containerRuntimeVersion",
                    "kernelVersion",
                    "kubeProxyVersion",
                    "kubeletVersion",
                    "machineID",
                    "operatingSystem",
                    "osImage",
                    "systemUUID",
                )
            },
        },
    },
    ("batch", "Job"): {"metadata": {}, "spec": {"template": _TEMPLATE}, "status": {}},
    ("batch", "CronJob"): {
        "metadata": {},
        "spec": {"schedule": "", "jobTemplate": {"metadata": {}, "spec": {"template": _TEMPLATE}}},
        "status": {},
    },
    ("apps", "Deployment"): {
        "metadata": {},
        "spec": {"selector": None, "strategy": {}, "template": _TEMPLATE},
        "status": {},
    },
    ("coordination.k8s.io", "Lease"): {"metadata": {}, "spec": {}},
    ("scheduling.k8s.io", "PriorityClass"): {"metadata": {}, "value": 0},
    ("rbac.authorization.k8s.io", "Role"): {"metadata": {}, "rules": None},
    ("rbac.authorization.k8s.io", "ClusterRole"): {"metadata": {}, "rules": None},
    ("rbac.authorization.k8s.io", "RoleBinding"): {
        "metadata": {},
        "roleRef": {"apiGroup": "", "kind": "", "name": ""},
    },
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): {
        "metadata": {},
        "roleRef": {"apiGroup": "", "kind": "", "name": ""},
    },
    ("apiextensions.k8s.io", "CustomResourceDefinition"): {
        "metadata": {},
        "spec": {"group": "", "names": {"kind": "", "plural": ""}, "scope": "", "versions": None},
        "status": {"acceptedNames": {"kind": "", "plural": ""}, "conditions": None, "storedVersions": None},
    },
}


def zero_object(group: str, kind: str) -> Obj:
    """A new object of the kind before anything is set (``metadata`` only for kinds not listed)."""
    return copy.deepcopy(ZERO_OBJECTS.get((group, kind), {"metadata": {}}))


# --- nodes --------------------------------------------------------------------------------------------------


class Node:
    """One type in a schema. Subclasses: :class:`Scalar`, :class:`MapType`, :class:`ListType`, :class:`Untyped`."""


@dataclasses.dataclass(frozen=True, eq=False)
class Scalar(Node):
    """A leaf: ``string``, ``numeric``, ``boolean``, or ``untyped`` (any of them: dates, quantities, int-or-string)."""

    kind: Literal["string", "numeric", "boolean", "untyped"] = "untyped"


@dataclasses.dataclass(frozen=True, eq=False)
class Untyped(Node):
    """A node the schema says nothing about (or allows anything in): the value decides. Maps are granular with
    untyped values when ``deduced``, lists and (otherwise) maps are atomic."""

    deduced: bool


@dataclasses.dataclass(frozen=True, eq=False)
class MapType(Node):
    """A struct, a map, or both (declared fields, and ``element`` for any other key; None: no other key)."""

    schema: Schema | None
    spec: Obj
    atomic: bool
    preserve_unknown: bool

    @functools.cached_property
    def _fields(self) -> dict[str, Obj]:
        properties = self.spec.get("properties")
        return dict(properties) if isinstance(properties, dict) else {}

    def declares(self, name: str) -> bool:
        return name in self._fields

    def field_type(self, name: str) -> Node | None:
        """The type of field ``name``: declared, else the element type; None when the map has no such field."""
        spec = self._fields.get(name)
        if spec is not None and self.schema is not None:
            return self.schema.node(spec, self.preserve_unknown)
        return self.element

    def default(self, name: str) -> Any:
        spec = self._fields.get(name)
        if isinstance(spec, dict) and "default" in spec:
            return spec["default"]
        return None

    @functools.cached_property
    def element(self) -> Node | None:
        extra = self.spec.get("additionalProperties")
        if isinstance(extra, dict) and self.schema is not None:
            return self.schema.node(extra, self.preserve_unknown)
        if extra is True or (extra is None and (self.preserve_unknown or not self._fields)):
            return DEDUCED
        return None


@dataclasses.dataclass(frozen=True, eq=False)
class ListType(Node):
    schema: Schema | None
    spec: Obj
    kind: ListKind
    keys: tuple[str, ...]
    preserve_unknown: bool

    @functools.cached_property
    def element(self) -> Node:
        items = self.spec.get("items")
        if isinstance(items, dict) and self.schema is not None:
            return self.schema.node(items, self.preserve_unknown)
        return ATOMIC_UNTYPED


SCALAR: Final = Scalar()
STRING: Final = Scalar("string")
NUMERIC: Final = Scalar("numeric")
BOOLEAN: Final = Scalar("boolean")
DEDUCED: Final = Untyped(deduced=True)
ATOMIC_UNTYPED: Final = Untyped(deduced=False)
# The shapes an untyped node takes: maps of untyped values (granular when deduced), atomic lists.
_DEDUCED_MAP: Final = MapType(None, {}, False, True)
_ATOMIC_MAP: Final = MapType(None, {}, True, False)
_ATOMIC_LIST: Final = ListType(None, {}, "atomic", (), False)


def shape(node: Node, data: Any) -> Node:
    """The node ``data`` is read with: an untyped node takes the shape of the value found there."""
    if not isinstance(node, Untyped):
        return node
    if isinstance(data, dict):
        return _DEDUCED_MAP if node.deduced else _ATOMIC_MAP
    if isinstance(data, list):
        return _ATOMIC_LIST
    return SCALAR


def _list_kind(spec: Obj) -> tuple[ListKind, tuple[str, ...]]:
    """Upstream's reading: an explicit list type wins, then the strategic-merge annotations, else atomic."""
    list_type = spec.get("x-kubernetes-list-type")
    if list_type in ("atomic", "set"):
        return list_type, ()
    if list_type == "map":
        keys = spec.get("x-kubernetes-list-map-keys")
        return "map", tuple(str(k) for k in keys) if isinstance(keys, list) else ()
    if spec.get("x-kubernetes-patch-strategy") in ("merge", "merge,retainKeys"):
        merge_key = spec.get("x-kubernetes-patch-merge-key")
        return ("map", (str(merge_key),)) if merge_key else ("set", ())
    return "atomic", ()


class Schema:
    """The nodes of one document's definitions (``components.schemas``), built as they are reached."""

    def __init__(self, definitions: Mapping[str, Obj]) -> None:
        self.definitions = definitions
        self._named: dict[tuple[str, bool, str], Node] = {}

    def root(self, name: str) -> Node:
        return self.node({"$ref": _REF_PREFIX + name}, False)

    def node(self, spec: Obj, preserve_unknown: bool) -> Node:
        """The node of ``spec``: a reference (``$ref``, or ``allOf`` of one) is followed, keeping the map type the
        referring property gives it."""
        ref = spec.get("$ref")
        if ref is None:
            all_of = spec.get("allOf")
            if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
                ref = all_of[0].get("$ref")
        if isinstance(ref, str):
            name = ref.removeprefix(_REF_PREFIX)
            map_type = str(spec.get("x-kubernetes-map-type", ""))
            cache_key = (name, preserve_unknown, map_type)
            found = self._named.get(cache_key)
            if found is None:
                target = self.definitions.get(name)
                found = self._convert(target if isinstance(target, dict) else {}, preserve_unknown, map_type)
                self._named[cache_key] = found
            return found
        return self._convert(spec, preserve_unknown, "")

    def _convert(self, spec: Obj, preserve_unknown: bool, map_type: str) -> Node:
        preserve_unknown = preserve_unknown or spec.get("x-kubernetes-preserve-unknown-fields") is True
        atomic = (map_type or spec.get("x-kubernetes-map-type")) == "atomic"
        kind = spec.get("type")
        if kind == "object":
            return MapType(self, spec, atomic, preserve_unknown)
        if kind == "array":
            list_kind, keys = _list_kind(spec)
            return ListType(self, spec, list_kind, keys, preserve_unknown)
        if kind == "string":
            return STRING if spec.get("format") in (None, "", "byte") else SCALAR
        if kind in ("integer", "number"):
            return NUMERIC
        if kind == "boolean":
            return BOOLEAN
        if "properties" in spec or "additionalProperties" in spec:
            return MapType(self, spec, atomic, preserve_unknown)
        return ATOMIC_UNTYPED if atomic else DEDUCED
