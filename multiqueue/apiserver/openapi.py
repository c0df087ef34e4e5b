"""OpenAPI v3 documents, so ``kubectl create``, ``apply`` and ``explain`` work with their default settings.

kubectl reads /openapi/v3 (an index of group-version documents, each URL carrying a content hash), then the
document of the group version it needs:

- ``explain`` finds the kind by ``x-kubernetes-group-version-kind`` in ``components.schemas`` and walks its
  properties, so schemas keep upstream's definition names and descriptions;
- ``create``/``apply`` look for the ``fieldValidation`` parameter on the kind's PATCH operation; when it is there
  they send ``?fieldValidation=Strict`` and leave validation to the server, otherwise they fall back to
  client-side validation.

kubectl 1.27 and 1.28 read /openapi/v2 instead, made from the same definitions and operations (openapi_v2.py).

Built-in kinds' schemas are generated from the official client's pydantic models (fields, types, references,
``required``, descriptions); what the models lose (upstream's definition names, formats, ``x-kubernetes-*``
extensions such as list types, map keys and patch merge keys, quantities and micro-times typed by reference) comes
from openapi_facts.json, written from the pinned release by hack/openapi_facts.py. A CRD's kinds use its
openAPIV3Schema. Paths are laid out as upstream's: parameters every operation of a path takes sit on the path,
and each group version has its own resource list. Generating a document is slow, so each is rendered once per set
of types and cached with its hash. The hash is over the rendered bytes, as upstream's: a change in the generator moves it too, so clients
holding "immutable" copies fetch again.
"""

from __future__ import annotations

import copy
import dataclasses
import email.utils
import functools
import hashlib
import json
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

import kubernetes.client.models as models

from multiqueue.api.types import Obj
from multiqueue.apiserver.discovery import KUBERNETES_VERSION
from multiqueue.apiserver.resources import CREATE_ONLY, ResourceType
from multiqueue.apiserver.rules import schemas as structure

