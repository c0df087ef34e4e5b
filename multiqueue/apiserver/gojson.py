"""Objects of built-in kinds as Go's encoding/json writes what it read: empty ``omitempty`` fields left out.

A client may send ``data: {}``, ``env: []``, ``hostNetwork: false`` or ``"labels": null``. kube-apiserver decodes
them into its Go types and writes them back without the fields whose tag says omitempty, so every reader sees them
absent (the official client reads such a ConfigMap's ``data`` as None). The field facts (JSON names, omitempty,
pointers, inlined structs) come from the same generated table the protobuf decoder reads.
"""

from __future__ import annotations

from typing import Any

from multiqueue.api.types import Obj
from multiqueue.apiserver import protobuf


def omit_empty(api_version: str, kind: str, obj: Obj) -> None:
    """Drop, in place and at every depth, the fields Go would not write back; kinds without Go types stay."""
    name = protobuf.message_for(api_version, kind)
    if name is not None:
        _trim(protobuf.message(name), obj)


def _trim(msg: protobuf.Message, obj: dict[str, Any]) -> None:
    if msg.rendering:
        return  # a type that marshals itself (Time, Quantity, RawExtension...) is taken as written
    for field in msg.fields:
        if field.inline:
            _trim(protobuf.message(field.type), obj)
            continue
        if field.json_name not in obj:
            continue
        value = obj[field.json_name]
        struct = protobuf.is_message(field.type) and not (field.pointer or field.map or field.repeated)
        # omitempty never leaves out a struct that is not a pointer: null there is its zero value, written back.
        if field.omitempty and not struct and (value is None or protobuf.is_empty(field, value)):
            del obj[field.json_name]
            continue
        if not protobuf.is_message(field.type):
            continue
        nested = protobuf.message(field.type)
        if field.map and isinstance(value, dict):
            items: list[Any] = list(value.values())
        elif field.repeated and isinstance(value, list):
            items = value
        else:
            items = [value]
        for item in items:
            if isinstance(item, dict):
                _trim(nested, item)
