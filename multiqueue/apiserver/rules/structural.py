"""Custom resources against their CustomResourceDefinition's structural schema, as kube-apiserver treats them.

Three steps, in upstream's order: :func:`prune` drops the fields the schema does not know (and says which, for
``fieldValidation``), :func:`apply_defaults` fills in the schema's defaults, and :func:`validate` checks the
object with the OpenAPI validator's rules and words (``spec.size in body must be of type integer: "string"``).

Not covered: ``format``, ``allOf``/``anyOf``/``oneOf``/``not``, ``x-kubernetes-validations`` (CEL) rules and the
list-type invariants; an ``x-kubernetes-int-or-string`` field accepts an integer or a string and nothing else.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Final

from multiqueue.api.errors import (
    FieldError,
    go_float,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
    type_invalid,
)
from multiqueue.api.meta import as_dict
from multiqueue.api.types import Obj

IN: Final = "body"  # where the OpenAPI validator says a value was found
_META_FIELDS: Final = frozenset({"apiVersion", "kind", "metadata"})
PRESERVE: Final = "x-kubernetes-preserve-unknown-fields"
EMBEDDED: Final = "x-kubernetes-embedded-resource"
INT_OR_STRING: Final = "x-kubernetes-int-or-string"


# --- the schema as stored -----------------------------------------------------------------------------------

# Flags Go leaves out of a stored schema when false.
_FALSE_OMITTED: Final = (
    "exclusiveMaximum",
    "exclusiveMinimum",
    "uniqueItems",
    "nullable",
    EMBEDDED,
    INT_OR_STRING,
)
_NESTED: Final = ("properties", "patternProperties", "definitions", "dependencies")


def stored_schema(schema: Any) -> None:
    """A schema as kube-apiserver stores it after decoding: false flags dropped, at every level."""
    if isinstance(schema, list):
        for item in schema:
            stored_schema(item)
        return
    if not isinstance(schema, dict):
        return
    for flag in _FALSE_OMITTED:
        if schema.get(flag) is False:
            del schema[flag]
    for key in _NESTED:
        for sub in as_dict(schema.get(key)).values():
            stored_schema(sub)
    for key in ("items", "additionalProperties", "additionalItems", "not", "allOf", "anyOf", "oneOf"):
        stored_schema(schema.get(key))


# --- pruning ------------------------------------------------------------------------------------------------


def prune(obj: Obj, schema: Obj | None) -> list[str]:
    """Drop from a custom resource every field its schema does not know; their paths, sorted as upstream sorts
    them. ``apiVersion``, ``kind`` and ``metadata`` of the resource (and of embedded resources) stay."""
    found: list[str] = []
    _prune(obj, {**(schema or {}), EMBEDDED: True}, "", found)
    return sorted(found)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _additional(schema: Obj) -> Obj | None:
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def _prune(value: Any, schema: Obj | None, path: str, found: list[str]) -> None:
    if schema is not None and schema.get(PRESERVE) is True:
        _prune_known(value, schema, path, found)
        return
    if isinstance(value, dict):
        if schema is None:
            found += [_join(path, k) for k in value]
            value.clear()
            return
        properties = as_dict(schema.get("properties"))
        for key in list(value):
            if schema.get(EMBEDDED) is True and key in _META_FIELDS:
                continue
            if key in properties:
                _prune(value[key], as_dict(properties[key]), _join(path, key), found)
            elif _additional(schema) is not None:
                _prune(value[key], _additional(schema), _join(path, key), found)
            else:
                if key not in _META_FIELDS or path:
                    found.append(_join(path, key))
                del value[key]
    elif isinstance(value, list):
        items = as_dict(schema.get("items")) if schema is not None and "items" in schema else None
        for index, item in enumerate(value):
            _prune(item, items, f"{path}[{index}]", found)


def _prune_known(value: Any, schema: Obj, path: str, found: list[str]) -> None:
    """Under ``x-kubernetes-preserve-unknown-fields`` unknown fields stay; known ones are pruned inside."""
    if isinstance(value, dict):
        properties = as_dict(schema.get("properties"))
        for key, item in value.items():
            if schema.get(EMBEDDED) is True and key in _META_FIELDS:
                continue
            if key in properties:
                _prune(item, as_dict(properties[key]), _join(path, key), found)
            elif _additional(schema) is not None:
                _prune(item, _additional(schema), _join(path, key), found)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _prune_known(item, schema["items"], f"{path}[{index}]", found)


# --- defaulting ---------------------------------------------------------------------------------------------


def _non_nullable_null(value: Any, schema: Obj | None) -> bool:
    return value is None and schema is not None and schema.get("nullable") is not True


def apply_defaults(value: Any, schema: Obj | None) -> None:
    """Fill in absent fields (and nulls where null is not allowed) with the schema's defaults; drop the other
    nulls the schema does not allow, as upstream does before validating."""
    if schema is None:
        return
    if isinstance(value, dict):
        properties = as_dict(schema.get("properties"))
        for key, prop in properties.items():
            missing = key not in value or _non_nullable_null(value[key], as_dict(prop))
            if isinstance(prop, dict) and "default" in prop and missing:
                value[key] = json.loads(json.dumps(prop["default"]))
        extra = _additional(schema)
        for key in list(value):
            sub = as_dict(properties[key]) if key in properties else extra
            if sub is None:
                continue
            if _non_nullable_null(value[key], sub):
                if "default" in sub:
                    value[key] = json.loads(json.dumps(sub["default"]))
                else:
                    del value[key]
                    continue
            apply_defaults(value[key], sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            if _non_nullable_null(item, schema["items"]) and "default" in schema["items"]:
                value[index] = json.loads(json.dumps(schema["items"]["default"]))
            apply_defaults(value[index], schema["items"])


# --- validation ---------------------------------------------------------------------------------------------


def validate(value: Any, schema: Obj | None, under: str = "") -> list[FieldError]:
    """The schema's rules on ``value``, with the field paths and messages upstream reports: messages name
    fields from ``value`` down, causes from the object's root (``under`` is where ``value`` sits: "status" when
    the status subresource is checked alone)."""
    errs = _validate(value, schema or {}, "")
    if not under:
        return errs
    return [dataclasses.replace(e, field=_join(under, e.field)) if e.field != _NO_PATH else e for e in errs]


# Where upstream files an error its validator raised without a field (a nil path, printed so).
_NO_PATH: Final = "<nil>"


def _type_of(value: Any) -> str:
    """The JSON type the OpenAPI validator names a value by."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _type_errors(value: Any, schema: Obj, path: str) -> list[FieldError]:
    wanted = schema.get("type")
    if schema.get(INT_OR_STRING) is True and not wanted:
        wanted = "integer,string"
    if not wanted:
        return []
    allowed = str(wanted).split(",")
    actual = _type_of(value)
    if value is None and schema.get("nullable") is True:
        return []
    if actual in allowed or (actual == "number" and "integer" in allowed and float(value).is_integer()):
        return []
    if actual == "integer" and "number" in allowed:
        return []
    detail = f"{path} in {IN} must be of type {wanted}: {json.dumps(actual)}"
    errs = [type_invalid(path, actual, detail)]
    if actual == "number" and "integer" in allowed:
        # The number validator then finds the value out of an integer's range, and says so without a field.
        range_detail = f"Checked value must be of type integer (default format) in {path}"
        errs.append(invalid(_NO_PATH, "", range_detail))
    return errs


