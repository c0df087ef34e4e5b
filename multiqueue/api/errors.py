"""Field errors and Kubernetes ``Status`` objects, built the way the upstream API server builds them.

Validation in ``api/`` returns a list of :class:`FieldError`; the embedded API server turns that list into a
422 ``Status`` with ``details.causes`` (:func:`invalid_status`), and clients read the same shape back. Keeping the
message format identical to upstream's means ``kubectl`` users see the errors they already know.
"""

from __future__ import annotations

import dataclasses
import decimal
import json
import math
from enum import StrEnum
from typing import Any, Final


class SelectorError(ValueError):
    """A label or field selector that cannot be parsed; the message says why (the server answers 400)."""


class ErrorType(StrEnum):
    """The ``details.causes[].reason`` values upstream uses for field errors."""

    INVALID = "FieldValueInvalid"
    TYPE_INVALID = "FieldValueTypeInvalid"
    TOO_MANY = "FieldValueTooMany"
    REQUIRED = "FieldValueRequired"
    DUPLICATE = "FieldValueDuplicate"
    TOO_LONG = "FieldValueTooLong"
    NOT_SUPPORTED = "FieldValueNotSupported"
    FORBIDDEN = "FieldValueForbidden"
    NOT_FOUND = "FieldValueNotFound"

    @property
    def label(self) -> str:
        """The human words upstream prints before the value (``Invalid value``, ``Required value``...)."""
        return _LABELS[self]


_LABELS: Final = {
    ErrorType.INVALID: "Invalid value",
    ErrorType.TYPE_INVALID: "Invalid value",
    ErrorType.TOO_MANY: "Too many",
    ErrorType.REQUIRED: "Required value",
    ErrorType.DUPLICATE: "Duplicate value",
    ErrorType.TOO_LONG: "Too long",
    ErrorType.NOT_SUPPORTED: "Unsupported value",
    ErrorType.FORBIDDEN: "Forbidden",
    ErrorType.NOT_FOUND: "Not found",
}

# Upstream prints no value for these types, whatever was passed.
_VALUELESS: Final = frozenset({ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG})


class _Omitted:
    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Final = _Omitted()
"""Marks an error whose bad value is not printed."""


@dataclasses.dataclass(frozen=True)
class FieldError:
    """One problem with one field, e.g. ``status.conditions: Invalid value: ...: cannot ...``."""

    type: ErrorType
    field: str
    detail: str = ""
    value: Any = dataclasses.field(default=OMITTED, compare=False)

    def body(self) -> str:
        """The error without its field path, as upstream puts it in ``causes[].message``."""
        text = self.type.label
        if self.type not in _VALUELESS and self.value is not OMITTED:
            text = f"{text}: {format_value(self.value)}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    def message(self) -> str:
        """``field: body``; Go keeps the separator when the error is about the whole object (no field)."""
        return f"{self.field}: {self.body()}"

    def __str__(self) -> str:
        return self.message()


@dataclasses.dataclass(frozen=True)
class Printed:
    """A bad value already printed as upstream prints it (a Go struct, say, whose fields keep their order)."""

    text: str


def format_value(value: Any) -> str:
    """Print a bad value roughly as Go's ``%v``/``%q`` would: strings quoted, numbers bare, the rest as JSON."""
    if isinstance(value, Printed):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return json.dumps(value)
    if value is None:
        return "null"
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(value)


