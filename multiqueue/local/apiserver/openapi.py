"""OpenAPI v3 documents, so ``kubectl create``, ``apply`` and ``explain`` work with their default settings.

kubectl reads /openapi/v3 (an index of group-version documents, each URL carrying a content hash), then the
document of the group version it needs:

- ``explain`` finds the kind by ``x-kubernetes-group-version-kind`` in ``components.schemas`` and walks its
  properties, so schemas keep upstream's definition names and descriptions;
- ``create``/``apply`` look for the ``fieldValidation`` parameter on the kind's PATCH operation; when it is there
  they send ``?fieldValidation=Strict`` and leave validation to the server, otherwise they fall back to
  client-side validation.

kubectl 1.27 and 1.28 read /openapi/v2 instead, made from the same definitions and operations (openapi_v2.py).

Built-in kinds' schemas are generated from the official client's pydantic models; a CRD's kinds use its
openAPIV3Schema. Lists that merge by key carry ``x-kubernetes-patch-merge-key`` from the table the server's
strategic merge uses. Generating a document is slow, so each is rendered once per set of types and cached with
its hash. The hash is over the rendered bytes, as upstream's: a change in the generator moves it too, so clients
holding "immutable" copies fetch again.
"""

from __future__ import annotations

import copy
import dataclasses
import email.utils
import functools
import hashlib
import json
import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Final

import kubernetes.client.models as models

from multiqueue.api import schemas as structure
from multiqueue.api.patches import PRIMITIVE_SET, list_strategy
from multiqueue.api.types import Obj
from multiqueue.local.apiserver.resources import CREATE_ONLY, ResourceType

_REF: Final = "#/components/schemas/"
_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1"
_APIEXTENSIONS: Final = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1"
TIME: Final = f"{_META}.Time"
MICRO_TIME: Final = f"{_META}.MicroTime"
INT_OR_STRING: Final = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY: Final = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_PATCH: Final = f"{_META}.Patch"
_STATUS: Final = f"{_META}.Status"
_DELETE_OPTIONS: Final = f"{_META}.DeleteOptions"

# The client's model names drop the Go package; these say which package a v1 name is from (default: core).
_META_NAMES: Final = frozenset(
    {
        "APIGroup",
        "APIGroupList",
        "APIResource",
        "APIResourceList",
        "APIVersions",
        "Condition",
        "DeleteOptions",
        "FieldSelectorRequirement",
        "GroupVersionForDiscovery",
        "LabelSelector",
        "LabelSelectorRequirement",
        "ListMeta",
        "ManagedFieldsEntry",
        "ObjectMeta",
        "OwnerReference",
        "Preconditions",
        "ServerAddressByClientCIDR",
        "Status",
        "StatusCause",
        "StatusDetails",
        "WatchEvent",
    }
)
_GROUP_NAMES: Final = {
    "batch": frozenset(
        {
            "CronJob",
            "CronJobList",
            "CronJobSpec",
            "CronJobStatus",
            "Job",
            "JobCondition",
            "JobList",
            "JobSchedulingConfiguration",
            "JobSpec",
            "JobStatus",
            "JobTemplateSpec",
            "PodFailurePolicy",
            "PodFailurePolicyOnExitCodesRequirement",
            "PodFailurePolicyOnPodConditionsPattern",
            "PodFailurePolicyRule",
            "SuccessPolicy",
            "SuccessPolicyRule",
            "UncountedTerminatedPods",
        }
    ),
    "coordination": frozenset({"Lease", "LeaseList", "LeaseSpec"}),
    "authorization": frozenset(
        {
            "FieldSelectorAttributes",
            "LabelSelectorAttributes",
            "NonResourceAttributes",
            "ResourceAttributes",
            "SelfSubjectAccessReview",
            "SelfSubjectAccessReviewSpec",
            "SubjectAccessReviewStatus",
        }
    ),
    "authentication": frozenset({"SelfSubjectReview", "SelfSubjectReviewStatus", "UserInfo"}),
}
_APIEXTENSIONS_NAMES: Final = frozenset(
    {
        "CustomResourceColumnDefinition",
        "CustomResourceConversion",
        "CustomResourceDefinition",
        "CustomResourceDefinitionCondition",
        "CustomResourceDefinitionList",
        "CustomResourceDefinitionNames",
        "CustomResourceDefinitionSpec",
        "CustomResourceDefinitionStatus",
        "CustomResourceDefinitionVersion",
        "CustomResourceSubresourceScale",
        "CustomResourceSubresources",
        "CustomResourceValidation",
        "ExternalDocumentation",
        "JSONSchemaProps",
        "SelectableField",
        "ValidationRule",
        "WebhookConversion",
    }
)
# Fields the client types as plain strings but upstream as resource.Quantity (a map of them, or one).
_QUANTITY_FIELDS: Final = frozenset(
    {
        ("V1ResourceRequirements", "limits"),
        ("V1ResourceRequirements", "requests"),
        ("V1VolumeResourceRequirements", "limits"),
        ("V1VolumeResourceRequirements", "requests"),
        ("V1NodeStatus", "allocatable"),
        ("V1NodeStatus", "capacity"),
        ("V1PodSpec", "overhead"),
        ("V1ContainerStatus", "allocatedResources"),
        ("V1EmptyDirVolumeSource", "sizeLimit"),
        ("V1ResourceFieldSelector", "divisor"),
    }
)
# Timestamps with microseconds upstream; every other date-time is a metav1.Time.
_MICRO_TIME_FIELDS: Final = frozenset(
    {
        ("CoreV1Event", "eventTime"),
        ("CoreV1EventSeries", "lastObservedTime"),
        ("V1LeaseSpec", "acquireTime"),
        ("V1LeaseSpec", "renewTime"),
    }
)
_SCALAR_DEFINITIONS: Final[dict[str, Obj]] = {
    TIME: {
        "description": "A timestamp in RFC 3339 form, with second precision, in UTC.",
        "format": "date-time",
        "type": "string",
    },
    MICRO_TIME: {
        "description": "A timestamp in RFC 3339 form, with microsecond precision, in UTC.",
        "format": "date-time",
        "type": "string",
    },
    INT_OR_STRING: {
        "description": "An integer or a string: a port number or name, a count or a percentage.",
        "format": "int-or-string",
        "oneOf": [{"type": "integer"}, {"type": "string"}],
    },
    QUANTITY: {
        "description": "A fixed-point number with an optional suffix, such as 100m, 1.5Gi or 2e3.",
        "oneOf": [{"type": "string"}, {"type": "number"}],
    },
    _PATCH: {
        "description": "The body of a PATCH request, in the format its Content-Type names.",
        "type": "object",
    },
}
_MODEL_NAME: Final = re.compile(
    r"(?P<group>[A-Z][a-z]+)?(?P<version>V\d+(?:alpha\d+|beta\d+)?)(?P<name>[A-Z]\w*)"
)