_REF: Final = "#/components/schemas/"
_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1"
INT_OR_STRING: Final = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY: Final = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_PATCH: Final = f"{_META}.Patch"
_STATUS: Final = f"{_META}.Status"
_DELETE_OPTIONS: Final = f"{_META}.DeleteOptions"
# The documents' info.version: the release's major.minor, as upstream's.
INFO_VERSION: Final = ".".join(KUBERNETES_VERSION)
_RESOURCE_LIST: Final = f"{_META}.APIResourceList"
_META_KINDS: Final = (
    _STATUS,
    _RESOURCE_LIST,
    f"{_META}.APIVersions",
    f"{_META}.APIGroupList",
    f"{_META}.APIGroup",
)
# A custom group version's document is apiextensions-apiserver's, which says so.
_CUSTOM_INFO: Final = {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"}

# What the client's models lose of upstream's schemas, from the pinned release (hack/openapi_facts.py): each
# definition's name and model, formats, x-kubernetes-* extensions, references to types the client keeps as plain
# values, and the shape of definitions the client has no model of.
FACTS: Final = Path(__file__).with_name("openapi_facts.json")
_MODEL_ONLY: Final = ("model", "properties")


@functools.cache
def _facts() -> dict[str, Obj]:
    facts: dict[str, Obj] = json.loads(FACTS.read_text())
    return facts


@functools.cache
def _scalar_definitions() -> dict[str, Obj]:
    """The definitions the client has no model of (Time, Quantity, IntOrString, FieldsV1, ...): upstream's shape."""
    return {
        name: {k: v for k, v in facts.items() if k not in _MODEL_ONLY}
        for name, facts in _facts().items()
        if facts["model"] is None
    }


@functools.cache
def _definition_names() -> dict[str, str]:
    return {entry["model"]: name for name, entry in _facts().items() if entry["model"]}


def definition_name(model: str) -> str:
    """The upstream definition name of a client model: ``V1JobSpec`` -> ``io.k8s.api.batch.v1.JobSpec``.

    kubectl explain shows the part after the last dot as a field's type, so these keep upstream's names. A model
    the served kinds do not reach keeps its own name.
    """
    return _definition_names().get(model, model)


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


def _convert(node: Any) -> Any:
    """One pydantic JSON-schema node into the OpenAPI shape upstream publishes."""
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
    if sorted(map(str, types)) == ["integer", "number"]:
        return {"type": "number"}
    if types and all(t == "string" for t in types):
        # Secret data: raw bytes or text, base64 on the wire.
        return {"format": "byte", "type": "string"}
    return {"anyOf": options}


def _with_facts(node: Obj, facts: Obj) -> Obj:
    """A converted property with upstream's facts on it: a reference where the client has a plain value (a
    quantity, a micro-time), formats and extensions, and the same for its items and values."""
    if "ref" in facts:
        described = facts.get("described", True)
        node = _wrapped(facts["ref"], {k: v for k, v in node.items() if k == "description" and described})
    for key, value in facts.items():
        if key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                node[key] = _with_facts(node[key], value)
        elif key not in ("ref", "described"):
            node[key] = value
    return node


def _convert_model(model: str, schema: Obj) -> Obj:
    facts = _facts().get(definition_name(model), {})
    known = facts.get("properties", {})
    converted: Obj = {}
    for key, value in schema.items():
        if key in ("title", "$defs") or (key == "additionalProperties" and value is False):
            continue
        if key == "properties":
            converted[key] = {
                name: _with_facts(_convert(p), known.get(name, {})) for name, p in value.items()
            }
        else:
            converted[key] = _description(value) if key == "description" else _convert(value)
    converted.update({k: v for k, v in facts.items() if k not in _MODEL_ONLY})
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


def _default_list_keys(schemas: Obj) -> None:
    """Give the key fields of keyed lists' items a default, which server-side apply keys an item without them by:
    its zero value unless upstream says."""
    for definition in schemas.values():
        for prop in (definition.get("properties") or {}).values():
            keys = prop.get("x-kubernetes-list-map-keys") if isinstance(prop, dict) else None
            if keys:
                _default_keys(schemas, prop, tuple(keys))


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


def _add(schemas: Obj, additions: Obj) -> None:
    """Definitions another kind may have added already, each the same whichever kind needs it."""
    for key, value in additions.items():
        schemas.setdefault(key, value)


def _builtin_definitions(rtype: ResourceType, model: str, schemas: Obj) -> tuple[str, str]:
    """Add a built-in kind's definitions and its list's to ``schemas``; (kind name, list name)."""
    name = definition_name(model)
    kind_schemas = json.loads(_model_definitions(model))
    _default_list_keys(kind_schemas)
    _add(schemas, kind_schemas)
    schemas[name]["x-kubernetes-group-version-kind"] = [_gvk(rtype)]
    list_model = f"{model}List"
    if not _has_model(list_model):
        return name, name
    list_name = definition_name(list_model)
    _add(schemas, json.loads(_model_definitions(list_model)))
    schemas[list_name]["x-kubernetes-group-version-kind"] = [_gvk(rtype, rtype.list_kind)]
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
    for scalar, definition in _scalar_definitions().items():
        schemas.setdefault(scalar, copy.deepcopy(definition))
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
_WATCH_ONLY: Final = ("allowWatchBookmarks", "watch")
_RESOURCE_VERSION: Final = _query("resourceVersion", "string", "Which version of the object to read.")
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
# Server-side apply, JSON and merge patches; custom resources take no strategic merge patch upstream: it needs
# patch metadata their schemas lack.
_PATCH_TYPES: Final = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
)
_STRATEGIC_PATCH: Final = "application/strategic-merge-patch+json"
# What custom resources' creates, replaces and deletes take, by name (built-in kinds say */*).
_CUSTOM_BODIES: Final = ("application/json", "application/yaml")

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
    collection: bool = False  # the operationId says Collection after the group version


