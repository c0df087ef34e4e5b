"""OpenAPI v3 documents, so ``kubectl create``, ``apply`` and ``explain`` work with their default validation.

Schemas come from the official client's pydantic models (one per built-in kind, descriptions included) or from a
CRD's openAPIV3Schema. Every POST, PUT and PATCH declares ``fieldValidation``: kubectl then leaves validation to
the server. Lists that merge by key carry ``x-kubernetes-patch-merge-key`` from the same table the server's
strategic merge uses, so ``kubectl apply`` computes the patches the server expects.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Iterable
from typing import Any, Final

import kubernetes.client.models as models

from multiqueue.api.patches import PRIMITIVE_SET, list_strategy
from multiqueue.local.apiserver.resources import ResourceType

Obj = dict[str, Any]
_REF_PREFIX: Final = "#/components/schemas/"
_WRITE_PARAMETERS: Final = [
    {"name": name, "in": "query", "schema": {"type": "string"}, "description": description}
    for name, description in (
        ("dryRun", "When present, indicates that modifications should not be persisted."),
        ("fieldManager", "A name associated with the actor or entity that is making these changes."),
        ("fieldValidation", "How the server treats unknown or duplicate fields: Ignore, Warn or Strict."),
    )
]


def _definition_name(model: str) -> str:
    """``V1JobSpec`` -> ``io.k8s.api.multiqueue.JobSpec``: kubectl shows the part after the last dot."""
    if model.startswith("io.k8s."):
        return model
    for prefix in ("CoreV1", "V2", "V1"):
        if model.startswith(prefix) and len(model) > len(prefix) and model[len(prefix)].isupper():
            return f"io.k8s.api.multiqueue.{model[len(prefix) :]}"
    return f"io.k8s.api.multiqueue.{model}"


def _clean(node: Any) -> Any:
    """Pydantic's JSON schema into the OpenAPI shape kubectl reads: no nullable anyOf, refs renamed."""
    if isinstance(node, list):
        return [_clean(item) for item in node]
    if not isinstance(node, dict):
        return node
    result = {k: _clean(v) for k, v in node.items() if k not in ("title", "default")}
    description = result.get("description")
    if isinstance(description, str) and "\n\nAttributes:" in description:
        # The client's model docstrings end with notes about its own Python attributes.
        result["description"] = description.split("\n\nAttributes:")[0]
    options = result.get("anyOf")
    if isinstance(options, list):
        concrete = [o for o in options if o != {"type": "null"}]
        if len(concrete) == 1:
            del result["anyOf"]
            result = {**concrete[0], **result}
    ref = result.get("$ref")
    if isinstance(ref, str):
        target = {"$ref": _REF_PREFIX + _definition_name(ref.rsplit("/", 1)[-1])}
        siblings = {k: v for k, v in result.items() if k != "$ref"}
        result = {**siblings, "allOf": [target]} if siblings else target
    if result.get("additionalProperties") is False:
        del result["additionalProperties"]
    return result


@functools.lru_cache(maxsize=64)
def _model_schemas(model: str) -> tuple[str, str]:
    """(definition name, JSON of every definition the model needs), cached: generating them is slow."""
    cls = getattr(models, model)
    schema = cls.model_json_schema(by_alias=True, ref_template=_REF_PREFIX + "{model}")
    definitions = {_definition_name(k): _clean(v) for k, v in schema.pop("$defs", {}).items()}
    definitions[_definition_name(model)] = _clean(schema)
    return _definition_name(model), json.dumps(definitions)


def _resolve(schemas: Obj, node: Obj) -> Obj:
    ref = node.get("$ref") or next(
        (a.get("$ref") for a in node.get("allOf", []) if isinstance(a, dict)), None
    )
    if isinstance(ref, str):
        return schemas.get(ref.removeprefix(_REF_PREFIX), {})  # type: ignore[no-any-return]
    return node


