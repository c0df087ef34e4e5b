"""Comparing two servers' OpenAPI documents (v3 per group version, v2 whole) over what one of them serves.

Each document is flattened into items, one per fact a client reads: ``<where>/<fact>`` -> value, where ``<where>``
is a slash path through the document (``definitions/io.k8s.api.batch.v1.JobSpec/properties/suspend``,
``paths//apis/batch/v1/jobs//get``) and the
facts are a schema's type, format, ``$ref`` target (by definition name), ``required``, description and
``x-kubernetes-*`` extensions, and an operation's id, action, kind, parameters (name, in, required) and request
media types. A property, definition, path, operation or parameter is itself an item (``present``), and a side
lacking it reports that one item rather than everything under it.

Only definitions reachable from the served kinds and from the served paths' operations are compared, and only
paths of served resources (plus the group version's own): kinds the served side lacks are out of scope.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

PRESENT: Final = "present"
EXTENSIONS: Final = (
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-patch-strategy",
    "x-kubernetes-patch-merge-key",
    "x-kubernetes-group-version-kind",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-unions",
)
_METHODS: Final = ("get", "put", "post", "delete", "patch", "head", "options")
_REF_PREFIXES: Final = ("#/components/schemas/", "#/definitions/")
_RESOURCE_PATH: Final = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))/(?:watch/)?"
    r"(?:namespaces/\{namespace\}/)?(?P<plural>[^/{]+)(?P<rest>/.*)?$"
)


@dataclasses.dataclass(frozen=True)
class Served:
    """One resource the compared server serves, as its discovery says."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = False


@dataclasses.dataclass(frozen=True)
class Difference:
    id: str
    embedded: Any
    upstream: Any

    @property
    def nature(self) -> str:
        """``missing`` (only upstream has it), ``extra`` (only the embedded server) or ``differs``."""
        if self.embedded is None:
            return "missing"
        return "extra" if self.upstream is None else "differs"

    @property
    def named(self) -> str:
        """What the known list matches: ``missing v3:batch/v1:definitions/...``."""
        return f"{self.nature} {self.id}"


def _ref_name(ref: Any) -> str | None:
    if not isinstance(ref, str):
        return None
    for prefix in _REF_PREFIXES:
        if ref.startswith(prefix):
            return ref.removeprefix(prefix)
    return ref


def _target(node: Mapping[str, Any]) -> str | None:
    """The definition a schema node refers to, directly or wrapped in a one-element ``allOf``."""
    if "$ref" in node:
        return _ref_name(node["$ref"])
    wrapped = node.get("allOf")
    if isinstance(wrapped, list) and len(wrapped) == 1 and isinstance(wrapped[0], dict):
        return _ref_name(wrapped[0].get("$ref"))
    return None


def flatten_schema(node: Any, where: str, out: dict[str, Any]) -> None:
    """The facts of one schema node and of the nodes under it, into ``out``."""
    if not isinstance(node, dict):
        return
    out[f"{where}/{PRESENT}"] = True
    target = _target(node)
    if target is not None:
        out[f"{where}/$ref"] = target
    for key in ("type", "format", "description"):
        if key in node:
            out[f"{where}/{key}"] = node[key]
    if node.get("required"):
        out[f"{where}/required"] = sorted(node["required"])
    for key in EXTENSIONS:
        if key in node:
            out[f"{where}/{key}"] = node[key]
    for name, child in (node.get("properties") or {}).items():
        flatten_schema(child, f"{where}/properties/{name}", out)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            flatten_schema(node[key], f"{where}/{key}", out)