def definition_name(model: str) -> str:
    """The upstream definition name of a client model: ``V1JobSpec`` -> ``io.k8s.api.batch.v1.JobSpec``.

    kubectl explain shows the part after the last dot as a field's type, so these keep upstream's names.
    """
    if model == "VersionInfo":
        return "io.k8s.apimachinery.pkg.version.Info"
    match = _MODEL_NAME.fullmatch(model)
    if match is None:
        return model
    group, version, name = match["group"], match["version"].lower(), match["name"]
    if group == "Core":
        return f"io.k8s.api.core.{version}.{name}"
    if group == "Apiextensions" and version == "v1":
        return f"{_APIEXTENSIONS}.{name}"
    if group is not None:
        return f"io.k8s.api.{group.lower()}.{version}.{name}"
    if version != "v1":
        # The client's name does not say which group an alpha or beta type is from.
        return f"io.k8s.api.{version}.{name}"
    if name in _META_NAMES:
        return f"{_META}.{name}"
    if name in _APIEXTENSIONS_NAMES:
        return f"{_APIEXTENSIONS}.{name}"
    for package, names in _GROUP_NAMES.items():
        if name in names:
            return f"io.k8s.api.{package}.v1.{name}"
    return f"io.k8s.api.core.v1.{name}"


def crd_definition_name(group: str, version: str, kind: str) -> str:
    """Upstream's name for a custom kind: the group reversed, ``example.com`` -> ``com.example.v1.Widget``."""
    return ".".join([*reversed(group.split(".")), version, kind])


# --- schemas from the client's models -------------------------------------------------------------------------


def _ref(name: str) -> Obj:
    return {"$ref": _REF + name}


def _wrapped(name: str, siblings: Obj) -> Obj:
    """A reference with its own description: upstream's ``allOf: [$ref]`` form, which keeps both."""
    return {"allOf": [_ref(name)], **siblings} if siblings else _ref(name)


def _description(text: Any) -> Any:
    # The client's model docstrings end with notes about its own Python attributes.
    return text.split("\n\nAttributes:")[0].rstrip() if isinstance(text, str) else text


