"""OpenAPI v2 for kubectl 1.27 and 1.28: definitions kubectl's v2 parser accepts, the operations it reads, custom
resources converted as upstream converts them, JSON or gnostic's protobuf by Accept."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from multiqueue.apiserver import protowire
from multiqueue.apiserver.gnostic import TABLE, EncodeError, encode_document
from multiqueue.apiserver.openapi_v2 import (
    JSON,
    PROTOBUF,
    PROTOBUF_DEPRECATED,
    openapi_v2_reply,
    swagger,
)
from multiqueue.apiserver.resources import BUILTIN, ResourceType

Obj = dict[str, Any]
META = "io.k8s.apimachinery.pkg.apis.meta.v1"
GADGET_SCHEMA: Obj = {
    "type": "object",
    "description": "A gadget.",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size", "note"],
            "properties": {
                "size": {"type": "integer", "minimum": 1},
                "port": {
                    "x-kubernetes-int-or-string": True,
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                },
                "note": {"type": "string", "nullable": True},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "bare": {"type": "array"},
                "extra": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"a": {}},
                },
            },
        }
    },
}
GADGETS = ResourceType("example.com", "v1", "Gadget", "gadgets", "gadget", True, schema=GADGET_SCHEMA)
OPEN = ResourceType(
    "example.com",
    "v1",
    "Open",
    "opens",
    "open",
    True,
    schema={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
)
TYPES = (*BUILTIN, GADGETS, OPEN)
DOC = swagger(TYPES)
DEFINITIONS: Obj = DOC["definitions"]
PRIMITIVES = {"string", "number", "integer", "boolean"}


def schemas(node: Any) -> Iterator[Obj]:
    """Every schema under ``node``: itself, properties, items, additionalProperties (not extension values)."""
    if not isinstance(node, dict):
        return
    yield node
    for child in (node.get("properties") or {}).values():
        yield from schemas(child)
    for key in ("items", "additionalProperties"):
        yield from schemas(node.get(key))


def test_every_definition_is_one_kubectls_v2_parser_accepts() -> None:
    # kube-openapi's proto.NewOpenAPIData, which kubectl runs on the document, refuses anything else.
    for name, definition in DEFINITIONS.items():
        for node in schemas(definition):
            where = f"{name}: {json.dumps(node)[:200]}"
            assert not {"oneOf", "anyOf", "allOf", "not", "nullable"} & set(node), where
            if "$ref" in node:
                assert node["$ref"].removeprefix("#/definitions/") in DEFINITIONS, where
                assert "type" not in node and "properties" not in node, where
            kind = node.get("type")
            assert kind is None or kind in {*PRIMITIVES, "object", "array"}, where
            if kind == "array":
                assert isinstance(node.get("items"), dict), where


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("io.k8s.apimachinery.pkg.util.intstr.IntOrString", {"type": "string", "format": "int-or-string"}),
        ("io.k8s.apimachinery.pkg.api.resource.Quantity", {"type": "string"}),
        (f"{META}.Time", {"type": "string", "format": "date-time"}),
        (f"{META}.MicroTime", {"type": "string", "format": "date-time"}),
        (f"{META}.Patch", {"type": "object"}),
    ],
)
def test_scalar_definitions_take_the_type_their_go_types_give_v2(name: str, expected: Obj) -> None:
    assert {k: v for k, v in DEFINITIONS[name].items() if k != "description"} == expected


def test_a_reference_keeps_its_description_beside_it() -> None:
    created = DEFINITIONS[f"{META}.ObjectMeta"]["properties"]["creationTimestamp"]
    assert created["$ref"] == f"#/definitions/{META}.Time"
    assert created["description"].startswith("CreationTimestamp is a timestamp")


def test_kinds_carry_their_gvk_and_merge_keys() -> None:
    assert DEFINITIONS["io.k8s.api.batch.v1.Job"]["x-kubernetes-group-version-kind"] == [
        {"group": "batch", "kind": "Job", "version": "v1"}
    ]
    containers = DEFINITIONS["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert (containers["x-kubernetes-patch-strategy"], containers["x-kubernetes-patch-merge-key"]) == (
        "merge",
        "name",
    )


# --- custom resources ---------------------------------------------------------------------------------------------


def test_a_custom_kind_loses_what_upstreams_v2_conversion_takes() -> None:
    gadget = DEFINITIONS["com.example.v1.Gadget"]
    assert gadget["x-kubernetes-group-version-kind"] == [
        {"group": "example.com", "kind": "Gadget", "version": "v1"}
    ]
    assert set(gadget["properties"]) == {"apiVersion", "kind", "metadata", "spec"}
    assert gadget["properties"]["metadata"]["$ref"] == f"#/definitions/{META}.ObjectMeta"
    spec = gadget["properties"]["spec"]
    assert spec["required"] == ["size"], "a nullable property is not required"
    assert spec["properties"] == {
        "size": {"type": "integer", "minimum": 1},
        "port": {"x-kubernetes-int-or-string": True},
        "note": {},
        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        "bare": {},
        "extra": {"x-kubernetes-preserve-unknown-fields": True},
    }


def test_a_custom_kind_that_keeps_unknown_fields_lists_no_properties() -> None:
    # kubectl takes the properties it finds as all there are; upstream gives such a kind none.
    assert DEFINITIONS["com.example.v1.Open"] == {
        "type": "object",
        "x-kubernetes-group-version-kind": [{"group": "example.com", "kind": "Open", "version": "v1"}],
    }


# --- paths --------------------------------------------------------------------------------------------------------


def operations() -> Iterator[tuple[str, str, Obj]]:
    for path, item in DOC["paths"].items():
        for method, operation in item.items():
            if method != "parameters":
                yield path, method, operation


def test_every_patch_declares_field_validation_for_its_kind() -> None:
    # kubectl 1.27's QueryParamVerifier: the PATCH operation carrying the kind's GVK, an inline query parameter.
    patched = set()
    for _, method, operation in operations():
        if method != "patch":
            continue
        gvk = operation["x-kubernetes-group-version-kind"]
        patched.add((gvk["group"], gvk["kind"]))
        queries = [p["name"] for p in operation["parameters"] if p["in"] == "query"]
        assert "fieldValidation" in queries, operation["operationId"]
    assert {(t.group, t.kind) for t in TYPES if "patch" in t.verbs} <= patched


@pytest.mark.parametrize(
    ("path", "method", "body"),
    [
        ("/apis/batch/v1/namespaces/{namespace}/jobs", "post", {"$ref": "#/definitions/io.k8s.api.batch.v1.Job"}),
        ("/apis/batch/v1/namespaces/{namespace}/jobs/{name}", "put", {"$ref": "#/definitions/io.k8s.api.batch.v1.Job"}),
        ("/apis/batch/v1/namespaces/{namespace}/jobs/{name}", "patch", {"$ref": f"#/definitions/{META}.Patch"}),
        ("/apis/batch/v1/namespaces/{namespace}/jobs/{name}", "delete", {"$ref": f"#/definitions/{META}.DeleteOptions"}),
    ],
)  # fmt: skip
def test_request_bodies_are_body_parameters(path: str, method: str, body: Obj) -> None:
    operation = DOC["paths"][path][method]
    first = operation["parameters"][0]
    assert (first["in"], first["name"], first["schema"]) == ("body", "body", body)
    assert first["required"] == (method != "delete")


def test_operations_say_what_they_consume_and_produce() -> None:
    item = DOC["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]
    assert item["get"]["consumes"] == ["*/*"] and item["get"]["produces"] == [JSON]
    assert "application/strategic-merge-patch+json" in item["patch"]["consumes"]
    assert item["get"]["responses"]["200"]["schema"] == {"$ref": "#/definitions/io.k8s.api.batch.v1.Job"}
    log = DOC["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/log"]["get"]
    assert log["produces"] == ["text/plain"] and log["responses"]["200"]["schema"] == {"type": "string"}
    name = next(p for p in item["parameters"] if p["name"] == "name")
    assert name == {"type": "string", "uniqueItems": True, "description": name["description"], "in": "path",
                    "name": "name", "required": True}  # fmt: skip


# --- serving ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "status", "content_type"),
    [
        pytest.param(PROTOBUF_DEPRECATED, 200, PROTOBUF, id="what-kubectl-1.27-asks-for"),
        pytest.param(PROTOBUF, 200, PROTOBUF, id="protobuf"),
        pytest.param("application/json", 200, JSON, id="json"),
        pytest.param("", 200, JSON, id="anything"),
        pytest.param("text/html;q=0.9, application/*;q=0.5", 200, JSON, id="by-quality"),
        pytest.param(f"{PROTOBUF};q=0.5, application/json", 200, JSON, id="json-preferred"),
        pytest.param("text/html", 406, None, id="nothing-served"),
    ],
)
def test_reply_negotiates_json_or_protobuf(accept: str, status: int, content_type: str | None) -> None:
    reply = openapi_v2_reply(TYPES, accept)
    assert reply.status == status
    assert reply.headers.get("Content-Type") == content_type and reply.headers["Vary"] == "Accept"
    if content_type == JSON:
        assert json.loads(reply.body) == DOC
    if content_type == PROTOBUF:
        assert decode("Document", reply.body)["swagger"] == ["2.0"]


def test_both_encodings_share_the_etag_of_the_json() -> None:
    as_json, as_protobuf = openapi_v2_reply(TYPES, JSON), openapi_v2_reply(TYPES, PROTOBUF)
    assert as_json.headers["ETag"] == as_protobuf.headers["ETag"]
    again = openapi_v2_reply(TYPES, PROTOBUF_DEPRECATED, if_none_match=as_json.headers["ETag"])
    assert (again.status, again.body) == (304, b"")
    other = openapi_v2_reply(BUILTIN, JSON)
    assert other.headers["ETag"] != as_json.headers["ETag"], "the document follows the kinds served"


# --- gnostic's protobuf -------------------------------------------------------------------------------------------

GNOSTIC: dict[str, dict[int, tuple[str, str]]] = {
    message: {number: (name, kind) for number, name, kind, _ in fields}
    for message, fields in json.loads(TABLE.read_text()).items()
}


def decode(message: str, data: bytes) -> Obj:
    """gnostic's message as field name -> values, read back with the generated table."""
    out: Obj = {}
    for number, _, value in protowire.fields(data, message):
        name, kind = GNOSTIC[message][number]
        assert isinstance(value, bytes) or kind in ("bool", "int64"), (message, name)
        if kind in GNOSTIC:
            decoded: Any = decode(kind, value)  # type: ignore[arg-type]
        elif kind == "string":
            decoded = value.decode()  # type: ignore[union-attr]
        elif kind == "double":
            decoded = struct.unpack("<d", value)[0]
        else:
            decoded = value
        out.setdefault(name, []).append(decoded)
    return out