def _refs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        name = _ref_name(node.get("$ref"))
        if name is not None:
            yield name
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def reachable(schemas: Mapping[str, Any], roots: Iterable[str]) -> set[str]:
    """The definitions ``roots`` need, themselves included."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in schemas:
            continue
        seen.add(name)
        todo.extend(_refs(schemas[name]))
    return seen


def served_path(path: str, served: Iterable[Served]) -> bool:
    """Whether a path is one of a served resource's (any subresource or watch form), or the discovery path of a served
    group version, group or root."""
    match = _RESOURCE_PATH.match(path)
    listed = list(served)
    if match is None:
        roots = {f"/api/{s.version}/" if not s.group else f"/apis/{s.group}/{s.version}/" for s in listed}
        roots |= {"/api/", "/apis/", *(f"/apis/{s.group}/" for s in listed if s.group)}
        return path in roots
    group = match["group"] or ""
    version = match["core"] or match["version"]
    plural = match["plural"]
    return any(s.group == group and s.version == version and s.plural == plural for s in listed)


def _parameters(parameters: Any, shared: Mapping[str, Any], where: str, out: dict[str, Any]) -> None:
    for parameter in parameters or []:
        if "$ref" in parameter:
            parameter = shared.get(_ref_name(parameter["$ref"]).removeprefix("#/parameters/"), {})  # type: ignore[union-attr]
        place = f"{where}/parameters/{parameter.get('name')}"
        out[f"{place}/{PRESENT}"] = True
        out[f"{place}/in"] = parameter.get("in")
        out[f"{place}/required"] = bool(parameter.get("required"))


def _operation(
    operation: Mapping[str, Any], shared: Mapping[str, Any], where: str, out: dict[str, Any]
) -> None:
    out[f"{where}/{PRESENT}"] = True
    for key in ("operationId", "x-kubernetes-action", "x-kubernetes-group-version-kind"):
        if key in operation:
            out[f"{where}/{key}"] = operation[key]
    _parameters(operation.get("parameters"), shared, where, out)
    body = operation.get("requestBody")
    if isinstance(body, dict):
        out[f"{where}/requestBody"] = sorted(body.get("content") or {})
    if "consumes" in operation:
        out[f"{where}/consumes"] = sorted(operation["consumes"])


def _served_paths(document: Mapping[str, Any], served: list[Served]) -> dict[str, Any]:
    return {path: item for path, item in (document.get("paths") or {}).items() if served_path(path, served)}


def flatten_document(
    document: Mapping[str, Any], served: Iterable[Served], common: Iterable[str]
) -> dict[str, Any]:
    """The items of a v3 or v2 document that concern ``served``. Definitions are those the served kinds and the
    ``common`` paths (served by both sides) need: a path one side lacks is one difference, not its definitions."""
    listed = list(served)
    schemas: Mapping[str, Any] = document.get("definitions") or document.get("components", {}).get(
        "schemas", {}
    )
    shared = document.get("parameters") or {}
    out: dict[str, Any] = {"info/version": document.get("info", {}).get("version")}
    paths = _served_paths(document, listed)
    for path, item in paths.items():
        where = f"paths/{path}/"  # the double slash ends the path: /jobs is no node above /jobs/{name}
        out[f"{where}/{PRESENT}"] = True
        _parameters(item.get("parameters"), shared, where, out)
        for method in _METHODS:
            if method in item:
                _operation(item[method], shared, f"{where}/{method}", out)
    kinds = {(s.group, s.version, k) for s in listed for k in (s.kind, f"{s.kind}List")}
    roots = [
        name
        for name, schema in schemas.items()
        if any(
            (gvk.get("group", ""), gvk.get("version"), gvk.get("kind")) in kinds
            for gvk in schema.get("x-kubernetes-group-version-kind") or []
        )
    ]
    used = list(_refs([paths[path] for path in common if path in paths]))
    # v2 shares parameters (request bodies among them) under #/parameters/.
    used += _refs(
        [shared.get(r.removeprefix("#/parameters/")) for r in used if r.startswith("#/parameters/")]
    )
    roots += used
    for name in sorted(reachable(schemas, roots)):
        flatten_schema(schemas[name], f"definitions/{name}", out)
    return out


def flatten_pair(
    embedded: Mapping[str, Any], upstream: Mapping[str, Any], served: Iterable[Served]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The items of two documents of the same thing, (embedded, upstream)."""
    listed = list(served)
    common = set(_served_paths(embedded, listed)) & set(_served_paths(upstream, listed))
    return flatten_document(embedded, listed, common), flatten_document(upstream, listed, common)


def _absent_above(key: str, side: Mapping[str, Any], both: set[str]) -> bool:
    """Whether a node above ``key`` that the other side has is missing from ``side``: that absence is the one
    difference reported, not everything under it."""
    parts = key.split("/")
    for end in range(1, len(parts) - 1):
        marker = "/".join(parts[:end]) + f"/{PRESENT}"
        if marker != key and marker in both and marker not in side:
            return True
    return False


def compare(
    embedded: Mapping[str, Any], upstream: Mapping[str, Any], label: str
) -> tuple[int, list[Difference]]:
    """(items compared, differences) of two flattened documents; each id is prefixed with ``label``."""
    compared = 0
    found = []
    both = set(embedded) | set(upstream)
    for key in sorted(both):
        if _absent_above(key, embedded, both) or _absent_above(key, upstream, both):
            continue
        compared += 1
        if embedded.get(key) != upstream.get(key):
            found.append(Difference(f"{label}:{key}", embedded.get(key), upstream.get(key)))
    return compared, found
