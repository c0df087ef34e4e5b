"""A JSON body held against the Go type of its kind, as kube-apiserver's decoder (Go's ``encoding/json``) holds it.

Go refuses a value of the wrong JSON type for its field (a number where a string goes, a string where an object or
a list goes, a fraction or an out-of-range number for an integer) before anything is validated or stored, and says
which: ``json: cannot unmarshal number into Go struct field ConfigMap.data of type string``. The first such value
in document order is the one named; ``null`` is always accepted (Go leaves the field alone). The types are those of
protobuf_fields.json, generated from the pinned Go modules; named string types (``v1.RestartPolicy``) are known
there only as ``string``, so a message names them so.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Final

from multiqueue.apiserver import protobuf
from multiqueue.apiserver.protobuf import Field, Message
from multiqueue.apiserver.rules import godecode

_INT_RANGES: Final = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_GO_SCALARS: Final = {"bytes": "[]uint8", "double": "float64", "float": "float32"}
# The Go types that decode themselves, and what each takes; the others of this kind take any JSON.
_SELF_DECODING: Final = {"time": "string", "microtime": "string", "int-or-string": "int-or-string"}
OBJECT_META: Final = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"
QUANTITY_PATTERN: Final = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"


@dataclasses.dataclass(frozen=True)
class _Context:
    """Where the decoder is: the struct whose field it fills, and the JSON names of the fields down to it."""

    struct: str
    fields: tuple[str, ...] = ()

    def into(self, field: Field, owner: Message) -> _Context:
        return _Context(owner.short_name, (*self.fields, field.json_name))

    def error(self, value: Any, go_type: str, shown: str = "") -> str:
        where = f"Go struct field {self.struct}.{'.'.join(self.fields)}" if self.fields else "Go value"
        return f"json: cannot unmarshal {shown or _json_kind(value)} into {where} of type {go_type}"


def type_error(api_version: str, kind: str, body: Any) -> str | None:
    """Go's error for the first value of ``body`` that does not fit the kind's Go type; None when all fit, or for
    a kind without one."""
    name = protobuf.message_for(api_version, kind)
    if name is None:
        return None
    return message_error(name, body)


def message_error(name: str, value: Any) -> str | None:
    """Go's error for the first value of ``value`` that does not fit the message ``name``, decoded at the top."""
    msg = protobuf.message(name)
    return _struct(msg, value, _Context(msg.short_name))


def _struct(msg: Message, value: Any, at: _Context) -> str | None:
    if not isinstance(value, dict):
        return at.error(value, _go_message(msg.name))
    fields = _json_fields(msg.name)
    for key, item in value.items():
        field = fields.get(key)
        if field is None or item is None:
            continue  # unknown fields are dropped (or refused) by decoding.decode, not here
        problem = _field(field, item, at.into(field, msg))
        if problem:
            return problem
    return None


def _field(field: Field, value: Any, at: _Context) -> str | None:
    if field.repeated and field.type != "bytes":
        if not isinstance(value, list):
            return at.error(value, "[]" + _go_type(field.type))
        return next((p for item in value if item is not None and (p := _value(field.type, item, at))), None)
    if field.map:
        if not isinstance(value, dict):
            return at.error(value, "map[string]" + _go_type(field.type))
        return next(
            (p for item in value.values() if item is not None and (p := _value(field.type, item, at))), None
        )
    return _value(field.type, value, at)


def _value(type_: str, value: Any, at: _Context) -> str | None:
    if protobuf.is_message(type_):
        msg = protobuf.message(type_)
        if not msg.rendering:
            return _struct(msg, value, at)
        return _self_decoding(msg, value, at)
    if type_ == "string":
        return None if isinstance(value, str) else at.error(value, "string")
    if type_ == "bytes":
        return _base64(value, at)
    if type_ == "bool":
        return None if isinstance(value, bool) else at.error(value, "bool")
    if type_ in _INT_RANGES:
        return _integer(type_, value, at)
    if type_ in ("double", "float"):
        return None if _is_number(value) else at.error(value, _go_type(type_))
    return None


def _base64(value: Any, at: _Context) -> str | None:
    """Go holds bytes as base64 text; a string that is not is refused with base64's own error, no field named."""
    if not isinstance(value, str):
        return at.error(value, "[]uint8")
    try:
        godecode.b64decode(value.encode())
    except godecode.DecodeError as exc:
        return str(exc)
    return None


def _self_decoding(msg: Message, value: Any, at: _Context) -> str | None:
    """Go types with their own UnmarshalJSON: times take a string, IntOrString a string or an int32, a Quantity a
    string or a number (its parser refuses anything else); the rest (raw JSON, schemas) take anything."""
    if msg.rendering == "quantity":
        if isinstance(value, str) or _is_number(value):
            return None
        return f"quantities must match the regular expression '{QUANTITY_PATTERN}'"
    takes = _SELF_DECODING.get(msg.rendering)
    if takes == "string":
        return None if isinstance(value, str) else at.error(value, "string")
    if takes == "int-or-string":
        return None if isinstance(value, str) else _integer("int32", value, at)
    return None


def _integer(type_: str, value: Any, at: _Context) -> str | None:
    if not _is_number(value):
        return at.error(value, type_)
    low, high = _INT_RANGES[type_]
    if isinstance(value, float) or not low <= value <= high:
        return at.error(value, type_, shown=f"number {value}")
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if _is_number(value):
        return "number"
    kinds: dict[type, str] = {dict: "object", list: "array", str: "string"}
    return kinds.get(type(value), "null")


@functools.cache
def _json_fields(name: str) -> dict[str, Field]:
    """JSON name -> field of the message ``name``, with inlined structs' fields in their place, as Go promotes an
    embedded struct's fields (the outer struct is the one its errors name)."""
    fields: dict[str, Field] = {}
    for field in protobuf.message(name).fields:
        if field.inline and protobuf.is_message(field.type):
            fields.update(_json_fields(field.type))
        elif field.json_name:
            fields[field.json_name] = field
    return fields


def _go_type(type_: str) -> str:
    return _go_message(type_) if protobuf.is_message(type_) else _GO_SCALARS.get(type_, type_)


def _go_message(name: str) -> str:
    """``k8s.io.api.core.v1.NamespaceStatus`` -> ``v1.NamespaceStatus``: Go names a type by its package."""
    package, short = name.rsplit(".", 1)
    return f"{package.rsplit('.', 1)[-1]}.{short}"
