"""OpenAPI v2 (Swagger 2.0) at /openapi/v2, for kubectl 1.27 and 1.28, which read it where newer ones read v3.

They fetch it as gnostic's protobuf (gnostic.py) and use it to decide whether to leave validation to the server
(the ``fieldValidation`` parameter of the kind's PATCH operation), to build client-side apply's strategic merge
patches (``x-kubernetes-patch-strategy``, ``x-kubernetes-patch-merge-key``) and for ``kubectl explain``.

One document covers every kind. It is made from the same definitions and operations as the v3 documents
(openapi.py), rewritten in v2's shapes as kube-apiserver serves them: definitions under ``#/definitions/``, a
reference keeps its description beside ``$ref``, parameters carry their type inline, a request body is a ``body``
parameter, operations list what they consume and produce. Swagger 2.0 has no ``oneOf``, ``anyOf``, ``not`` or
``nullable``: they are dropped, and custom resources' schemas lose what upstream's v2 conversion takes from them.
JSON and protobuf are rendered once per set of kinds and share one ETag (of the JSON), as upstream's do.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Iterable
from typing import Any, Final

from multiqueue.api.types import Obj
from multiqueue.apiserver import discovery, gnostic, openapi
from multiqueue.apiserver.resources import ResourceType

JSON: Final = "application/json"
PROTOBUF: Final = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
# What kubectl 1.27 and 1.28 ask for; answered with the type above, as upstream does.
PROTOBUF_DEPRECATED: Final = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
_V3_REF: Final = "#/components/schemas/"
_V2_REF: Final = "#/definitions/"
_DROPPED: Final = frozenset({"oneOf", "anyOf", "not", "nullable"})
_PRESERVE_UNKNOWN: Final = "x-kubernetes-preserve-unknown-fields"
# The v2 type of the definitions whose v3 schema is a oneOf, as their Go types declare it (OpenAPISchemaType).
_V2_TYPES: Final = {openapi.INT_OR_STRING: "string", openapi.QUANTITY: "string"}
_TEXT: Final = "text/plain"
_CUSTOM_CONSUMES: Final = ("application/json", "application/yaml")
_DISCOVERY_CONSUMES: Final = ("application/json", "application/vnd.kubernetes.protobuf", "application/yaml")


# --- schemas ----------------------------------------------------------------------------------------------------


def _schema(node: Any) -> Any:
    """One v3 schema in v2's shape. Vendor extensions, defaults and examples are values, kept as they are."""
    if isinstance(node, list):
        return [_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: Obj = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "$ref":
            out[key] = _ref(value)
        elif key == "allOf":
            refs = [a["$ref"] for a in value if isinstance(a, dict) and "$ref" in a]
            if len(value) == 1 and refs:  # a reference with siblings: v2 keeps them side by side
                out["$ref"] = _ref(refs[0])
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _schema(prop) for name, prop in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = _schema(value)
        else:
            out[key] = value
    return out


def _ref(ref: str) -> str:
    return _V2_REF + ref.removeprefix(_V3_REF)


def _structural_v2(node: Any) -> Any:
    """What kube-apiserver takes from a CRD's schema for v2: a nullable or unknown-preserving node loses its type
    and children (kubectl would refuse what they leave out), an array without items its type, and a nullable
    property its place in ``required``."""
    if not isinstance(node, dict):
        return node
    out = {key: _structural_v2(value) if key in ("items", "additionalProperties") else value
           for key, value in node.items()}  # fmt: skip
    properties = out.get("properties")
    if isinstance(properties, dict):
        nullable = {
            name for name, prop in properties.items() if isinstance(prop, dict) and prop.get("nullable")
        }
        required = [name for name in out.get("required", []) if name not in nullable]
        out.pop("required", None)
        if required:
            out["required"] = required
        out["properties"] = {name: _structural_v2(prop) for name, prop in properties.items()}
    if out.pop("nullable", False):
        for key in ("type", "items", "properties"):
            out.pop(key, None)
    if out.get(_PRESERVE_UNKNOWN):
        out.pop("items", None)
        out.pop("properties", None)
        if out.get("type") == "object":
            del out["type"]
    if out.get("type") == "array" and "items" not in out:
        del out["type"]
    return out


def _definitions(schemas: Obj, types: list[ResourceType]) -> Obj:
    definitions = {name: _schema(schema) for name, schema in schemas.items()}
    for name, v2_type in _V2_TYPES.items():
        if name in definitions:
            definitions[name]["type"] = v2_type
    for rtype in types:
        if not openapi.is_custom(rtype):
            continue
        name = openapi.crd_definition_name(rtype.group, rtype.version, rtype.kind)
        gvk = definitions[name]["x-kubernetes-group-version-kind"]
        if not rtype.schema or rtype.schema.get(_PRESERVE_UNKNOWN):
            # kubectl takes listed properties as all there are: such a kind lists none.
            definitions[name] = {"type": "object", "x-kubernetes-group-version-kind": gvk}
        else:
            definitions[name] = _schema(_structural_v2(schemas[name]))
    return definitions


# --- paths ------------------------------------------------------------------------------------------------------


def _parameter(parameter: Obj) -> Obj:
    """A v3 path or query parameter: its schema's type (and uniqueItems) inline, as v2 has them."""
    out = {k: v for k, v in parameter.items() if k != "schema"}
    return {**parameter.get("schema", {}), **out}


def _operation(operation: Obj, custom_groups: frozenset[str]) -> Obj:
    out: Obj = {"description": operation["description"]}
    body = operation.get("requestBody")
    group = operation.get("x-kubernetes-group-version-kind", {}).get("group")
    # What upstream's routes declare they take, body or not: discovery's (no action) its encodings,
    # apiextensions-apiserver's custom resources JSON and YAML, the rest anything.
    if "x-kubernetes-action" not in operation:
        default: tuple[str, ...] = _DISCOVERY_CONSUMES
    else:
        default = _CUSTOM_CONSUMES if group in custom_groups else ("*/*",)
    content = body["content"] if body else {}
    out["consumes"] = list(content) or list(default)
    produced = {t for r in operation["responses"].values() for t in r.get("content", {})}
    out["produces"] = sorted(produced) or [JSON]
    out["schemes"] = ["https"]
    out["tags"] = operation["tags"]
    out["operationId"] = operation["operationId"]
    parameters = []
    if body:
        schema = _schema(next(iter(content.values()))["schema"])
        parameters.append(
            {"in": "body", "name": "body", "required": body.get("required", False), "schema": schema}
        )
    parameters += [_parameter(p) for p in operation.get("parameters", [])]
    if parameters:
        out["parameters"] = parameters
    out["responses"] = {code: _response(response) for code, response in operation["responses"].items()}
    out.update({k: v for k, v in operation.items() if k.startswith("x-")})
    return out


def _response(response: Obj) -> Obj:
    out: Obj = {"description": response["description"]}
    for media, entry in response.get("content", {}).items():
        out["schema"] = {"type": "string"} if media == _TEXT else _schema(entry["schema"])
    return out


def _paths(paths: Obj, custom_groups: frozenset[str]) -> Obj:
    converted: Obj = {}
    for path, item in paths.items():
        out: Obj = {}
        for key, value in item.items():
            out[key] = (
                [_parameter(p) for p in value] if key == "parameters" else _operation(value, custom_groups)
            )
        converted[path] = out
    return converted


# --- the document, rendered and served ---------------------------------------------------------------------------


def swagger(types: Iterable[ResourceType]) -> Obj:
    """The v2 document of ``types``."""
    listed = list(types)
    schemas, paths = openapi.components(listed)
    discovery_schemas, discovery_paths = openapi.discovery_components(listed)
    schemas = dict(sorted({**discovery_schemas, **schemas}.items()))
    paths = dict(sorted({**paths, **discovery_paths}.items()))
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": openapi.INFO_VERSION},
        "paths": _paths(paths, frozenset(t.group for t in listed if openapi.is_custom(t))),
        "definitions": _definitions(schemas, listed),
        "securityDefinitions": openapi.SECURITY_SCHEMES,
        "security": [{name: []} for name in openapi.SECURITY_SCHEMES],
    }