def test_field_numbers_are_gnostics() -> None:
    # Document: swagger 1, info 2 (Info: title 1, version 2).
    encoded = encode_document({"swagger": "2.0", "info": {"title": "K", "version": "1"}})
    assert encoded == b"\x0a\x032.0" + b"\x12\x06" + b"\x0a\x01K\x12\x011"


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        pytest.param({"type": "array", "items": {"type": "string"}},
                     {"type": [{"value": ["array"]}], "items": [{"schema": [{"type": [{"value": ["string"]}]}]}]},
                     id="type-and-items"),
        pytest.param({"$ref": "#/definitions/X", "description": "d"}, {"_ref": ["#/definitions/X"], "description": ["d"]},
                     id="reference"),
        pytest.param({"additionalProperties": {"type": "string"}},
                     {"additional_properties": [{"schema": [{"type": [{"value": ["string"]}]}]}]}, id="map"),
        pytest.param({"additionalProperties": True}, {"additional_properties": [{"boolean": [1]}]}, id="map-of-anything"),
        pytest.param({"properties": {"$ref": {"type": "string"}}, "required": ["$ref"]},
                     {"properties": [{"additional_properties": [{"name": ["$ref"], "value": [{"type": [{"value": ["string"]}]}]}]}],
                      "required": ["$ref"]}, id="a-property-named-ref"),
        pytest.param({"minimum": 1.5, "maxLength": 3, "uniqueItems": False}, {"minimum": [1.5], "max_length": [3]},
                     id="numbers-and-defaults-left-out"),
        pytest.param({"default": {"a": [1]}, "enum": ["x", 2]},
                     {"default": [{"yaml": ['{"a": [1]}']}], "enum": [{"yaml": ['"x"']}, {"yaml": ["2"]}]},
                     id="values-as-yaml"),
    ],
)  # fmt: skip
def test_schemas_in_gnostics_messages(schema: Obj, expected: Obj) -> None:
    encoded = encode_document({"definitions": {"X": schema}})
    definitions = decode("Document", encoded)["definitions"][0]["additional_properties"]
    assert definitions == [{"name": ["X"], "value": [expected]}]