def _collection_ops(rtype: ResourceType) -> dict[str, _Op]:
    kind = rtype.kind
    ops = {
        "get": _Op("list", "list", f"list or watch objects of kind {kind}", _LIST, response=_LIST_KIND),
        "post": _Op("post", "create", f"create a {kind}", _WRITE, _KIND, _CREATED),
    }
    if "deletecollection" in rtype.verbs and is_custom(rtype):
        # apiextensions-apiserver's layout: the list's parameters, no body.
        ops["delete"] = _Op(
            "deletecollection",
            "delete",
            f"delete collection of {kind}",
            _LIST,
            response=_STATUS,
            collection=True,
        )
    elif "deletecollection" in rtype.verbs:
        chosen = (*_DELETE, *(p for p in _LIST if p["name"] not in _WATCH_ONLY))
        ops["delete"] = _Op(
            "deletecollection",
            "delete",
            f"delete collection of {kind}",
            tuple(sorted(chosen, key=lambda p: str(p["name"]))),
            _DELETE_OPTIONS,
            response=_STATUS,
            collection=True,
        )
    return ops


def is_custom(rtype: ResourceType) -> bool:
    """A kind a CRD defines: its documents are laid out as apiextensions-apiserver lays them out."""
    return rtype.schema is not None or rtype.model is None


def _object_ops(rtype: ResourceType, what: str, deletable: bool) -> dict[str, _Op]:
    """Operations on one object or on one of its subresources (``what`` says which, for descriptions)."""
    read = (_RESOURCE_VERSION,) if is_custom(rtype) else ()
    ops = {
        "get": _Op("get", "read", f"read {what}", read),
        "put": _Op("put", "replace", f"replace {what}", _WRITE, _KIND, _REPLACED),
        "patch": _Op("patch", "patch", f"partially update {what}", (*_WRITE, _FORCE), _PATCH, _REPLACED),
    }
    if deletable:
        ops["delete"] = _Op("delete", "delete", f"delete {what}", _DELETE, _DELETE_OPTIONS, _DELETED, _STATUS)
    return ops


def _group_prefix(rtype: ResourceType) -> str:
    return _group_name(rtype.group)


def _group_name(group: str) -> str:
    """``Core``, ``Batch``, ``RbacAuthorization``, ``ExampleCom``: how upstream names a group in operationIds."""
    if not group:
        return "Core"
    return "".join(label.capitalize() for label in group.removesuffix(".k8s.io").split("."))


def _tag(group: str) -> str:
    """The group in operations' tags: ``core``, ``batch``, ``rbacAuthorization``."""
    name = _group_name(group)
    return name[0].lower() + name[1:]


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
        "tags": [f"{_tag(rtype.group)}_{rtype.version}"],
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
        media = _CUSTOM_BODIES if is_custom(rtype) else ("*/*",)
        operation["requestBody"] = {
            "content": {m: {"schema": schema} for m in media},
            "required": op.body == _KIND,
        }
    return operation


def _group_version_root(rtype: ResourceType) -> str:
    return f"/apis/{rtype.group}/{rtype.version}/" if rtype.group else f"/api/{rtype.version}/"


def _resources_path_item(rtype: ResourceType) -> Obj:
    """The group version's own path: its discovery document (APIResourceList)."""
    responses = {
        "200": {"content": _content(_RESOURCE_LIST), "description": "OK"},
        "401": {"description": "Unauthorized"},
    }
    operation_id = f"get{_group_prefix(rtype)}{rtype.version.capitalize()}APIResources"
    tags = [f"{_tag(rtype.group)}_{rtype.version}"]
    return {
        "get": {
            "description": "get available resources",
            "operationId": operation_id,
            "responses": responses,
            "tags": tags,
        }
    }


def _path_item(
    rtype: ResourceType,
    ops: dict[str, _Op],
    parameters: list[Obj],
    refs: dict[str, str],
    scope: str,
    suffix: str,
) -> Obj:
    item: Obj = {}
    for method, op in ops.items():
        collection = "Collection" if op.collection else ""
        group_version = f"{_group_prefix(rtype)}{rtype.version.capitalize()}"
        operation_id = f"{op.verb}{group_version}{collection}{scope}{rtype.kind}{suffix}"
        item[method] = _operation(rtype, op, refs, operation_id)
    # As upstream lays a path out: the parameters every operation takes are the path's.
    shared = [p for p in item[next(iter(ops))].get("parameters", []) if _in_every(p, item.values())]
    for operation in item.values():
        kept = [p for p in operation.pop("parameters", []) if p not in shared]
        if kept:
            operation["parameters"] = kept
    every = sorted([*(dict(p) for p in parameters), *shared], key=lambda p: str(p["name"]))
    return {"parameters": every, **item}


