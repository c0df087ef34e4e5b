#!/usr/bin/env python3
"""Write the OpenAPI facts table of the embedded API server, from the Kubernetes release hack/control-plane/go.mod
pins.

The embedded server's OpenAPI documents (multiqueue/apiserver/openapi.py) are made from the official Python
client's models: their fields, types, references, ``required`` and descriptions. What the models do not carry
comes from here, multiqueue/apiserver/openapi_facts.json: each definition's upstream name and the client
model it is, and the facts upstream publishes that the models lose: integer and string formats, the
``x-kubernetes-*`` extensions (list types and map keys, map types, patch strategies and merge keys, unions,
int-or-string, preserve-unknown-fields), and which plain-string fields upstream types by reference (quantities,
micro-times, FieldsV1, IntOrString). No description is taken: text comes from the client.

The facts are read from the OpenAPI v3 documents the pinned k8s.io/kubernetes module publishes
(api/openapi-spec/v3), only for the definitions reachable from the kinds the server serves (resources.py).

    python3 hack/openapi_facts.py            # rewrite the file
    python3 hack/openapi_facts.py --check    # exit 1 if the file is not what the pinned module gives

The module is read from the Go module cache, where building the control plane puts it; ``--check`` says so and
passes when it is not there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "hack"))

import kubernetes.client.models as models  # noqa: E402
from protobuf_fields import GO_MOD, module_cache, module_dirs, pinned_versions  # noqa: E402

from multiqueue.apiserver.resources import BUILTIN  # noqa: E402

OUTPUT = REPO / "multiqueue" / "apiserver" / "openapi_facts.json"
MODULE = "k8s.io/kubernetes"
SPEC = Path("api") / "openapi-spec" / "v3"
REF = "#/components/schemas/"
# Definitions the documents need besides the kinds: the bodies and answers of the operations, and the discovery
# documents of the group versions, groups and roots.
EXTRA_ROOTS = (
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions",
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroupList",
)
# Facts a schema node may carry; x-kubernetes-group-version-kind is the server's own to write.
FACTS = (
    "format",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-patch-merge-key",
    "x-kubernetes-patch-strategy",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-unions",
)


def load_schemas(cache: Path) -> dict[str, Any]:
    directory = module_dirs(cache, pinned_versions(GO_MOD.read_text()), (MODULE,))[MODULE] / SPEC
    schemas: dict[str, Any] = {}
    for path in sorted(directory.glob("*.json")):
        schemas.update(json.loads(path.read_text()).get("components", {}).get("schemas", {}))
    return schemas


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"].removeprefix(REF)] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


def reachable(schemas: dict[str, Any]) -> list[str]:
    kinds = {(t.group, t.version, k) for t in BUILTIN for k in (t.kind, f"{t.kind}List")}
    todo = list(EXTRA_ROOTS) + [
        name
        for name, schema in schemas.items()
        if any(
            (g.get("group", ""), g["version"], g["kind"]) in kinds
            for g in schema.get("x-kubernetes-group-version-kind", [])
        )
    ]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen and name in schemas:
            seen.add(name)
            todo.extend(_refs(schemas[name]))
    return sorted(seen)


def model_name(definition: str) -> str | None:
    """The client's model for a definition: ``V1Role``, or group-qualified (``CoreV1Event``) where two groups
    share a name; None for the types the client has no model of (Time, Quantity, ...)."""
    parts = definition.split(".")
    name, version = parts[-1], parts[-2]
    group = parts[-3] if parts[:3] == ["io", "k8s", "api"] or "apiextensions" in definition else ""
    candidates = [f"{group.capitalize()}{version.capitalize()}{name}"] if group else []
    candidates.append(f"{version.capitalize()}{name}")
    for candidate in candidates:
        if isinstance(getattr(models, candidate, None), type):
            return candidate
    return None


def node_facts(node: Any, schemas: dict[str, Any]) -> dict[str, Any]:
    """The facts of one property (and of its items and values); ``ref`` names a definition the client types as a
    plain value."""
    if not isinstance(node, dict):
        return {}
    facts = {key: node[key] for key in FACTS if key in node}
    target = node.get("$ref") or next((a.get("$ref") for a in node.get("allOf", [])), None)
    if isinstance(target, str) and model_name(target.removeprefix(REF)) is None:
        facts["ref"] = target.removeprefix(REF)
        if "description" not in node:
            facts["described"] = False  # the client gives the type's own words there
    for key in ("items", "additionalProperties"):
        inner = node_facts(node.get(key), schemas)
        if inner:
            facts[key] = inner
    return facts


def build(cache: Path) -> dict[str, Any]:
    schemas = load_schemas(cache)
    table: dict[str, Any] = {}
    for name in reachable(schemas):
        schema = schemas[name]
        entry: dict[str, Any] = {"model": model_name(name)}
        entry.update({key: schema[key] for key in FACTS if key in schema})
        if entry["model"] is None:
            # No model to take the shape from: the definition's own (Time, Quantity, IntOrString, FieldsV1, ...).
            entry.update({key: schema[key] for key in ("type", "oneOf") if key in schema})
        properties = {
            p: f for p, node in schema.get("properties", {}).items() if (f := node_facts(node, schemas))
        }
        if properties:
            entry["properties"] = properties
        table[name] = entry
    return table


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is not current")
    args = parser.parse_args()
    try:
        text = render(build(module_cache()))
    except FileNotFoundError as exc:
        if args.check:
            print(f"OpenAPI facts not checked: the Go module cache lacks {exc}")
            return 0
        raise
    current = OUTPUT.exists() and OUTPUT.read_text() == text
    if args.check:
        print(
            "OpenAPI facts are current"
            if current
            else f"{OUTPUT.relative_to(REPO)} is out of date: run python3 hack/openapi_facts.py"
        )
        return 0 if current else 1
    if not current:
        OUTPUT.write_text(text)
        print(f"wrote {OUTPUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