def go_float(value: float) -> str:
    """A float as Go's ``%v`` prints it: the shortest digits, in exponent form below 1e-4 and from 1e6 on."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    shortest = decimal.Decimal(repr(abs(value))).normalize()
    exponent = shortest.adjusted()
    if -4 <= exponent < 6:
        return sign + repr(abs(value)).removesuffix(".0")
    digits = "".join(str(d) for d in shortest.as_tuple().digits)
    mantissa = digits[0] + (f".{digits[1:]}" if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(ErrorType.INVALID, path, detail, value)


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(ErrorType.REQUIRED, path, detail)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(ErrorType.DUPLICATE, path, "", value)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(ErrorType.FORBIDDEN, path, detail)


def too_long(path: str, limit: int) -> FieldError:
    return FieldError(ErrorType.TOO_LONG, path, f"may not be more than {limit} bytes")


def not_supported(path: str, value: Any, supported: list[str]) -> FieldError:
    quoted = ", ".join(json.dumps(s) for s in supported)
    return FieldError(ErrorType.NOT_SUPPORTED, path, f"supported values: {quoted}", value)


def type_invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(ErrorType.TYPE_INVALID, path, detail, value)


def too_many(path: str, actual: int, limit: int) -> FieldError:
    return FieldError(
        ErrorType.TOO_MANY, path, f"must have at most {limit} item{'' if limit == 1 else 's'}", actual
    )


def immutable(path: str, value: Any = OMITTED) -> FieldError:
    return FieldError(ErrorType.INVALID, path, "field is immutable", value)


def non_negative(path: str, value: Any) -> list[FieldError]:
    """Upstream's ValidateNonnegativeField: one error when ``value`` is a negative number."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
        return [invalid(path, value, "must be greater than or equal to 0")]
    return []


def non_negative_integer(path: str, value: Any) -> list[FieldError]:
    """An optional non-negative integer: upstream cannot even decode another JSON type into its integer fields."""
    if value is None:
        return []
    if not isinstance(value, int) or isinstance(value, bool):
        return [invalid(path, value, "must be an integer")]
    return non_negative(path, value)


# --- Status objects -------------------------------------------------------------------------------------------


def status(
    code: int,
    reason: str,
    message: str,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``v1 Status`` failure object, the body of every error the API server returns."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def qualified_kind(kind: str, group: str) -> str:
    """``Job.batch``, or just ``Pod`` for the core group, as upstream names a kind in messages."""
    return f"{kind}.{group}" if group else kind


def _details(name: str, group: str, kind: str) -> dict[str, Any]:
    """Go leaves out each empty one (omitempty)."""
    return {k: v for k, v in (("name", name), ("group", group), ("kind", kind)) if v}


def invalid_status(kind: str, group: str, name: str, errors: list[FieldError]) -> dict[str, Any]:
    """422 Invalid with one cause per field error, exactly like upstream's ``NewInvalid``."""
    messages = [e.message() for e in errors]
    joined = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    details = _details(name, group, kind)
    details["causes"] = [
        {"reason": str(e.type), "message": e.body(), **({"field": e.field} if e.field else {})}
        for e in errors
    ]
    return status(422, "Invalid", f'{qualified_kind(kind, group)} "{name}" is invalid: {joined}', details)


def not_found_status(resource: str, group: str, name: str) -> dict[str, Any]:
    what = f"{resource}.{group}" if group else resource
    # Go's %q: a name from a request path may hold any character.
    return status(404, "NotFound", f"{what} {strconv_quote(name)} not found", _details(name, group, resource))


def already_exists_status(resource: str, group: str, name: str) -> dict[str, Any]:
    what = f"{resource}.{group}" if group else resource
    return status(409, "AlreadyExists", f'{what} "{name}" already exists', _details(name, group, resource))


def conflict_status(resource: str, group: str, name: str, why: str) -> dict[str, Any]:
    what = f"{resource}.{group}" if group else resource
    message = f'Operation cannot be fulfilled on {what} "{name}": {why}'
    return status(409, "Conflict", message, _details(name, group, resource))


def forbidden_status(resource: str, group: str, name: str, why: str) -> dict[str, Any]:
    what = f"{resource}.{group}" if group else resource
    return status(403, "Forbidden", f'{what} "{name}" is forbidden: {why}', _details(name, group, resource))


def gone_status(message: str) -> dict[str, Any]:
    return status(410, "Expired", message)


def bad_request_status(message: str) -> dict[str, Any]:
    return status(400, "BadRequest", message)


def strconv_quote(text: str) -> str:
    """Go's strconv.Quote, which strconv errors print their input with."""
    out: list[str] = []
    escapes = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
    for char in text:
        code = ord(char)
        if 0xD800 <= code <= 0xDFFF:
            char, code = "\ufffd", 0xFFFD  # Go never holds a lone surrogate; its decoder makes it U+FFFD
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char in escapes:
            out.append(escapes[char])
        elif char.isprintable():
            out.append(char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'