def _in_every(parameter: Obj, operations: Iterable[Obj]) -> bool:
    return all(parameter in operation.get("parameters", []) for operation in operations)


# Served but left out of the documents: its body is another group's kind (policy/v1 Eviction), whose definition
# is not generated; clients (kubectl drain) post it without reading the schema.
UNPUBLISHED_SUBRESOURCES: Final = frozenset({"eviction"})


def _paths(rtype: ResourceType, kind_ref: str, list_ref: str) -> Obj:
    """Every path and operation of one resource and its subresources, laid out as upstream does."""
    refs = {_KIND: kind_ref, _LIST_KIND: list_ref}
    scope = "Namespaced" if rtype.namespaced else ""
    scoped = [_NAMESPACE] if rtype.namespaced else []
    collection = rtype.path("{namespace}") if rtype.namespaced else rtype.path()
    item = f"{collection}/{{name}}"
    named = [_NAME, *scoped, _PRETTY]
    if rtype.verbs == CREATE_ONLY:
        create = {"post": _collection_ops(rtype)["post"]}
        return {collection: _path_item(rtype, create, [*scoped, _PRETTY], refs, scope, "")}
    paths: Obj = {
        collection: _path_item(rtype, _collection_ops(rtype), [*scoped, _PRETTY], refs, scope, ""),
        item: _path_item(
            rtype, _object_ops(rtype, f"the specified {rtype.kind}", True), named, refs, scope, ""
        ),
    }
    if rtype.namespaced:
        every = {"get": _collection_ops(rtype)["get"]}
        paths[rtype.path()] = _path_item(rtype, every, [_PRETTY], refs, "", "ForAllNamespaces")
    for sub in rtype.subresources:
        if sub in UNPUBLISHED_SUBRESOURCES:
            continue
        if sub == "log":
            ops = {"get": _Op("get", "read", f"read log of the specified {rtype.kind}", _LOG, response=_TEXT)}
        elif sub == "finalize":
            ops = {"put": _object_ops(rtype, f"{sub} of the specified {rtype.kind}", deletable=False)["put"]}
        else:
            ops = _object_ops(rtype, f"{sub} of the specified {rtype.kind}", deletable=False)
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
    roots: dict[tuple[str, str], ResourceType] = {}
    for rtype, _ in signature:
        kind_ref, list_ref = _definitions_for(rtype, schemas)
        paths.update(_paths(rtype, kind_ref, list_ref))
        if not is_custom(rtype):
            roots.setdefault((rtype.group, rtype.version), rtype)
    for rtype in roots.values():
        paths[_group_version_root(rtype)] = _resources_path_item(rtype)
    for model in ("V1Status", "V1DeleteOptions", "V1APIResourceList"):
        _add(schemas, json.loads(_model_definitions(model)))
    # Every group version with a delete takes DeleteOptions in its own version too.
    deleting = sorted({(t.group, t.version) for t, _ in signature if t.group and "delete" in t.verbs})
    schemas[_DELETE_OPTIONS]["x-kubernetes-group-version-kind"] = [
        {"group": group, "kind": "DeleteOptions", "version": version}
        for group, version in [("", "v1"), *deleting]
    ]
    _tag_meta_kinds(schemas)
    used = json.dumps([schemas, paths])
    for name, definition in _scalar_definitions().items():
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
    custom = all(is_custom(rtype) for rtype, _ in signature)
    document = {
        "components": {"schemas": schemas, "securitySchemes": SECURITY_SCHEMES},
        "info": _CUSTOM_INFO if custom else {"title": "Kubernetes", "version": INFO_VERSION},
        "openapi": "3.0.0",
        "paths": paths,
    }
    body = json.dumps(document, separators=(",", ":")).encode()
    return Rendered(body, hashlib.sha512(body).hexdigest().upper())