def _number_errors(value: float, schema: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    factor = schema.get("multipleOf")
    if isinstance(factor, int | float) and factor > 0 and (value / factor) % 1 != 0:
        errs.append(invalid(path, value, f"{path} in {IN} should be a multiple of {_go(factor)}"))
    limit = schema.get("minimum")
    if isinstance(limit, int | float):
        exclusive = schema.get("exclusiveMinimum") is True
        if value < limit or (exclusive and value == limit):
            word = "greater than" if exclusive else "greater than or equal to"
            errs.append(invalid(path, value, f"{path} in {IN} should be {word} {_go(limit)}"))
    limit = schema.get("maximum")
    if isinstance(limit, int | float):
        exclusive = schema.get("exclusiveMaximum") is True
        if value > limit or (exclusive and value == limit):
            word = "less than" if exclusive else "less than or equal to"
            errs.append(invalid(path, value, f"{path} in {IN} should be {word} {_go(limit)}"))
    return errs


def _go(number: float) -> str:
    """A bound as Go prints the float64 it is held in."""
    return go_float(float(number))


def _string_errors(value: str, schema: Obj, path: str) -> list[FieldError]:
    length = len(value)  # upstream counts characters (runes)
    most, least, pattern = schema.get("maxLength"), schema.get("minLength"), schema.get("pattern")
    if isinstance(most, int) and length > most:
        return [too_long(path, most)]
    if isinstance(least, int) and length < least:
        return [invalid(path, value, f"{path} in {IN} should be at least {least} chars long")]
    if isinstance(pattern, str) and re.search(pattern, value) is None:
        return [invalid(path, value, f"{path} in {IN} should match '{pattern}'")]
    return []


def _array_errors(value: list[Any], schema: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    items = schema.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            errs += _validate(item, items, f"{path}[{index}]")
    least, most = schema.get("minItems"), schema.get("maxItems")
    if isinstance(least, int) and len(value) < least:
        errs.append(invalid(path, len(value), f"{path} in {IN} should have at least {least} items"))
    if isinstance(most, int) and len(value) > most:
        errs.append(too_many(path, len(value), most))
    if schema.get("uniqueItems") is True:
        seen = [json.dumps(v, sort_keys=True) for v in value]
        if len(set(seen)) != len(seen):
            errs.append(invalid(path, "", f"{path} in {IN} shouldn't contain duplicates"))
    return errs


def _enum_errors(value: Any, schema: Obj, path: str) -> list[FieldError]:
    allowed = schema.get("enum")
    if not isinstance(allowed, list) or not allowed or value in allowed:
        return []
    shown = [v if isinstance(v, str) else json.dumps(v, separators=(",", ":")) for v in allowed]
    return [not_supported(path, value, shown)]


def _object_errors(value: Obj, schema: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    least, most = schema.get("minProperties"), schema.get("maxProperties")
    if isinstance(least, int) and len(value) < least:
        errs.append(invalid(path, len(value), f"{path} in {IN} should have at least {least} properties"))
    if isinstance(most, int) and len(value) > most:
        errs.append(too_many(path, len(value), most))
    properties = as_dict(schema.get("properties"))
    extra = _additional(schema)
    for key in sorted(value):
        if key in properties:
            errs += _validate(value[key], as_dict(properties[key]), _join(path, key))
        elif extra is not None:
            errs += _validate(value[key], extra, _join(path, key))
    for key in schema.get("required") or []:
        if key not in value:
            errs.append(required(_join(path, str(key))))
    return errs


def _validate(value: Any, schema: Obj, path: str) -> list[FieldError]:
    """The validators upstream runs on one value, in its order: type, string, number, array, enum, object."""
    errs = _type_errors(value, schema, path)
    if isinstance(value, str):
        errs += _string_errors(value, schema, path)
    if isinstance(value, int | float) and not isinstance(value, bool):
        errs += _number_errors(value, schema, path)
    if isinstance(value, list):
        errs += _array_errors(value, schema, path)
    errs += _enum_errors(value, schema, path)
    if isinstance(value, dict):
        errs += _object_errors(value, schema, path)
    return errs