def _annotate_merge_keys(schemas: Obj, rtype: ResourceType, node: Obj, path: str, depth: int = 0) -> None:
    if depth > 12:
        return
    target = _resolve(schemas, node)
    for name, prop in (target.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        child = f"{path}.{name}" if path else name
        if prop.get("type") == "array":
            strategy = list_strategy(rtype.group, rtype.kind, child)
            if strategy is not None:
                prop["x-kubernetes-patch-strategy"] = "merge"
                if strategy != PRIMITIVE_SET:
                    prop["x-kubernetes-patch-merge-key"] = strategy
            items = prop.get("items")
            if isinstance(items, dict):
                _annotate_merge_keys(schemas, rtype, items, f"{child}[]", depth + 1)
        else:
            _annotate_merge_keys(schemas, rtype, prop, child, depth + 1)


def _gvk(rtype: ResourceType) -> list[Obj]:
    return [{"group": rtype.group, "version": rtype.version, "kind": rtype.kind}]


def _schemas_for(rtype: ResourceType, schemas: Obj) -> str:
    """Add the kind's schema (and what it references) to ``schemas``; returns its definition name."""
    if rtype.model is not None and hasattr(models, rtype.model):
        name, definitions = _model_schemas(rtype.model)
        schemas.update(json.loads(definitions))
    else:
        name = f"io.k8s.api.multiqueue.crd.{rtype.group}.{rtype.version}.{rtype.kind}"
        schema = copy.deepcopy(
            rtype.schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        )
        properties = schema.setdefault("properties", {})
        meta_name, meta_definitions = _model_schemas("V1ObjectMeta")
        schemas.update(json.loads(meta_definitions))
        properties["metadata"] = {"allOf": [{"$ref": _REF_PREFIX + meta_name}]}
        schemas[name] = schema
    schemas[name]["x-kubernetes-group-version-kind"] = _gvk(rtype)
    if rtype.model is not None:
        _annotate_merge_keys(schemas, rtype, schemas[name], "")
    return name


def _operation(rtype: ResourceType, action: str, ref: str, writes: bool) -> Obj:
    operation: Obj = {
        "operationId": f"{action}{rtype.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(rtype)[0],
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}
        },
    }
    if writes:
        operation["parameters"] = copy.deepcopy(_WRITE_PARAMETERS)
        operation["requestBody"] = {"content": {"application/json": {"schema": {"$ref": ref}}}}
    return operation


def _paths_for(rtype: ResourceType, ref: str) -> Obj:
    collection = rtype.path("{namespace}") if rtype.namespaced else rtype.path()
    item = f"{collection}/{{name}}"
    paths: Obj = {
        collection: {
            "get": _operation(rtype, "list", ref, False),
            "post": _operation(rtype, "post", ref, True),
        },
        item: {
            "get": _operation(rtype, "get", ref, False),
            "put": _operation(rtype, "put", ref, True),
            "patch": _operation(rtype, "patch", ref, True),
            "delete": _operation(rtype, "delete", ref, False),
        },
    }
    for sub in rtype.subresources:
        paths[f"{item}/{sub}"] = {"get": _operation(rtype, "get", ref, False)}
        if sub == "status":
            paths[f"{item}/{sub}"].update(
                put=_operation(rtype, "put", ref, True), patch=_operation(rtype, "patch", ref, True)
            )
    return paths


def _document_key(types: Iterable[ResourceType]) -> str:
    return json.dumps(
        sorted((t.group, t.version, t.plural, t.kind, json.dumps(t.schema, sort_keys=True)) for t in types)
    )


@functools.lru_cache(maxsize=32)
def _document(key: str, group: str, version: str, types: tuple[ResourceType, ...]) -> str:
    schemas: Obj = {}
    paths: Obj = {}
    for rtype in types:
        name = _schemas_for(rtype, schemas)
        paths.update(_paths_for(rtype, _REF_PREFIX + name))
    title = f"{group}/{version}" if group else version
    document = {
        "openapi": "3.0.0",
        "info": {"title": "multiqueue local cluster", "version": title},
        "paths": paths,
        "components": {"schemas": schemas},
    }
    return json.dumps(document)


def openapi_v3_document(types: Iterable[ResourceType], group: str, version: str) -> Obj | None:
    selected = tuple(t for t in types if t.group == group and t.version == version)
    if not selected:
        return None
    document: Obj = json.loads(_document(_document_key(selected), group, version, selected))
    return document


def openapi_v3_index(types: Iterable[ResourceType]) -> Obj:
    by_group_version: dict[str, list[ResourceType]] = {}
    for rtype in types:
        prefix = f"apis/{rtype.group}/{rtype.version}" if rtype.group else f"api/{rtype.version}"
        by_group_version.setdefault(prefix, []).append(rtype)
    paths = {}
    for prefix, selected in sorted(by_group_version.items()):
        digest = hashlib.sha256(_document_key(selected).encode()).hexdigest()[:32].upper()
        paths[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={digest}"}
    return {"paths": paths}