def _convert(node: Any, field: tuple[str, str] | None = None) -> Any:
    """One pydantic JSON-schema node into the OpenAPI shape upstream publishes.

    ``field`` (model, property) names the property the node describes, for the types pydantic cannot tell
    apart from plain strings (quantities, micro-times).
    """
    if isinstance(node, list):
        return [_convert(item) for item in node]
    if not isinstance(node, dict):
        return node
    result: Obj = {}
    for key, value in node.items():
        if key in ("title", "default") or (key == "additionalProperties" and value is False):
            continue
        if key == "description":
            result[key] = _description(value)
        elif key == "properties" and isinstance(value, dict):
            result[key] = {name: _convert(child) for name, child in value.items()}
        else:
            result[key] = _convert(value)
    options = result.pop("anyOf", None)
    if isinstance(options, list):
        result = {**_merge_options([o for o in options if o != {"type": "null"}]), **result}
    if result.get("type") == "object" and result.get("additionalProperties") is True:
        del result["additionalProperties"]
        result["x-kubernetes-preserve-unknown-fields"] = True
    if not any(k in result for k in ("type", "$ref", "allOf", "anyOf", "oneOf", "properties")):
        result["x-kubernetes-preserve-unknown-fields"] = True
    if field is not None:
        result = _special_field(result, field)
    ref = result.pop("$ref", None)
    if isinstance(ref, str):
        result = _wrapped(definition_name(ref.rsplit("/", 1)[-1]), result)
    return result


def _merge_options(options: list[Obj]) -> Obj:
    """The non-null alternatives of an ``anyOf``: one is the schema; integer|string is an IntOrString."""
    if len(options) == 1:
        return options[0]
    types = [o.get("type") for o in options]
    if sorted(map(str, types)) == ["integer", "string"] and all(len(o) == 1 for o in options):
        return _ref(INT_OR_STRING)
    if types and all(t == "string" for t in types):
        # Secret data: raw bytes or text, base64 on the wire.
        return {"format": "byte", "type": "string"}
    return {"anyOf": options}


def _special_field(schema: Obj, field: tuple[str, str]) -> Obj:
    if schema.get("type") == "string" and schema.get("format") == "date-time":
        name = MICRO_TIME if field in _MICRO_TIME_FIELDS else TIME
        return _wrapped(name, {k: v for k, v in schema.items() if k not in ("type", "format")})
    if field in _QUANTITY_FIELDS:
        if schema.get("type") == "object":
            return {**schema, "additionalProperties": _ref(QUANTITY)}
        return _wrapped(QUANTITY, {k: v for k, v in schema.items() if k != "type"})
    return schema


def _convert_model(model: str, schema: Obj) -> Obj:
    converted: Obj = {}
    for key, value in schema.items():
        if key in ("title", "$defs") or (key == "additionalProperties" and value is False):
            continue
        if key == "properties":
            converted[key] = {name: _convert(prop, (model, name)) for name, prop in value.items()}
        else:
            converted[key] = _description(value) if key == "description" else _convert(value)
    return converted


@functools.lru_cache(maxsize=128)
def _model_definitions(model: str) -> str:
    """JSON of every definition ``model`` needs, converted and under upstream names; cached (slow to make)."""
    schema = getattr(models, model).model_json_schema(by_alias=True, ref_template=_REF + "{model}")
    raw: dict[str, Obj] = schema.pop("$defs", {})
    raw[model] = schema
    return json.dumps({definition_name(name): _convert_model(name, body) for name, body in raw.items()})


def _has_model(model: str | None) -> bool:
    return model is not None and isinstance(getattr(models, model, None), type)


# --- kinds --------------------------------------------------------------------------------------------------


def _gvk(rtype: ResourceType, kind: str | None = None) -> Obj:
    return {"group": rtype.group, "kind": kind or rtype.kind, "version": rtype.version}


def _target(schemas: Obj, node: Obj) -> Obj:
    """The definition a property refers to (directly or through ``allOf``), else the property itself."""
    ref = node.get("$ref")
    if ref is None:
        ref = next((a.get("$ref") for a in node.get("allOf", []) if isinstance(a, dict)), None)
    if isinstance(ref, str):
        found = schemas.get(ref.removeprefix(_REF))
        return found if isinstance(found, dict) else {}
    return node