def _tag_meta_kinds(schemas: Obj) -> None:
    """The meta.k8s.io kinds a server answers with carry their kind (in the core group), as upstream's do."""
    for name in _META_KINDS:
        if name in schemas:
            kind = name.rsplit(".", 1)[1]
            schemas[name]["x-kubernetes-group-version-kind"] = [{"group": "", "kind": kind, "version": "v1"}]


def _group_version_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


@functools.lru_cache(maxsize=64)
def _discovery_json(path: str) -> str:
    """(schemas, paths) of ``api``, ``apis`` or ``apis/{group}``: the one operation that answers discovery there."""
    if path == "api":
        what, operation_id, tag, model = (
            "get available API versions",
            "getCoreAPIVersions",
            "core",
            "V1APIVersions",
        )
    elif path == "apis":
        what, operation_id, tag, model = (
            "get available API versions",
            "getAPIVersions",
            "apis",
            "V1APIGroupList",
        )
    else:
        group = path.removeprefix("apis/")
        what, operation_id, tag = (
            "get information of a group",
            f"get{_group_name(group)}APIGroup",
            _tag(group),
        )
        model = "V1APIGroup"
    responses = {
        "200": {"content": _content(definition_name(model)), "description": "OK"},
        "401": {"description": "Unauthorized"},
    }
    operation = {"description": what, "operationId": operation_id, "responses": responses, "tags": [tag]}
    schemas = json.loads(_model_definitions(model))
    _tag_meta_kinds(schemas)
    return json.dumps([schemas, {f"/{path}/": {"get": operation}}])


def discovery_components(types: Iterable[ResourceType]) -> tuple[Obj, Obj]:
    """(schemas, paths) of every discovery document of ``types``' roots and groups, for the v2 document."""
    schemas: Obj = {}
    paths: Obj = {}
    for path in _discovery_paths(list(types)):
        more_schemas, more_paths = json.loads(_discovery_json(path))
        schemas.update(more_schemas)
        paths.update(more_paths)
    return schemas, paths


@functools.lru_cache(maxsize=64)
def _render_discovery(path: str) -> Rendered:
    schemas, paths = json.loads(_discovery_json(path))
    document = {
        "components": {"schemas": schemas, "securitySchemes": SECURITY_SCHEMES},
        "info": {"title": "Kubernetes", "version": INFO_VERSION},
        "openapi": "3.0.0",
        "paths": paths,
    }
    body = json.dumps(document, separators=(",", ":")).encode()
    return Rendered(body, hashlib.sha512(body).hexdigest().upper())


def _discovery_paths(types: list[ResourceType]) -> list[str]:
    """The discovery documents the index lists: the roots', and each built-in group's (CRDs' groups have none)."""
    found = ["apis"]
    if any(not t.group for t in types):
        found.append("api")
    found += sorted({f"apis/{t.group}" for t in types if t.group and not is_custom(t)})
    return found


def _rendered_at(types: list[ResourceType], path: str) -> Rendered | None:
    """The document the index lists at ``path``; None when there is none."""
    parts = path.split("/")
    if parts[0] == "api" and len(parts) == 2:
        return rendered_document(types, "", parts[1])
    if parts[0] == "apis" and len(parts) == 3:
        return rendered_document(types, parts[1], parts[2])
    return _render_discovery(path) if path in _discovery_paths(types) else None


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
    listed = list(types)
    by_path: dict[str, list[ResourceType]] = {}
    for rtype in listed:
        by_path.setdefault(_group_version_path(rtype.group, rtype.version), []).append(rtype)
    etags = {path: _render(signature(selected)).etag for path, selected in by_path.items()}
    etags.update({path: _render_discovery(path).etag for path in _discovery_paths(listed)})
    return {
        "paths": {
            path: {"serverRelativeURL": server_relative_url(path, etags[path])} for path in sorted(etags)
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
    rendered = _rendered_at(listed, path)
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
