"""Request bodies in Kubernetes' protobuf encoding (``application/vnd.kubernetes.protobuf``), read as the JSON the
same Go object marshals to, so the rest of the server handles them exactly as JSON bodies.

kubectl 1.32 and newer send its imperative commands' objects this way (``kubectl create configmap``, ``auth
can-i``, ...). The body is the magic ``k8s\\x00`` and a ``runtime.Unknown`` whose ``raw`` is the object's own
message. Which field number is which JSON field, and how Go renders it (``omitempty``, pointers, inlined structs,
the types that marshal themselves) is generated data: protobuf_fields.json, written by hack/protobuf_fields.py
from the pinned Go modules. Unknown field numbers are skipped, as Go's unmarshalers do.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import math
import struct
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from multiqueue.apiserver import protowire
from multiqueue.apiserver.protowire import FIXED32, FIXED64, LEN, VARINT, WireError

MEDIA_TYPE: Final = "application/vnd.kubernetes.protobuf"
MAGIC: Final = b"k8s\x00"
TABLE: Final = Path(__file__).with_name("protobuf_fields.json")
ENVELOPE: Final = "k8s.io.apimachinery.pkg.runtime.Unknown"
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_VARINT_TYPES: Final = {"bool", "int32", "int64", "uint32", "uint64"}
_FIXED_TYPES: Final = {"double": FIXED64, "float": FIXED32}


class DecodeError(ValueError):
    """A body that cannot be read as the message it should be; the text is what Go's decoder says."""


@dataclasses.dataclass(frozen=True)
class Field:
    number: int
    json_name: str  # empty for an inlined struct
    go_name: str
    type: str  # a scalar (string, bytes, bool, int32, ...) or a message's full name
    repeated: bool
    map: bool  # map<string, type>
    pointer: bool
    omitempty: bool
    omitzero: bool
    inline: bool


@dataclasses.dataclass(frozen=True)
class Message:
    name: str
    rendering: str  # "" for a plain struct, else how its Go type marshals itself
    fields: tuple[Field, ...]

    @functools.cached_property
    def by_number(self) -> dict[int, Field]:
        return {f.number: f for f in self.fields}

    def named(self, name: str) -> Field:
        return next(f for f in self.fields if f.json_name == name)

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]


@functools.cache
def _table() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(TABLE.read_text())
    return table


@functools.cache
def message(name: str) -> Message:
    entry = _table()["messages"][name]
    fields = tuple(
        Field(number, json_name, go_name, type_, *(flag in flags for flag in "rmpozi"))
        for number, json_name, go_name, type_, flags in entry["fields"]
    )
    return Message(name, entry.get("render", ""), fields)


def is_message(name: str) -> bool:
    """Whether a field's type is a message of the table (else a scalar)."""
    return name in _table()["messages"]


def message_for(api_version: str, kind: str) -> str | None:
    """The message of a kind the server serves (or DeleteOptions); None for any other."""
    found: str | None = _table()["kinds"].get(f"{api_version}/{kind}")
    return found


# --- request bodies -------------------------------------------------------------------------------------------


def read_object(data: bytes, api_version: str, kind: str) -> dict[str, Any]:
    """The object a create or update of kind ``kind`` sends, with its apiVersion and kind (the resource's where
    the body names none). :class:`DecodeError` says what kube-apiserver answers (400) for a body it cannot use."""
    try:
        actual_version, actual_kind, raw = envelope(data)
    except DecodeError as exc:
        raise DecodeError(
            f"the object provided is unrecognized (must be of type {kind}): {exc} ({summarize(data)})"
        ) from exc
    if not actual_kind:
        actual_kind = kind
    if not actual_version:
        actual_version = api_version
    cannot = f'{actual_kind} in version "{actual_version.rsplit("/", 1)[-1]}" cannot be handled as a {kind}'
    name = message_for(actual_version, actual_kind)
    if name is None:
        scheme = "pkg/runtime/scheme.go:111"
        raise DecodeError(
            f'{cannot}: no kind "{actual_kind}" is registered for version "{actual_version}" in scheme "{scheme}"'
        )
    expected = message_for(api_version, kind)
    if name != expected:
        # Go decodes the kind the body names, then fails to convert it to the resource's (internal) type.
        source, target = name.split("."), str(expected).split(".")
        converting = f"({source[-2]}.{actual_kind}) to ({target[-3]}.{kind})"
        raise DecodeError(f"{cannot}: converting {converting}: unknown conversion")
    try:
        body = to_json(name, raw)
    except DecodeError as exc:
        raise DecodeError(f"{cannot}: {exc}") from exc
    return {"apiVersion": actual_version, "kind": actual_kind, **body}


