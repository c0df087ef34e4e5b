"""Label and field selectors, with the grammar and the selectable fields of the upstream API server.

The API server filters LIST and WATCH with them; the dispatcher matches worker labels against a Job's
``multiqueue.dev/cluster-selector`` annotation with the same code.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from multiqueue.api.meta import as_dict, as_list, label_value_errors, metadata, qualified_name_errors


class SelectorError(ValueError):
    """A selector that cannot be parsed; the message says why (the server answers 400)."""


@dataclasses.dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # =, !=, in, notin, exists, !, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator in ("=", "in"):
            return present and value in self.values
        if self.operator in ("!=", "notin"):
            return not present or value not in self.values
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if not present:
            return False
        try:
            number = int(str(value))
        except ValueError:
            return False
        bound = int(self.values[0])
        return number > bound if self.operator == "gt" else number < bound

    def __str__(self) -> str:
        if self.operator == "exists":
            return self.key
        if self.operator == "!":
            return f"!{self.key}"
        if self.operator in ("in", "notin"):
            return f"{self.key} {self.operator} ({','.join(self.values)})"
        symbol = {"gt": ">", "lt": "<"}.get(self.operator, self.operator)
        return f"{self.key}{symbol}{self.values[0]}"


@dataclasses.dataclass(frozen=True)
class LabelSelector:
    """A conjunction of requirements; no requirements selects everything."""

    requirements: tuple[Requirement, ...] = ()
    selects_nothing: bool = False

    @property
    def empty(self) -> bool:
        return not self.requirements and not self.selects_nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.selects_nothing:
            return False
        found = labels or {}
        return all(r.matches(found) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


NOTHING: Final = LabelSelector(selects_nothing=True)
EVERYTHING: Final = LabelSelector()

_TOKEN: Final = re.compile(r"\s*(\(|\)|,|!=|==|=|>|<|!|[^\s(),!=<>]+)")


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None:
            raise SelectorError(f"unable to parse requirement: invalid character at {text[position:]!r}")
        tokens.append(match.group(1))
        position = match.end()
    return tokens


def _check_key(key: str) -> None:
    problems = qualified_name_errors(key)
    if problems:
        raise SelectorError(f'unable to parse requirement: key: Invalid value: "{key}": {problems[0]}')


def _check_value(key: str, value: str) -> None:
    problems = label_value_errors(value)
    if problems:
        raise SelectorError(
            f'unable to parse requirement: values[0][{key}]: Invalid value: "{value}": {problems[0]}'
        )


def parse_label_selector(text: str) -> LabelSelector:
    """Parse ``a=b,c!=d,e in (x,y),f notin (z),g,!h,i>3``; raises :class:`SelectorError`."""
    tokens = _tokens(text or "")
    requirements: list[Requirement] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "!":
            if i + 1 >= len(tokens) or tokens[i + 1] in "(),=<>":
                raise SelectorError("found end of string, expected: identifier")
            _check_key(tokens[i + 1])
            requirements.append(Requirement(tokens[i + 1], "!"))
            i += 2
        else:
            key = tokens[i]
            if key in ("(", ")", ",", "=", "==", "!=", "<", ">"):
                raise SelectorError(f"found '{key}', expected: !, identifier, or 'end of string'")
            _check_key(key)
            op = tokens[i + 1] if i + 1 < len(tokens) else ","
            if op == ",":
                requirements.append(Requirement(key, "exists"))
                i += 1
            elif op in ("=", "==", "!="):
                value = tokens[i + 2] if i + 2 < len(tokens) and tokens[i + 2] not in "(),=<>!" else ""
                _check_value(key, value)
                requirements.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
                i += 3 if value else 2
            elif op in (">", "<"):
                value = tokens[i + 2] if i + 2 < len(tokens) else ""
                if not re.fullmatch(r"-?\d+", value):
                    raise SelectorError(
                        "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer"
                    )
                requirements.append(Requirement(key, "gt" if op == ">" else "lt", (value,)))
                i += 3
            elif op in ("in", "notin"):
                if i + 2 >= len(tokens) or tokens[i + 2] != "(":
                    raise SelectorError("found end of string, expected: '('")
                values: list[str] = []
                j = i + 3
                expect_value = True
                while j < len(tokens) and tokens[j] != ")":
                    if tokens[j] == ",":
                        if expect_value:
                            values.append("")
                        expect_value = True
                    else:
                        _check_value(key, tokens[j])
                        values.append(tokens[j])
                        expect_value = False
                    j += 1
                if j >= len(tokens):
                    raise SelectorError("found end of string, expected: ')'")
                requirements.append(Requirement(key, op, tuple(sorted(set(values)))))
                i = j + 1
            else:
                raise SelectorError(f"found '{op}', expected: '=', '!=', '==', 'in', notin'")
        if i < len(tokens):
            if tokens[i] != ",":
                raise SelectorError(f"found '{tokens[i]}', expected: ',' or 'end of string'")
            i += 1
            if i >= len(tokens):
                raise SelectorError("found end of string, expected: identifier")
    return LabelSelector(tuple(requirements))


def label_selector_from_dict(selector: Any) -> LabelSelector:
    """A ``metav1.LabelSelector``: None selects nothing (as upstream's LabelSelectorAsSelector), {} everything."""
    if selector is None:
        return NOTHING
    data = as_dict(selector)
    requirements = [Requirement(str(k), "=", (str(v),)) for k, v in as_dict(data.get("matchLabels")).items()]
    for expression in as_list(data.get("matchExpressions")):
        expr = as_dict(expression)
        key = str(expr.get("key", ""))
        values = tuple(sorted(str(v) for v in as_list(expr.get("values"))))
        operator = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}.get(
            str(expr.get("operator"))
        )
        if operator is None:
            raise SelectorError(f'"{expr.get("operator")}" is not a valid label selector operator')
        requirements.append(Requirement(key, operator, values))
    return LabelSelector(tuple(requirements))