def test_what_kubectl_reads_is_where_it_looks() -> None:
    """The fieldValidation check and the GVK lookup of kubectl 1.27, followed through the encoded document."""
    encoded = openapi_v2_reply(TYPES, PROTOBUF).body
    document = decode("Document", encoded)
    paths = {entry["name"][0]: entry["value"][0] for entry in document["paths"][0]["path"]}
    patch = paths["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"][0]
    extensions = {e["name"][0]: yaml.safe_load(e["value"][0]["yaml"][0]) for e in patch["vendor_extension"]}
    assert extensions["x-kubernetes-group-version-kind"] == {"group": "batch", "kind": "Job", "version": "v1"}
    queries = [
        p["parameter"][0]["non_body_parameter"][0]["query_parameter_sub_schema"][0]["name"][0]
        for p in patch["parameters"]
        if "non_body_parameter" in p["parameter"][0]
    ]
    assert "fieldValidation" in queries
    body = patch["parameters"][0]["parameter"][0]["body_parameter"][0]
    assert body["schema"] == [{"_ref": [f"#/definitions/{META}.Patch"]}] and body["required"] == [1]
    definitions = {e["name"][0]: e["value"][0] for e in document["definitions"][0]["additional_properties"]}
    job = definitions["io.k8s.api.batch.v1.Job"]
    gvk = next(e for e in job["vendor_extension"] if e["name"] == ["x-kubernetes-group-version-kind"])
    assert yaml.safe_load(gvk["value"][0]["yaml"][0]) == [{"group": "batch", "kind": "Job", "version": "v1"}]
    assert document["security_definitions"][0]["additional_properties"][0]["value"][0]["api_key_security"][0][
        "name"
    ] == ["authorization"]


@pytest.mark.parametrize(
    "document",
    [
        pytest.param({"definitions": {"X": {"notAField": 1}}}, id="unknown-key"),
        pytest.param({"definitions": {"X": {"required": "a"}}}, id="a-list-that-is-not"),
        pytest.param({"info": "K"}, id="an-object-that-is-not"),
    ],
)
def test_what_gnostic_has_no_place_for_is_refused(document: Obj) -> None:
    with pytest.raises(EncodeError):
        encode_document(document)