def read_delete_options(data: bytes) -> dict[str, Any]:
    """The DeleteOptions a delete sends; :class:`DecodeError` with kube-apiserver's message."""
    api_version, kind, raw = envelope(data)
    name = message_for("meta.k8s.io/v1", "DeleteOptions")
    if kind not in ("", "DeleteOptions") or name is None:
        raise DecodeError("decoded object cannot be converted to DeleteOptions")
    return {"apiVersion": api_version or "meta.k8s.io/v1", "kind": "DeleteOptions", **to_json(name, raw)}


def summarize(data: bytes) -> str:
    """The start of a body as Go's handlers quote it in errors: JSON as text, anything else in hex."""
    if not data:
        return "<empty>"
    head = data[:30]
    text = head.decode(errors="replace") if data.startswith(b"{") else head.hex()
    return text + " ..." if len(data) > 30 else text


# --- the envelope ---------------------------------------------------------------------------------------------


def envelope(data: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, raw) of a body: the type it names (either may be empty) and the object's bytes."""
    if not data:
        raise DecodeError("empty data")
    if not data.startswith(MAGIC):
        prefix = " ".join(str(b) for b in MAGIC)
        raise DecodeError(
            f"provided data does not appear to be a protobuf message, expected prefix [{prefix}]"
        )
    if len(data) == len(MAGIC):
        raise DecodeError("empty body")
    unknown = message(ENVELOPE)
    try:
        found = _collect(unknown, data[len(MAGIC) :])
        type_field = unknown.named("typeMeta")
        type_meta = _render(message(type_field.type), _joined(found.get(type_field.number, [])))
    except WireError as exc:
        raise DecodeError(str(exc)) from exc
    raw = found.get(unknown.named("raw").number, [b""])[-1]
    assert isinstance(raw, bytes)
    return str(type_meta.get("apiVersion") or ""), str(type_meta.get("kind") or ""), raw


def to_json(name: str, data: bytes) -> dict[str, Any]:
    """The JSON object Go marshals message ``name`` to, decoded from ``data``."""
    try:
        rendered = _render(message(name), data)
    except WireError as exc:
        raise DecodeError(str(exc)) from exc
    assert isinstance(rendered, dict)
    return rendered


# --- reading fields -------------------------------------------------------------------------------------------

Scalar = str | bytes | bool | int | float


def _collect(msg: Message, data: bytes) -> dict[int, list[Scalar]]:
    """Field number -> its values in order, for the fields ``msg`` knows: scalars converted, messages' and map
    entries' payloads as bytes."""
    found: dict[int, list[Scalar]] = {}
    for number, wire_type, value in protowire.fields(data, msg.short_name):
        field = msg.by_number.get(number)
        if field is None:
            continue
        if field.map and wire_type != LEN:
            raise WireError(f"proto: wrong wireType = {wire_type} for field {field.go_name}")
        found.setdefault(number, []).extend([value] if field.map else _values(field, wire_type, value))
    return found