@dataclasses.dataclass(frozen=True)
class Rendered:
    json: bytes
    etag: str  # uppercase hex SHA-512 of the JSON, for both encodings


@functools.lru_cache(maxsize=8)
def _rendered(signature: openapi.Signature) -> Rendered:
    body = json.dumps(swagger(t for t, _ in signature), separators=(",", ":")).encode()
    return Rendered(body, hashlib.sha512(body).hexdigest().upper())


@functools.lru_cache(maxsize=8)
def _protobuf(signature: openapi.Signature) -> bytes:
    return gnostic.encode_document(json.loads(_rendered(signature).json))


def openapi_v2_reply(
    types: Iterable[ResourceType], accept: str = "", if_none_match: str | None = None
) -> openapi.Reply:
    """The answer to GET /openapi/v2: JSON or protobuf, the first of the client's preferences this server has;
    406 when it has none of them; 304 when the client's copy (by ETag) is current."""
    chosen = _negotiate(accept)
    if chosen is None:
        return openapi.Reply(406, {"Vary": "Accept"})
    signature = openapi.signature(types)
    rendered = _rendered(signature)
    headers = {"Content-Type": chosen, "ETag": f'"{rendered.etag}"', "Vary": "Accept"}
    if openapi.matches_etag(if_none_match, rendered.etag):
        return openapi.Reply(304, headers)
    return openapi.Reply(200, headers, rendered.json if chosen == JSON else _protobuf(signature))


def _negotiate(accept: str) -> str | None:
    served = ((JSON, JSON), (PROTOBUF_DEPRECATED, PROTOBUF), (PROTOBUF, PROTOBUF))
    for media, _ in discovery.media_ranges(accept or "*/*"):
        kind, _, sub = media.partition("/")
        for offered, answered in served:
            offered_kind, _, offered_sub = offered.partition("/")
            if kind in (offered_kind, "*") and sub in (offered_sub, "*"):
                return answered
    return None