# --- field selectors ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FieldSelector:
    terms: tuple[tuple[str, str, str], ...] = ()  # (field, "=" | "!=", value)

    @property
    def empty(self) -> bool:
        return not self.terms

    @property
    def fields(self) -> list[str]:
        return [field for field, _, _ in self.terms]

    def matches(self, fields: Mapping[str, str]) -> bool:
        for field, op, value in self.terms:
            actual = fields.get(field, "")
            if (actual == value) != (op == "="):
                return False
        return True


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            current.append(char)
            escaped = True
        elif char == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse_field_selector(text: str) -> FieldSelector:
    """Parse ``a=b,c!=d`` (``==`` allowed; ``\\,`` and ``\\=`` escape); raises :class:`SelectorError`."""
    if not text:
        return FieldSelector()
    terms: list[tuple[str, str, str]] = []
    for part in _split_unescaped(text, ","):
        for op in ("!=", "==", "="):
            index = _find_unescaped(part, op)
            if index >= 0:
                field = part[:index].strip()
                value = _unescape(part[index + len(op) :])
                terms.append((field, "!=" if op == "!=" else "=", value))
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
    return FieldSelector(tuple(terms))


def _find_unescaped(text: str, needle: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(needle, i):
            return i
        i += 1
    return -1


def _path(obj: Any, dotted: str) -> str:
    current: Any = obj
    for part in dotted.split("."):
        current = as_dict(current).get(part)
    if isinstance(current, bool):
        return "true" if current else "false"
    return "" if current is None else str(current)


_EXTRA_FIELDS: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    ("", "Pod"): (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    ("", "Event"): (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    ("batch", "Job"): ("status.successful",),
    ("", "Secret"): ("type",),
    ("", "Namespace"): ("status.phase",),
    ("", "Node"): ("spec.unschedulable",),
}


def fields_of(group: str, kind: str, obj: Any) -> dict[str, str]:
    """The selectable fields of ``obj`` and their values, as the upstream API server exposes them."""
    meta = metadata(obj)
    fields = {
        "metadata.name": str(meta.get("name") or ""),
        "metadata.namespace": str(meta.get("namespace") or ""),
    }
    for field in _EXTRA_FIELDS.get((group, kind), ()):
        if field == "status.successful":
            fields[field] = _path(obj, "status.succeeded") or "0"
        elif field == "source":
            fields[field] = _path(obj, "source.component")
        elif field == "spec.hostNetwork":
            fields[field] = _path(obj, field) or "false"
        else:
            fields[field] = _path(obj, field)
    return fields


def unsupported_fields(group: str, kind: str, selector: FieldSelector) -> list[str]:
    """Fields the selector names that this kind cannot be selected by (the server answers 400)."""
    supported: Iterable[str] = ("metadata.name", "metadata.namespace", *_EXTRA_FIELDS.get((group, kind), ()))
    allowed = set(supported)
    return [f for f in selector.fields if f not in allowed]