def _values(field: Field, wire_type: int, value: protowire.Value) -> list[Scalar]:
    kind = field.type
    if kind in _VARINT_TYPES:
        if wire_type == VARINT:
            assert isinstance(value, int)
            return [_integer(kind, value)]
        if wire_type == LEN and field.repeated:
            assert isinstance(value, bytes)
            return [_integer(kind, v) for v in protowire.packed_varints(value)]
    elif kind in _FIXED_TYPES:
        size = 8 if _FIXED_TYPES[kind] == FIXED64 else 4
        if wire_type == _FIXED_TYPES[kind] or (wire_type == LEN and field.repeated):
            assert isinstance(value, bytes)
            if len(value) % size:
                raise WireError(protowire.UNEXPECTED_EOF)
            return list(struct.unpack(f"<{len(value) // size}{'d' if size == 8 else 'f'}", value))
    elif wire_type == LEN:
        assert isinstance(value, bytes)
        return [value.decode(errors="replace") if kind == "string" else value]
    raise WireError(f"proto: wrong wireType = {wire_type} for field {field.go_name}")


def _integer(kind: str, value: int) -> int | bool:
    if kind == "bool":
        return value != 0
    if kind == "int32":
        return protowire.signed(value, 32)
    if kind == "int64":
        return protowire.signed(value, 64)
    return value & 0xFFFFFFFF if kind == "uint32" else value


def _last(msg: Message, found: dict[int, list[Scalar]], name: str) -> Scalar | None:
    values = found.get(msg.named(name).number)
    return values[-1] if values else None


# --- rendering as Go's encoding/json does ---------------------------------------------------------------------


def _render(msg: Message, data: bytes) -> Any:
    found = _collect(msg, data)
    if msg.rendering:
        return _RENDERINGS[msg.rendering](msg, found, data)
    out: dict[str, Any] = {}
    for field in msg.fields:
        values = found.get(field.number, [])
        if field.inline:
            out.update(_render(message(field.type), _joined(values)))
            continue
        present, value = _field_value(field, values)
        if not present:
            if not field.omitempty:
                out[field.json_name] = None
            continue
        if (field.omitempty and is_empty(field, value)) or (
            field.omitzero and not field.pointer and value == _zero(field)
        ):
            continue
        out[field.json_name] = value
    return out


def _field_value(field: Field, values: list[Scalar]) -> tuple[bool, Any]:
    """(whether Go's field is set, its JSON value): a nil pointer, slice or map is not set."""
    if field.map:
        entries = dict(_entry(field, entry) for entry in values if isinstance(entry, bytes))
        return bool(entries), dict(sorted(entries.items()))
    if field.repeated:
        return bool(values), [_json_value(field.type, v) for v in values]
    if not values:
        return (False, None) if field.pointer else (True, _zero(field))
    if is_message(field.type):
        return True, _json_value(field.type, _joined(values))  # a message given in parts is their merge
    return True, _json_value(field.type, values[-1])


def _joined(values: list[Scalar]) -> bytes:
    return b"".join(v for v in values if isinstance(v, bytes))


def _entry(field: Field, data: bytes) -> tuple[str, Any]:
    """One entry of a map field: key 1, value 2."""
    key: Scalar = ""
    value: Scalar | None = None
    key_field = dataclasses.replace(field, type="string", map=False, repeated=False)
    value_field = dataclasses.replace(field, map=False, repeated=False)
    for number, wire_type, raw in protowire.fields(data, field.go_name):
        if number == 1:
            key = _values(key_field, wire_type, raw)[-1]
        elif number == 2:
            value = _values(value_field, wire_type, raw)[-1]
    if value is None:
        return str(key), _zero(value_field)
    return str(key), _json_value(field.type, value)


def _json_value(kind: str, value: Scalar) -> Any:
    if kind == "bytes":
        assert isinstance(value, bytes)
        return base64.b64encode(value).decode()
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, bytes):
        return _render(message(kind), value)
    return value


def _number(value: float) -> float | int:
    """Go writes a whole float64 without a fraction: as the JSON a client would have sent."""
    if not math.isfinite(value):
        raise WireError(f"json: unsupported value: {value}")
    return int(value) if value.is_integer() and abs(value) < 1e21 else value


def _zero(field: Field) -> Any:
    """The JSON of the zero value of a field's (non-pointer) Go type."""
    if is_message(field.type):
        return _render(message(field.type), b"")
    return {"string": "", "bytes": None, "bool": False}.get(field.type, 0)


