#!/usr/bin/env python3
"""Write the protobuf field tables of the embedded API server, from the Go modules hack/control-plane/go.mod pins.

multiqueue/apiserver/protobuf_fields.json is what the server needs to read the protobuf bodies clients send
(``Content-Type: application/vnd.kubernetes.protobuf``) as the JSON the same Go object marshals to.

Field numbers and wire types come from the generated.proto files of the Go modules hack/control-plane/go.mod pins;
how each field renders in JSON (its JSON name, ``omitempty``/``omitzero``, pointer or value, inlined) comes from the
Go structs those files were generated from, matched on the field number of their ``protobuf`` struct tags. Only
the messages reachable from the kinds the server serves (resources.py) and from DeleteOptions are written.

multiqueue/apiserver/gnostic_fields.json holds the messages of gnostic's OpenAPIv2.proto, in which
/openapi/v2 is served to clients that ask for protobuf (kubectl 1.27 and 1.28): every message, as the whole
document is built from them.

    python3 hack/protobuf_fields.py            # rewrite the files
    python3 hack/protobuf_fields.py --check    # exit 1 if a file is not what the pinned modules give

The modules are read from the Go module cache (GOMODCACHE, else GOPATH/pkg/mod, else ~/go/pkg/mod), where building
the control plane puts them; ``--check`` says so and passes when they are not there.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from multiqueue.apiserver.resources import BUILTIN  # noqa: E402

GO_MOD = REPO / "hack" / "control-plane" / "go.mod"
OUTPUT = REPO / "multiqueue" / "apiserver" / "protobuf_fields.json"
GNOSTIC_OUTPUT = OUTPUT.with_name("gnostic_fields.json")
# The modules whose packages define the kinds served, and everything their messages refer to.
MODULES = ("k8s.io/api", "k8s.io/apimachinery", "k8s.io/apiextensions-apiserver")
GNOSTIC = "github.com/google/gnostic-models"
GNOSTIC_PROTO = "openapiv2/OpenAPIv2.proto"
# Roots besides the served kinds: the body of a DELETE.
EXTRA_ROOTS = (("meta.k8s.io", "v1", "DeleteOptions"),)
# Messages whose Go type marshals to JSON by a method of its own, and how (see protobuf.py for each rendering);
# a reachable Go type with a MarshalJSON method not listed here stops the generator.
RENDERINGS = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": "time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": "microtime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "raw",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "raw",
    "k8s.io.apimachinery.pkg.runtime.Unknown": "envelope",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "int-or-string",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON": "raw",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool": "schema-or-bool",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray": "schema-or-array",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray": "schema-or-strings",
}
ENVELOPE = "k8s.io.apimachinery.pkg.runtime.Unknown"
SCALARS = frozenset({"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float"})

# proto2 labels every field; proto3 (gnostic's) leaves singular ones bare and groups alternatives in oneofs.
_PROTO_FIELD = re.compile(r"(?:(optional|repeated)\s+)?(\S+)\s+(\w+)\s*=\s*(\d+)\s*;")
_PROTO_ONEOF = re.compile(r"oneof \w+ \{|\}")
_PROTO_MAP = re.compile(r"map<\s*(\w+)\s*,\s*(\S+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")
_GO_STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.M | re.S)
_GO_EMPTY_STRUCT = re.compile(r"^type (\w+) struct\s*\{\s*\}", re.M)
_GO_SLICE = re.compile(r"^type (\w+) \[\]", re.M)
_GO_FIELD = re.compile(r"^\s+(?:(\w+)\s+)?([^\s`]+)\s+`([^`]*)`", re.M)
_GO_MARSHALER = re.compile(r"^func \(\w+ \*?(\w+)\) MarshalJSON\(", re.M)


class GenerateError(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class ProtoField:
    number: int
    name: str
    type: str  # a scalar of SCALARS or a message's full name
    repeated: bool
    map: bool  # map<string, type>


@dataclasses.dataclass
class ProtoFile:
    package: str
    go_package: str
    imports: list[str]
    messages: dict[str, list[ProtoField]]  # full name -> fields


# --- where the sources are ------------------------------------------------------------------------------------


def pinned_versions(go_mod: str) -> dict[str, str]:
    """Module -> version as go.mod settles it: a replace line wins over the require line."""
    required: dict[str, str] = dict(
        re.findall(r"^\s*(?:require\s+)?(\S+)\s+(v\S+)(?:\s*//.*)?$", go_mod, re.M)
    )
    replaced: dict[str, str] = dict(re.findall(r"^\s*(\S+)\s+=>\s+\S+\s+(v\S+)\s*$", go_mod, re.M))
    return required | replaced


def module_cache() -> Path:
    if cache := os.environ.get("GOMODCACHE"):
        return Path(cache)
    gopath = os.environ.get("GOPATH", "").split(os.pathsep)[0]
    return Path(gopath) / "pkg" / "mod" if gopath else Path.home() / "go" / "pkg" / "mod"


def module_dirs(cache: Path, versions: dict[str, str], modules: tuple[str, ...]) -> dict[str, Path]:
    """Module path -> its directory in the cache (upper-case letters escaped as the cache does); FileNotFoundError
    when one is not there."""
    escaped = {m: re.sub(r"[A-Z]", lambda c: "!" + c.group().lower(), m) for m in modules}
    dirs = {m: cache / f"{escaped[m]}@{versions[m]}" for m in modules}
    missing = [str(d) for d in dirs.values() if not d.is_dir()]
    if missing:
        raise FileNotFoundError(", ".join(missing))
    return dirs


def package_dir(go_package: str, dirs: dict[str, Path]) -> Path:
    module = max((m for m in dirs if go_package == m or go_package.startswith(m + "/")), key=len)
    return dirs[module] / go_package.removeprefix(module).lstrip("/")


# --- reading .proto and .go -----------------------------------------------------------------------------------


def parse_proto(text: str) -> ProtoFile:
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    package = re.search(r"^package ([\w.]+);", text, re.M)
    go_package = re.search(r'^option go_package = "([^"]+)";', text, re.M)
    if package is None or go_package is None:
        raise GenerateError("a .proto file without package or go_package")
    qualified = package[1]
    messages: dict[str, list[ProtoField]] = {}
    for name, body in re.findall(r"^message (\w+) \{(.*?)^\}", text, re.M | re.S):
        fields = []
        for line in (line.strip() for line in body.splitlines()):
            if not line or _PROTO_ONEOF.fullmatch(line):
                continue
            if (m := _PROTO_MAP.fullmatch(line)) is not None:
                if m[1] != "string":
                    raise GenerateError(f"{qualified}.{name}.{m[3]}: map key {m[1]}, only string is read")
                fields.append(ProtoField(int(m[4]), m[3], _resolve(m[2], qualified), True, True))
            elif (f := _PROTO_FIELD.fullmatch(line)) is not None:
                fields.append(
                    ProtoField(int(f[4]), f[3], _resolve(f[2], qualified), f[1] == "repeated", False)
                )
            else:
                raise GenerateError(f"{qualified}.{name}: cannot read {line!r}")
        messages[f"{qualified}.{name}"] = fields
    imports = re.findall(r'^import "([^"]+)";', text, re.M)
    return ProtoFile(qualified, go_package[1], imports, messages)


def _resolve(type_name: str, package: str) -> str:
    if type_name in SCALARS:
        return type_name
    if type_name.startswith("."):
        return type_name[1:]
    return f"{package}.{type_name}"


@dataclasses.dataclass(frozen=True)
class GoField:
    go_name: str
    json_name: str
    options: frozenset[str]
    pointer: bool
    inline: bool  # an embedded struct with no JSON name: its fields are the parent's


@dataclasses.dataclass
class GoPackage:
    structs: dict[str, dict[int, GoField]]  # struct -> protobuf field number -> field, in declaration order
    slices: set[str]  # named slice types (`type ExtraValue []string`)
    marshalers: set[str]  # types with a MarshalJSON method


def parse_go(directory: Path) -> GoPackage:
    package = GoPackage({}, set(), set())
    for path in sorted(directory.glob("*.go")):
        if path.name.endswith("_test.go"):
            continue
        text = path.read_text()
        package.slices.update(_GO_SLICE.findall(text))
        package.marshalers.update(_GO_MARSHALER.findall(text))
        package.structs.update((struct, {}) for struct in _GO_EMPTY_STRUCT.findall(text))
        for struct, body in _GO_STRUCT.findall(text):
            fields: dict[int, GoField] = {}
            for name, go_type, tag in _GO_FIELD.findall(body):
                tags = dict(re.findall(r'(\w+):"([^"]*)"', tag))
                if "protobuf" not in tags or tags["protobuf"] == "-":
                    continue
                number = int(tags["protobuf"].split(",")[1])
                json_name, *options = tags.get("json", "").split(",")
                embedded = not name
                go_name = name or go_type.lstrip("*").rsplit(".", 1)[-1]
                inline = embedded and not json_name
                fields[number] = GoField(
                    go_name, json_name or go_name, frozenset(options), go_type.startswith("*"), inline
                )
            package.structs[struct] = fields
    return package


# --- the table ------------------------------------------------------------------------------------------------


def served_roots() -> list[tuple[str, str, str]]:
    return [(r.group, r.version, r.kind) for r in BUILTIN] + list(EXTRA_ROOTS)


def api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def group_packages(dirs: dict[str, Path]) -> dict[tuple[str, str], Path]:
    """(group, version) -> the directory of its Go package (the one holding its generated.proto)."""
    found = {}
    for module_dir in dirs.values():
        for proto in module_dir.rglob("generated.proto"):
            register = proto.with_name("register.go")
            if not register.exists():
                continue
            group = re.search(r'^const GroupName = "([^"]*)"', register.read_text(), re.M)
            if group is not None:
                found[(group[1], proto.parent.name)] = proto.parent
    return found


def load_protos(start: list[Path], dirs: dict[str, Path]) -> dict[str, ProtoFile]:
    """Every .proto reachable by import from ``start``, by Go package path."""
    files: dict[str, ProtoFile] = {}
    todo = list(start)
    while todo:
        parsed = parse_proto(todo.pop().read_text())
        if parsed.go_package in files:
            continue
        files[parsed.go_package] = parsed
        for imported in parsed.imports:
            go_package = imported.removesuffix("/generated.proto")
            if go_package not in files:
                todo.append(package_dir(go_package, dirs) / "generated.proto")
    return files


def reachable(roots: list[str], messages: dict[str, list[ProtoField]]) -> Iterator[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name not in messages:
            raise GenerateError(f"message {name} is referred to but not defined")
        seen.add(name)
        yield name
        todo += [f.type for f in messages[name] if f.type not in SCALARS]


def field_entry(field: ProtoField, go: GoField | None) -> list[object]:
    """[number, JSON name, Go name, type, flags]; flags: r repeated, m map (string keys), p pointer, o omitempty,
    z omitzero, i inlined."""
    flags = "m" if field.map else ("r" if field.repeated else "")
    if go is None:  # a message with a rendering of its own: its proto fields, read by name
        return [field.number, field.name, field.name[:1].upper() + field.name[1:], field.type, flags]
    flags += "p" if go.pointer else ""
    flags += "o" if "omitempty" in go.options else ""
    flags += "z" if "omitzero" in go.options else ""
    flags += "i" if go.inline else ""
    return [field.number, go.json_name if not go.inline else "", go.go_name, field.type, flags]


def build(cache: Path) -> dict[str, object]:
    dirs = module_dirs(cache, pinned_versions(GO_MOD.read_text()), MODULES)
    packages = group_packages(dirs)
    roots = served_roots()
    wanted = {(g, v) for g, v, _ in roots if g != "meta.k8s.io"} | {("meta.k8s.io", "v1")}
    protos = load_protos([packages[gv] / "generated.proto" for gv in sorted(wanted)], dirs)
    protos.setdefault(
        "k8s.io/apimachinery/pkg/runtime",
        parse_proto((package_dir("k8s.io/apimachinery/pkg/runtime", dirs) / "generated.proto").read_text()),
    )
    messages = {name: fields for p in protos.values() for name, fields in p.messages.items()}
    by_package = {p.package: p for p in protos.values()}
    kinds = {}
    for group, version, kind in roots:
        package = parse_proto((packages[(group, version)] / "generated.proto").read_text()).package
        kinds[f"{api_version(group, version)}/{kind}"] = f"{package}.{kind}"
    go_packages: dict[str, GoPackage] = {}
    table: dict[str, object] = {}
    for name in sorted(reachable([*kinds.values(), ENVELOPE], messages)):
        proto_package, short = name.rsplit(".", 1)
        go_package = by_package[proto_package].go_package
        if go_package not in go_packages:
            go_packages[go_package] = parse_go(package_dir(go_package, dirs))
        go = go_packages[go_package]
        rendering = RENDERINGS.get(name)
        if rendering is None and short in go.marshalers:
            raise GenerateError(f"{name}: its Go type marshals JSON its own way; give it a rendering")
        if rendering is None and short in go.slices:
            rendering = "list"
        proto_fields = {f.number: f for f in messages[name]}
        entry: dict[str, object] = {}
        if rendering is not None:
            entry["render"] = rendering
            entry["fields"] = [field_entry(f, None) for f in messages[name]]
        else:
            go_fields = go.structs.get(short)
            if go_fields is None:
                raise GenerateError(f"{name}: no Go struct {short} in {go_package}")
            if set(go_fields) != set(proto_fields):
                raise GenerateError(f"{name}: field numbers differ between Go and proto")
            if any(g.json_name == "-" for g in go_fields.values()):
                raise GenerateError(f"{name}: a field in protobuf and not in JSON")
            entry["fields"] = [field_entry(proto_fields[n], g) for n, g in go_fields.items()]
        table[name] = entry
    return {"kinds": dict(sorted(kinds.items())), "messages": table}


def render(table: dict[str, object]) -> str:
    """One message field per line: small diffs when the modules move."""
    lines = ["{", '"kinds": ' + json.dumps(table["kinds"], indent=1) + ",", '"messages": {']
    messages = table["messages"]
    assert isinstance(messages, dict)
    for i, (name, entry) in enumerate(messages.items()):
        head = f"{json.dumps(name)}: {{"
        if "render" in entry:
            head += f'"render": {json.dumps(entry["render"])}, '
        fields = ",\n  ".join(json.dumps(f) for f in entry["fields"])
        lines.append(f'{head}"fields": [\n  {fields}\n]}}' + ("," if i < len(messages) - 1 else ""))
    lines += ["}", "}"]
    return "\n".join(lines) + "\n"


def build_gnostic(cache: Path) -> dict[str, list[list[object]]]:
    """Message -> [number, proto name, type, flags ("r" repeated)]; types in the same package by short name."""
    directory = module_dirs(cache, pinned_versions(GO_MOD.read_text()), (GNOSTIC,))[GNOSTIC]
    parsed = parse_proto((directory / GNOSTIC_PROTO).read_text())
    prefix = parsed.package + "."
    return {
        name.removeprefix(prefix): [
            [f.number, f.name, f.type.removeprefix(prefix), "r" if f.repeated else ""] for f in fields
        ]
        for name, fields in sorted(parsed.messages.items())
    }


def render_gnostic(table: dict[str, list[list[object]]]) -> str:
    lines = []
    for name, fields in table.items():
        rows = ",\n  ".join(json.dumps(f) for f in fields)
        lines.append(f"{json.dumps(name)}: [\n  {rows}\n]" if fields else f"{json.dumps(name)}: []")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a file is not current")
    args = parser.parse_args()
    cache = module_cache()
    try:
        texts = {OUTPUT: render(build(cache)), GNOSTIC_OUTPUT: render_gnostic(build_gnostic(cache))}
    except FileNotFoundError as exc:
        if args.check:
            print(f"protobuf field tables not checked: the Go module cache lacks {exc}")
            return 0
        raise
    stale = [path for path, text in texts.items() if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(REPO)} is out of date: run python3 hack/protobuf_fields.py")
        if not stale:
            print("protobuf field tables are current")
        return 1 if stale else 0
    for path in stale:
        path.write_text(texts[path])
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