def _annotate_lists(schemas: Obj, rtype: ResourceType, node: Obj, path: str, seen: frozenset[int]) -> None:
    """Mark the lists under ``node`` that strategic merge patches by key or as a set.

    Walks the kind's schema along dotted paths (``[]`` steps into list items), the form ``list_strategy`` reads;
    ``seen`` stops at definitions already on the way down (JSONSchemaProps refers to itself).
    """
    target = _target(schemas, node)
    if id(target) in seen:
        return
    seen = seen | {id(target)}
    for name, prop in (target.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        child = f"{path}.{name}" if path else name
        if prop.get("type") != "array":
            _annotate_lists(schemas, rtype, prop, child, seen)
            continue
        strategy = list_strategy(rtype.group, rtype.kind, child)
        if strategy is not None:
            prop["x-kubernetes-patch-strategy"] = "merge"
            if strategy == PRIMITIVE_SET:
                prop["x-kubernetes-list-type"] = "set"
            else:
                prop["x-kubernetes-patch-merge-key"] = strategy
        if isinstance(prop.get("items"), dict):
            _annotate_lists(schemas, rtype, prop["items"], f"{child}[]", seen)


def _annotate_structure(schemas: Obj) -> None:
    """Publish what server-side apply reads beyond the strategic-merge annotations, as upstream does: each merging
    list's type and keys (and their defaults), atomic structs and maps."""
    for name, definition in schemas.items():
        if name in structure.ATOMIC_TYPES:
            definition["x-kubernetes-map-type"] = "atomic"
        for field, prop in (definition.get("properties") or {}).items():
            if not isinstance(prop, dict):
                continue
            if (name, field) in structure.ATOMIC_FIELDS:
                prop["x-kubernetes-map-type"] = "atomic"
            if prop.get("type") != "array":
                continue
            list_type, keys = structure.LIST_TYPES.get((name, field), (None, ()))
            merge_key = prop.get("x-kubernetes-patch-merge-key")
            if list_type is None and isinstance(merge_key, str):
                list_type, keys = "map", (merge_key,)
            if list_type is None:
                continue
            prop["x-kubernetes-list-type"] = list_type
            if keys:
                prop["x-kubernetes-list-map-keys"] = list(keys)
                _default_keys(schemas, prop, keys)


def _default_keys(schemas: Obj, prop: Obj, keys: tuple[str, ...]) -> None:
    """A list item without a key field is keyed by the field's default: its zero value unless upstream says."""
    item_ref = _target(schemas, prop.get("items") or {})
    item_name = next((n for n, d in schemas.items() if d is item_ref), "")
    for key in keys:
        field = (item_ref.get("properties") or {}).get(key)
        if not isinstance(field, dict) or "default" in field:
            continue
        zero = {"string": "", "integer": 0}.get(str(field.get("type")))
        default = structure.KEY_DEFAULTS.get((item_name, key), zero)
        if default is not None:
            field["default"] = default


def _merge_annotations(old: Any, new: Any) -> Any:
    """Two renderings of a shared definition: the same schema, each annotated along its own kind's paths."""
    if isinstance(old, dict) and isinstance(new, dict):
        merged = dict(old)
        for key, value in new.items():
            merged[key] = _merge_annotations(old[key], value) if key in old else value
        return merged
    return old


def _add(schemas: Obj, additions: Obj) -> None:
    for key, value in additions.items():
        existing = schemas.get(key)
        schemas[key] = value if existing is None else _merge_annotations(existing, value)


def _builtin_definitions(rtype: ResourceType, model: str, schemas: Obj) -> tuple[str, str]:
    """Add a built-in kind's definitions and its list's to ``schemas``; (kind name, list name)."""
    name = definition_name(model)
    kind_schemas = json.loads(_model_definitions(model))
    _annotate_lists(kind_schemas, rtype, kind_schemas[name], "", frozenset())
    _annotate_structure(kind_schemas)
    kind_schemas[name]["x-kubernetes-group-version-kind"] = [_gvk(rtype)]
    _add(schemas, kind_schemas)
    list_model = f"{model}List"
    if not _has_model(list_model):
        return name, name
    list_schemas = json.loads(_model_definitions(list_model))
    list_name = definition_name(list_model)
    list_schemas[list_name]["x-kubernetes-group-version-kind"] = [_gvk(rtype, rtype.list_kind)]
    _add(schemas, list_schemas)
    return name, list_name


_TYPE_META: Final[Obj] = {
    "apiVersion": {
        "description": "The versioned schema of this representation of an object, e.g. group/version.",
        "type": "string",
    },
    "kind": {"description": "The REST resource this object represents, in CamelCase.", "type": "string"},
}


def _custom_definitions(rtype: ResourceType, schemas: Obj) -> tuple[str, str]:
    """Add a CRD kind's schema and its list's to ``schemas``; (kind name, list name)."""
    _add(schemas, json.loads(_model_definitions("V1ObjectMeta")))
    _add(schemas, json.loads(_model_definitions("V1ListMeta")))
    name = crd_definition_name(rtype.group, rtype.version, rtype.kind)
    schema: Obj = (
        copy.deepcopy(rtype.schema) if rtype.schema else {"x-kubernetes-preserve-unknown-fields": True}
    )
    schema.setdefault("type", "object")
    properties = schema.setdefault("properties", {})
    properties.update(copy.deepcopy(_TYPE_META))
    # Upstream serves ObjectMeta's schema in place of whatever the CRD says about metadata.
    properties["metadata"] = _wrapped(
        definition_name("V1ObjectMeta"), {"description": "Standard object's metadata."}
    )
    schema["x-kubernetes-group-version-kind"] = [_gvk(rtype)]
    schemas[name] = schema
    schemas[f"{name}List"] = {
        "description": f"A list of {rtype.plural}.",
        "properties": {
            **copy.deepcopy(_TYPE_META),
            "items": {"description": f"The {rtype.plural}.", "items": _ref(name), "type": "array"},
            "metadata": _wrapped(definition_name("V1ListMeta"), {"description": "Standard list metadata."}),
        },
        "required": ["items"],
        "type": "object",
        "x-kubernetes-group-version-kind": [_gvk(rtype, rtype.list_kind)],
    }
    return name, f"{name}List"


def _definitions_for(rtype: ResourceType, schemas: Obj) -> tuple[str, str]:
    if rtype.schema is None and rtype.model is not None and _has_model(rtype.model):
        return _builtin_definitions(rtype, rtype.model, schemas)
    return _custom_definitions(rtype, schemas)


@functools.lru_cache(maxsize=64)
def _structure(signature: tuple[ResourceType, str]) -> structure.Node:
    schemas: Obj = {}
    name, _ = _definitions_for(signature[0], schemas)
    for scalar, definition in _SCALAR_DEFINITIONS.items():
        schemas.setdefault(scalar, definition)
    return structure.Schema(schemas).root(name)


def kind_structure(rtype: ResourceType) -> structure.Node:
    """The kind's schema as server-side apply reads it: built from the definitions this server publishes."""
    return _structure(signature([rtype])[0])


# --- paths --------------------------------------------------------------------------------------------------


def _query(name: str, kind: str, description: str) -> Obj:
    return {
        "description": description,
        "in": "query",
        "name": name,
        "schema": {"type": kind, "uniqueItems": True},
    }


def _path_parameter(name: str, description: str) -> Obj:
    schema = {"type": "string", "uniqueItems": True}
    return {"description": description, "in": "path", "name": name, "required": True, "schema": schema}


_PRETTY: Final = _query("pretty", "string", "If 'true', the output is pretty printed.")
_NAMESPACE: Final = _path_parameter("namespace", "The namespace of the objects.")
_NAME: Final = _path_parameter("name", "The name of the object.")
_DRY_RUN: Final = _query("dryRun", "string", "When All, the request is validated but nothing is persisted.")
# kubectl create/apply look for fieldValidation on the kind's PATCH operation (not on the path) and, when it is
# declared, send ?fieldValidation=Strict instead of validating against the schemas themselves.
_WRITE: Final = (
    _DRY_RUN,
    _query("fieldManager", "string", "The name of the actor making these changes, for field ownership."),
    _query(
        "fieldValidation",
        "string",
        "How the server treats unknown or duplicate fields in the body: Ignore drops them silently, Warn "
        "drops them with a warning header (the default), Strict rejects the request.",
    ),
)
_FORCE: Final = _query("force", "boolean", "Server-side apply only: take over fields other managers own.")
_LIST: Final = (
    _query("allowWatchBookmarks", "boolean", "Ask a watch for BOOKMARK events."),
    _query("continue", "string", "The continue token of the previous page of a paginated list."),
    _query("fieldSelector", "string", "Only objects whose fields match, e.g. metadata.name=x."),
    _query("labelSelector", "string", "Only objects whose labels match."),
    _query("limit", "integer", "At most this many objects; the list's metadata.continue fetches the rest."),
    _query("resourceVersion", "string", "Which version of the collection to list or watch from."),
    _query("resourceVersionMatch", "string", "How resourceVersion constrains a list: Exact or NotOlderThan."),
    _query("sendInitialEvents", "boolean", "Start a watch with the current objects, then a BOOKMARK."),
    _query("timeoutSeconds", "integer", "End the list or watch after this many seconds."),
    _query("watch", "boolean", "Stream changes instead of listing."),
)
_DELETE: Final = (
    _DRY_RUN,
    _query("gracePeriodSeconds", "integer", "Seconds before the object is deleted; 0 deletes at once."),
    _query("orphanDependents", "boolean", "Deprecated: use propagationPolicy."),
    _query("propagationPolicy", "string", "What happens to dependents: Orphan, Background or Foreground."),
)
_LOG: Final = (
    _query("container", "string", "The container to read; may be omitted when the pod has one."),
    _query("follow", "boolean", "Keep the stream open and follow the log."),
    _query("limitBytes", "integer", "Stop after this many bytes."),
    _query("previous", "boolean", "The log of the previous, terminated instance of the container."),
    _query("sinceSeconds", "integer", "Only lines newer than this many seconds."),
    _query("tailLines", "integer", "Only this many lines from the end."),
    _query("timestamps", "boolean", "Prefix every line with its RFC 3339 timestamp."),
)
# Custom resources take no strategic merge patch upstream: it needs patch metadata their schemas lack.
_PATCH_TYPES: Final = ("application/json-patch+json", "application/merge-patch+json")
_STRATEGIC_PATCH: Final = "application/strategic-merge-patch+json"

_OK: Final = (("200", "OK"),)
_CREATED: Final = (("200", "OK"), ("201", "Created"), ("202", "Accepted"))
_REPLACED: Final = (("200", "OK"), ("201", "Created"))
_DELETED: Final = (("200", "OK"), ("202", "Accepted"))
# Placeholders an _Op uses for the resource's own definitions and for a plain-text answer.
_KIND: Final = "<kind>"
_LIST_KIND: Final = "<list>"
_TEXT: Final = "<text>"


@dataclasses.dataclass(frozen=True)
class _Op:
    action: str  # x-kubernetes-action
    verb: str  # the operationId's first word
    description: str
    parameters: tuple[Obj, ...] = ()
    body: str | None = None  # the request body's definition, _KIND, or _PATCH
    responses: tuple[tuple[str, str], ...] = _OK
    response: str = _KIND  # the answer's definition, _KIND, _LIST_KIND or _TEXT


def _collection_ops(kind: str) -> dict[str, _Op]:
    return {
        "get": _Op("list", "list", f"list or watch objects of kind {kind}", _LIST, response=_LIST_KIND),
        "post": _Op("post", "create", f"create a {kind}", _WRITE, _KIND, _CREATED),
        "delete": _Op(
            "deletecollection",
            "deleteCollection",
            f"delete collection of {kind}",
            (*_DELETE, *_LIST),
            _DELETE_OPTIONS,
            response=_STATUS,
        ),
    }


def _object_ops(what: str, deletable: bool) -> dict[str, _Op]:
    """Operations on one object or on one of its subresources (``what`` says which, for descriptions)."""
    ops = {
        "get": _Op("get", "read", f"read {what}"),
        "put": _Op("put", "replace", f"replace {what}", _WRITE, _KIND, _REPLACED),
        "patch": _Op("patch", "patch", f"partially update {what}", (*_WRITE, _FORCE), _PATCH, _REPLACED),
    }
    if deletable:
        ops["delete"] = _Op("delete", "delete", f"delete {what}", _DELETE, _DELETE_OPTIONS, _DELETED, _STATUS)
    return ops


def _group_prefix(rtype: ResourceType) -> str:
    """``Core``, ``Batch``, ``Coordination``, ``ExampleCom``: how upstream names a group in operationIds."""
    if not rtype.group:
        return "Core"
    return "".join(label.capitalize() for label in rtype.group.removesuffix(".k8s.io").split("."))


def _content(ref: str) -> Obj:
    if ref == _TEXT:
        return {"text/plain": {"schema": {"type": "string"}}}
    return {"application/json": {"schema": _ref(ref)}}


def _operation(rtype: ResourceType, op: _Op, refs: dict[str, str], operation_id: str) -> Obj:
    answer = refs.get(op.response, op.response)
    responses: Obj = {code: {"content": _content(answer), "description": text} for code, text in op.responses}
    responses["401"] = {"description": "Unauthorized"}
    operation: Obj = {
        "description": op.description,
        "operationId": operation_id,
        "responses": responses,
        "tags": [f"{_group_prefix(rtype).lower()}_{rtype.version}"],
        "x-kubernetes-action": op.action,
        # An object here, a list on schemas: kubectl's fieldValidation check reads it this way.
        "x-kubernetes-group-version-kind": _gvk(rtype),
    }
    if op.parameters:
        operation["parameters"] = [dict(p) for p in op.parameters]
    if op.body == _PATCH:
        types = (*_PATCH_TYPES, _STRATEGIC_PATCH) if rtype.schema is None else _PATCH_TYPES
        operation["requestBody"] = {"content": {t: {"schema": _ref(_PATCH)} for t in types}, "required": True}
    elif op.body is not None:
        schema = _ref(refs.get(op.body, op.body))
        operation["requestBody"] = {"content": {"*/*": {"schema": schema}}, "required": op.body == _KIND}
    return operation


def _path_item(
    rtype: ResourceType,
    ops: dict[str, _Op],
    parameters: list[Obj],
    refs: dict[str, str],
    scope: str,
    suffix: str,
) -> Obj:
    item: Obj = {"parameters": [dict(p) for p in parameters]}
    for method, op in ops.items():
        operation_id = (
            f"{op.verb}{_group_prefix(rtype)}{rtype.version.capitalize()}{scope}{rtype.kind}{suffix}"
        )
        item[method] = _operation(rtype, op, refs, operation_id)
    return item


def _paths(rtype: ResourceType, kind_ref: str, list_ref: str) -> Obj:
    """Every path and operation of one resource and its subresources, laid out as upstream does."""
    refs = {_KIND: kind_ref, _LIST_KIND: list_ref}
    scope = "Namespaced" if rtype.namespaced else ""
    scoped = [_NAMESPACE] if rtype.namespaced else []
    collection = rtype.path("{namespace}") if rtype.namespaced else rtype.path()
    item = f"{collection}/{{name}}"
    named = [_NAME, *scoped, _PRETTY]
    if rtype.verbs == CREATE_ONLY:
        create = {"post": _collection_ops(rtype.kind)["post"]}
        return {collection: _path_item(rtype, create, [*scoped, _PRETTY], refs, scope, "")}
    paths: Obj = {
        collection: _path_item(rtype, _collection_ops(rtype.kind), [*scoped, _PRETTY], refs, scope, ""),
        item: _path_item(rtype, _object_ops(f"the specified {rtype.kind}", True), named, refs, scope, ""),
    }
    if rtype.namespaced:
        every = {"get": _collection_ops(rtype.kind)["get"]}
        paths[rtype.path()] = _path_item(rtype, every, [_PRETTY], refs, "", "ForAllNamespaces")
    for sub in rtype.subresources:
        if sub == "log":
            ops = {"get": _Op("get", "read", f"read log of the specified {rtype.kind}", _LOG, response=_TEXT)}
        else:
            ops = _object_ops(f"{sub} of the specified {rtype.kind}", deletable=False)
        paths[f"{item}/{sub}"] = _path_item(rtype, ops, named, refs, scope, sub.capitalize())
    return paths


# --- rendering, caching, serving ----------------------------------------------------------------------------

# (type, its schema as JSON): a ResourceType's equality ignores its schema, a document's must not.
Signature = tuple[tuple[ResourceType, str], ...]


@dataclasses.dataclass(frozen=True)
class Rendered:
    """A group version's document as served, and its hash: uppercase hex SHA-512 of the bytes, as upstream's."""

    body: bytes
    etag: str


def signature(types: Iterable[ResourceType]) -> Signature:
    pairs = ((t, json.dumps(t.schema, sort_keys=True)) for t in types)
    return tuple(sorted(pairs, key=lambda pair: (pair[0].plural, pair[0].kind, pair[1])))


# How a client authenticates: the same in v3 (securitySchemes) and v2 (securityDefinitions).
SECURITY_SCHEMES: Final[Obj] = {
    "BearerToken": {
        "description": "Bearer Token authentication",
        "in": "header",
        "name": "authorization",
        "type": "apiKey",
    }
}


@functools.lru_cache(maxsize=64)
def _components_json(signature: Signature) -> str:
    schemas: Obj = {}
    paths: Obj = {}
    for rtype, _ in signature:
        kind_ref, list_ref = _definitions_for(rtype, schemas)
        paths.update(_paths(rtype, kind_ref, list_ref))
    _add(schemas, json.loads(_model_definitions("V1Status")))
    _add(schemas, json.loads(_model_definitions("V1DeleteOptions")))
    used = json.dumps([schemas, paths])
    for name, definition in _SCALAR_DEFINITIONS.items():
        if f'"{_REF}{name}"' in used:
            schemas[name] = copy.deepcopy(definition)
    return json.dumps([dict(sorted(schemas.items())), dict(sorted(paths.items()))])


def components(types: Iterable[ResourceType]) -> tuple[Obj, Obj]:
    """(schemas, paths) of the v3 document of ``types``, fresh copies: what the v2 document is made from too."""
    schemas, paths = json.loads(_components_json(signature(types)))
    return schemas, paths


@functools.lru_cache(maxsize=64)
def _render(signature: Signature) -> Rendered:
    schemas, paths = json.loads(_components_json(signature))
    document = {
        "components": {"schemas": schemas, "securitySchemes": SECURITY_SCHEMES},
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "openapi": "3.0.0",
        "paths": paths,
    }
    body = json.dumps(document, separators=(",", ":")).encode()
    return Rendered(body, hashlib.sha512(body).hexdigest().upper())


def _group_version_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def rendered_document(types: Iterable[ResourceType], group: str, version: str) -> Rendered | None:
    """The served bytes and hash of one group version's document; None when the server has no such version."""
    selected = [t for t in types if t.group == group and t.version == version]
    return _render(signature(selected)) if selected else None


def openapi_v3_document(types: Iterable[ResourceType], group: str, version: str) -> Obj | None:
    """The OpenAPI v3 document of one group version, a fresh copy; None when it is not served."""
    rendered = rendered_document(types, group, version)
    if rendered is None:
        return None
    document: Obj = json.loads(rendered.body)
    return document


def server_relative_url(group_version_path: str, etag: str) -> str:
    return f"/openapi/v3/{group_version_path}?hash={etag}"


def openapi_v3_index(types: Iterable[ResourceType]) -> Obj:
    """GET /openapi/v3: each group version's document URL, carrying the hash of its current content.

    kubectl caches documents by that URL, so the URL changes whenever the document does.
    """
    by_path: dict[str, list[ResourceType]] = {}
    for rtype in types:
        by_path.setdefault(_group_version_path(rtype.group, rtype.version), []).append(rtype)
    return {
        "paths": {
            path: {"serverRelativeURL": server_relative_url(path, _render(signature(selected)).etag)}
            for path, selected in sorted(by_path.items())
        }
    }


@dataclasses.dataclass(frozen=True)
class Reply:
    """The answer to an /openapi/v3 request; ``body`` is empty for 301, 304 and 406."""

    status: int
    headers: dict[str, str]
    body: bytes = b""


def _accepts_json(accept: str) -> bool:
    if not accept.strip():
        return True
    media = (clause.split(";", 1)[0].strip().lower() for clause in accept.split(","))
    return any(m in ("application/json", "application/*", "*/*") for m in media)


def matches_etag(if_none_match: str | None, etag: str) -> bool:
    """Whether an If-None-Match header names ``etag`` (or ``*``): the client's copy is current."""
    if not if_none_match:
        return False
    candidates = [c.strip().removeprefix("W/").strip('"') for c in if_none_match.split(",")]
    return "*" in candidates or etag in candidates


def openapi_v3_reply(
    types: Iterable[ResourceType],
    path: str,
    *,
    now: datetime,
    hash_param: str | None = None,
    accept: str = "",
    if_none_match: str | None = None,
) -> Reply | None:
    """The answer to GET /openapi/v3 (``path`` "") or /openapi/v3/{path}; None for a group version not served.

    Upstream's caching contract, which kubectl's HTTP cache relies on: every answer has an ETag and honours
    If-None-Match (304); a document fetched by the index's ``?hash=`` URL is immutable for a year; a stale hash
    is redirected (301) to the current URL. Only JSON is served: a client accepting only protobuf gets 406.
    """
    listed = list(types)
    path = path.strip("/")
    if not path:
        body = json.dumps(openapi_v3_index(listed), separators=(",", ":")).encode()
        etag = hashlib.sha512(body).hexdigest().upper()
        headers = {"Content-Type": "application/json", "ETag": f'"{etag}"'}
        return Reply(304, headers) if matches_etag(if_none_match, etag) else Reply(200, headers, body)
    parts = path.split("/")
    if parts[0] == "api" and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[0] == "apis" and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        return None
    rendered = rendered_document(listed, group, version)
    if rendered is None:
        return None
    if not _accepts_json(accept):
        return Reply(406, {"Vary": "Accept"})
    if hash_param and hash_param != rendered.etag:
        return Reply(301, {"Location": server_relative_url(path, rendered.etag), "Vary": "Accept"})
    headers = {"Content-Type": "application/json", "ETag": f'"{rendered.etag}"', "Vary": "Accept"}
    if hash_param:
        headers["Cache-Control"] = "public, immutable"
        headers["Expires"] = email.utils.format_datetime(now + timedelta(days=365), usegmt=True)
    if matches_etag(if_none_match, rendered.etag):
        return Reply(304, headers)
    return Reply(200, headers, rendered.body)