def is_empty(field: Field, value: Any) -> bool:
    """Go's omitempty: false, 0, "", and empty slices and maps are left out; structs never are."""
    if field.map or field.repeated:
        return not value
    if is_message(field.type):
        return False
    return value in (None, "", 0, False) and not (field.pointer and value is not None)


# --- the types that marshal themselves ------------------------------------------------------------------------

Found = dict[int, list[Scalar]]


def _time(msg: Message, found: Found, data: bytes) -> str | None:
    """metav1.Time: RFC 3339 in UTC to the second; the zero time (an empty message) is null."""
    if not data:
        return None
    return _timestamp(_last(msg, found, "seconds")).strftime("%Y-%m-%dT%H:%M:%SZ")


def _microtime(msg: Message, found: Found, data: bytes) -> str | None:
    """metav1.MicroTime: RFC 3339 in UTC with six fraction digits."""
    if not data:
        return None
    return _timestamp(_last(msg, found, "seconds"), _last(msg, found, "nanos")).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"
    )


def _timestamp(seconds: Scalar | None, nanos: Scalar | None = 0) -> datetime:
    """Go's time.Unix(seconds, nanos) in UTC, to the microsecond (truncated, as MicroTime is)."""
    whole = seconds if isinstance(seconds, int) else 0
    fraction = nanos if isinstance(nanos, int) else 0
    micros = int(fraction / 1000)
    try:
        return EPOCH + timedelta(seconds=whole, microseconds=micros)
    except OverflowError as exc:
        raise WireError("Time.MarshalJSON: year outside of range [0,9999]") from exc


def _raw(msg: Message, found: Found, data: bytes) -> Any:
    """RawExtension, FieldsV1 and apiextensions' JSON: their bytes are the JSON; none is null."""
    raw = _last(msg, found, msg.fields[0].json_name)
    if not isinstance(raw, bytes) or not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireError(f"json: error calling MarshalJSON for type {msg.short_name}: {exc}") from exc


def _quantity(msg: Message, found: Found, data: bytes) -> str:
    value = _last(msg, found, "string")
    return str(value) if value else "0"


def _int_or_string(msg: Message, found: Found, data: bytes) -> int | str:
    if _last(msg, found, "type") == 1:
        return str(_last(msg, found, "strVal") or "")
    value = _last(msg, found, "intVal")
    return value if isinstance(value, int) else 0


def _list(msg: Message, found: Found, data: bytes) -> list[Any] | None:
    """A named slice type (``type ExtraValue []string``), wrapped in a message of one repeated field."""
    field = msg.fields[0]
    items = found.get(field.number, [])
    return [_json_value(field.type, v) for v in items] or None


def _schema(msg: Message, found: Found) -> Any:
    schema = found.get(msg.named("schema").number)
    return _render(message(msg.named("schema").type), _joined(schema)) if schema else None


def _schema_or_bool(msg: Message, found: Found, data: bytes) -> Any:
    schema = _schema(msg, found)
    return schema if schema is not None else bool(_last(msg, found, "allows"))


def _schema_or_array(msg: Message, found: Found, data: bytes) -> Any:
    field = msg.named("jSONSchemas")
    schemas = found.get(field.number, [])
    return [_json_value(field.type, s) for s in schemas] if schemas else _schema(msg, found)


def _schema_or_strings(msg: Message, found: Found, data: bytes) -> Any:
    strings = found.get(msg.named("property").number, [])
    return list(strings) if strings else _schema(msg, found)


_RENDERINGS: Final[dict[str, Callable[[Message, Found, bytes], Any]]] = {
    "time": _time,
    "microtime": _microtime,
    "raw": _raw,
    "quantity": _quantity,
    "int-or-string": _int_or_string,
    "list": _list,
    "schema-or-bool": _schema_or_bool,
    "schema-or-array": _schema_or_array,
    "schema-or-strings": _schema_or_strings,
}
