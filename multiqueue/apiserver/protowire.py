"""The protobuf wire format, both ways: the fields of an encoded message, and the bytes of fields to encode.

Knows tags, varints and lengths only; what a field number means is the caller's business. Errors say what Go's
generated unmarshalers (gogo-protobuf, which Kubernetes uses) say for the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

VARINT: Final = 0
FIXED64: Final = 1
LEN: Final = 2
START_GROUP: Final = 3
END_GROUP: Final = 4
FIXED32: Final = 5
_FIXED_SIZE: Final = {FIXED64: 8, FIXED32: 4}
UNEXPECTED_EOF: Final = "unexpected EOF"
INTEGER_OVERFLOW: Final = "proto: integer overflow"
NEGATIVE_LENGTH: Final = "proto: negative length found during unmarshaling"

# A field's value as read: an int for a varint, the bytes for anything else (a length-delimited payload, or the
# little-endian bytes of a fixed32/fixed64).
Value = int | bytes


class WireError(ValueError):
    """Bytes that are not a protobuf message; the text is Go's."""


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    """The unsigned varint at ``at`` and the offset after it."""
    value = shift = 0
    while True:
        if shift >= 64:
            raise WireError(INTEGER_OVERFLOW)
        if at >= len(data):
            raise WireError(UNEXPECTED_EOF)
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, at
        shift += 7


def fields(data: bytes, message: str) -> Iterator[tuple[int, int, Value]]:
    """(field number, wire type, value) of each field of ``data``, in order; groups (no Kubernetes message has
    any) are skipped. ``message`` is the message's short name, for errors."""
    at = 0
    while at < len(data):
        key, at = read_varint(data, at)
        number, wire_type = key >> 3, key & 7
        if wire_type == END_GROUP:
            raise WireError(f"proto: {message}: wiretype end group for non-group")
        if number <= 0:
            raise WireError(f"proto: {message}: illegal tag {number} (wire type {wire_type})")
        if wire_type == VARINT:
            value, at = read_varint(data, at)
            yield number, wire_type, value
        elif wire_type == LEN:
            length, at = read_varint(data, at)
            if length >= 1 << 63:
                raise WireError(NEGATIVE_LENGTH)
            if at + length > len(data):
                raise WireError(UNEXPECTED_EOF)
            yield number, wire_type, data[at : at + length]
            at += length
        elif wire_type in _FIXED_SIZE:
            end = at + _FIXED_SIZE[wire_type]
            if end > len(data):
                raise WireError(UNEXPECTED_EOF)
            yield number, wire_type, data[at:end]
            at = end
        elif wire_type == START_GROUP:
            at = _skip_group(data, at)
        else:
            raise WireError(f"proto: illegal wireType {wire_type}")


def _skip_group(data: bytes, at: int) -> int:
    """The offset after the group that starts at ``at`` (its start tag already read)."""
    depth = 1
    while depth:
        key, at = read_varint(data, at)
        wire_type = key & 7
        if wire_type == VARINT:
            _, at = read_varint(data, at)
        elif wire_type == LEN:
            length, at = read_varint(data, at)
            at += length
        elif wire_type in _FIXED_SIZE:
            at += _FIXED_SIZE[wire_type]
        elif wire_type == START_GROUP:
            depth += 1
        elif wire_type == END_GROUP:
            depth -= 1
        else:
            raise WireError(f"proto: illegal wireType {wire_type}")
        if at > len(data):
            raise WireError(UNEXPECTED_EOF)
    return at


def packed_varints(data: bytes) -> list[int]:
    """The varints of a packed repeated field's payload."""
    values, at = [], 0
    while at < len(data):
        value, at = read_varint(data, at)
        values.append(value)
    return values


def signed(value: int, bits: int) -> int:
    """A varint read as Go's intN: the low ``bits`` bits, two's complement."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


# --- encoding -------------------------------------------------------------------------------------------------


def varint(value: int) -> bytes:
    """``value`` as a varint; a negative one as Go writes an int32 or int64 (ten bytes, two's complement)."""
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def varint_field(number: int, value: int) -> bytes:
    return tag(number, VARINT) + varint(value)


def len_field(number: int, payload: bytes) -> bytes:
    return tag(number, LEN) + varint(len(payload)) + payload


def string_field(number: int, text: str) -> bytes:
    return len_field(number, text.encode())
