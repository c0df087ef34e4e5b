"""Label and field selectors, with the grammar, messages and selectable fields of the upstream API server.

The API server filters LIST and WATCH with them; the dispatcher matches worker labels against a Job's
``multiqueue.dev/cluster-selector`` annotation with the same code. Parsing never raises anything but
:class:`SelectorError`, whose message is upstream's, so a bad ``-l`` reads as it does against a real cluster.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from enum import Enum, StrEnum
from typing import Any, Final

from multiqueue.api.errors import FieldError, invalid
from multiqueue.api.meta import as_dict, as_list, label_value_errors, qualified_name_errors
from multiqueue.api.types import Obj


class SelectorError(ValueError):
    """A selector that cannot be parsed; the message says why (the server answers 400)."""


# --- label selectors ----------------------------------------------------------------------------------------


class Operator(StrEnum):
    """Upstream's ``selection.Operator`` values."""

    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_EXACT: Final = frozenset({Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS})
_SET: Final = frozenset({Operator.IN, Operator.NOT_IN})
_UNARY: Final = frozenset({Operator.EXISTS, Operator.DOES_NOT_EXIST})
_NUMERIC: Final = frozenset({Operator.GREATER_THAN, Operator.LESS_THAN})
# Operators a missing label satisfies.
_ABSENCE_MATCHES: Final = frozenset({Operator.NOT_EQUALS, Operator.NOT_IN, Operator.DOES_NOT_EXIST})

_INT64: Final = re.compile(r"[+-]?[0-9]+")


def _int64(text: Any) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``, or None where it fails."""
    if not isinstance(text, str) or not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


@dataclasses.dataclass(frozen=True)
class Requirement:
    """One ``key op values`` term; build it with :func:`requirement`, which validates it as upstream does."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()  # sorted and unique

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.key not in labels:
            return self.operator in _ABSENCE_MATCHES
        value = labels[self.key]
        if self.operator in _UNARY:
            return self.operator is Operator.EXISTS
        if self.operator in _NUMERIC:
            have, bound = _int64(value), _int64(self.values[0])
            if have is None or bound is None:
                return False
            return have > bound if self.operator is Operator.GREATER_THAN else have < bound
        return (value in self.values) != (self.operator in _ABSENCE_MATCHES)

    def __str__(self) -> str:
        if self.operator in _UNARY:
            return f"!{self.key}" if self.operator is Operator.DOES_NOT_EXIST else self.key
        values = ",".join(self.values)
        if self.operator in _SET:
            return f"{self.key} {self.operator} ({values})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(self.operator, self.operator)
        return f"{self.key}{symbol}{values}"


def _aggregate(errors: list[FieldError]) -> str:
    """Upstream's aggregate error text: one message alone, several in brackets."""
    messages = [error.message() for error in errors]
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def requirement(key: str, operator: Operator, values: Sequence[str] = ()) -> Requirement:
    """Upstream's ``NewRequirement``: a valid key, the value count the operator wants, valid label values,
    integers for ``gt``/``lt``; every problem is reported at once."""
    errors: list[FieldError] = []
    if problems := qualified_name_errors(key):
        errors.append(invalid("key", key, "; ".join(problems)))
    if operator in _SET and not values:
        errors.append(
            invalid("values", list(values), "for 'in', 'notin' operators, values set can't be empty")
        )
    elif operator in _EXACT and len(values) != 1:
        errors.append(invalid("values", list(values), "exact-match compatibility requires one single value"))
    elif operator in _UNARY and values:
        errors.append(
            invalid("values", list(values), "values set must be empty for exists and does not exist")
        )
    elif operator in _NUMERIC:
        if len(values) != 1:
            errors.append(
                invalid("values", list(values), "for 'Gt', 'Lt' operators, exactly one value is required")
            )
        errors += [
            invalid(f"values[{i}]", value, "for 'Gt', 'Lt' operators, the value must be an integer")
            for i, value in enumerate(values)
            if _int64(value) is None
        ]
    for i, value in enumerate(values):
        if problems := label_value_errors(value):
            errors.append(invalid(f"values[{i}][{key}]", value, "; ".join(problems)))
    if errors:
        raise SelectorError(_aggregate(errors))
    return Requirement(key, operator, tuple(sorted(set(values))))


@dataclasses.dataclass(frozen=True)
class LabelSelector:
    """A conjunction of requirements, sorted by key. No requirements selects everything; :data:`NOTHING`
    selects nothing (what a missing ``metav1.LabelSelector`` means)."""

    requirements: tuple[Requirement, ...] = ()
    selects_nothing: bool = False

    @property
    def empty(self) -> bool:
        """Whether the selector does not restrict anything (upstream's ``Empty``; false for NOTHING)."""
        return not self.requirements and not self.selects_nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.selects_nothing:
            return False
        found = labels if labels is not None else {}
        return all(r.matches(found) for r in self.requirements)

    def __str__(self) -> str:
        """The selector in the ``-l`` syntax it parses from (empty for everything and for nothing)."""
        return ",".join(str(r) for r in self.requirements)


NOTHING: Final = LabelSelector(selects_nothing=True)
EVERYTHING: Final = LabelSelector()


def _selector(requirements: list[Requirement]) -> LabelSelector:
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


class _Token(Enum):
    END = "end of string"
    IDENTIFIER = "identifier"
    OPEN = "("
    CLOSE = ")"
    COMMA = ","
    NOT = "!"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    GREATER = ">"
    LESS = "<"
    IN = "in"
    NOT_IN = "notin"


_LITERALS: Final = {token.value: token for token in _Token if token not in (_Token.END, _Token.IDENTIFIER)}
_SPECIAL: Final = frozenset("=!(),><")
_BLANK: Final = frozenset(" \t\r\n")

_OPERATOR_TOKENS: Final = {
    _Token.IN: Operator.IN,
    _Token.NOT_IN: Operator.NOT_IN,
    _Token.EQUALS: Operator.EQUALS,
    _Token.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
    _Token.NOT_EQUALS: Operator.NOT_EQUALS,
    _Token.GREATER: Operator.GREATER_THAN,
    _Token.LESS: Operator.LESS_THAN,
}
_EXPECTED_OPERATOR: Final = "in, notin, =, ==, !=, gt, lt"

_Item = tuple[_Token, str]


def _lex(text: str) -> list[_Item]:
    """Upstream's lexer: runs of special characters form the longest operator they can, anything else up to a
    blank or a special character is an identifier (or the keyword ``in``/``notin``)."""
    items: list[_Item] = []
    position = 0
    while True:
        while position < len(text) and text[position] in _BLANK:
            position += 1
        if position == len(text):
            items.append((_Token.END, ""))
            return items
        end = position + 1
        if text[position] in _SPECIAL:
            while end < len(text) and text[position : end + 1] in _LITERALS:
                end += 1
        else:
            while end < len(text) and text[end] not in _SPECIAL and text[end] not in _BLANK:
                end += 1
        word = text[position:end]
        items.append((_LITERALS.get(word, _Token.IDENTIFIER), word))
        position = end


class _Parser:
    """Upstream's recursive-descent label selector parser, error messages included."""

    def __init__(self, text: str) -> None:
        self._items = _lex(text)
        self._position = 0

    def _peek(self, values: bool = True) -> _Item:
        return self._as_value(self._items[self._position]) if values else self._items[self._position]

    def _take(self, values: bool = True) -> _Item:
        item = self._peek(values)
        self._position = min(self._position + 1, len(self._items) - 1)
        return item

    @staticmethod
    def _as_value(item: _Item) -> _Item:
        """Where a key or value is expected, ``in`` and ``notin`` are plain words."""
        return (_Token.IDENTIFIER, item[1]) if item[0] in (_Token.IN, _Token.NOT_IN) else item

    def selector(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self._peek()
            if token is _Token.END:
                return requirements
            if token not in (_Token.IDENTIFIER, _Token.NOT):
                raise SelectorError(f"found '{literal}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self._requirement())
            except SelectorError as exc:
                raise SelectorError(f"unable to parse requirement: {exc}") from None
            token, literal = self._take()
            if token is _Token.END:
                return requirements
            if token is not _Token.COMMA:
                raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            token, literal = self._peek()
            if token not in (_Token.IDENTIFIER, _Token.NOT):
                raise SelectorError(f"found '{literal}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        negated = self._peek()[0] is _Token.NOT
        if negated:
            self._take()
        token, key = self._take()
        if token is not _Token.IDENTIFIER:
            raise SelectorError(f"found '{key}', expected: identifier")
        if problems := qualified_name_errors(key):
            raise SelectorError(invalid("<nil>", key, "; ".join(problems)).message())
        if negated:
            return requirement(key, Operator.DOES_NOT_EXIST)
        if self._peek()[0] in (_Token.END, _Token.COMMA):
            return requirement(key, Operator.EXISTS)
        token, literal = self._take(values=False)
        operator = _OPERATOR_TOKENS.get(token)
        if operator is None:
            raise SelectorError(f"found '{literal}', expected: {_EXPECTED_OPERATOR}")
        values = self._value_set() if operator in _SET else self._exact_value()
        return requirement(key, operator, sorted(set(values)))

    def _exact_value(self) -> list[str]:
        if self._peek()[0] in (_Token.END, _Token.COMMA):
            return [""]
        token, literal = self._take()
        if token is not _Token.IDENTIFIER:
            raise SelectorError(f"found '{literal}', expected: identifier")
        return [literal]

    def _value_set(self) -> list[str]:
        """``(a, b, c)``; empty entries are empty values, as upstream reads ``(a,,b)`` and ``()``."""
        token, literal = self._take()
        if token is not _Token.OPEN:
            raise SelectorError(f"found '{literal}' expected: '('")
        token, literal = self._peek()
        if token is _Token.CLOSE:
            self._take()
            return [""]
        if token not in (_Token.IDENTIFIER, _Token.COMMA):
            raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        values: list[str] = []
        while True:
            token, literal = self._take()
            if token is _Token.IDENTIFIER:
                values.append(literal)
                following, after = self._peek()
                if following is _Token.CLOSE:
                    self._take()
                    return values
                if following is not _Token.COMMA:
                    raise SelectorError(f"found '{after}', expected: ',' or ')'")
            elif token is _Token.COMMA:
                following = self._peek()[0]
                if not values or following in (_Token.COMMA, _Token.CLOSE):
                    values.append("")
                if following is _Token.CLOSE:
                    self._take()
                    return values
            else:
                raise SelectorError(f"found '{literal}', expected: ',', or identifier")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse ``a=b,c!=d,e in (x,y),f notin (z),g,!h,i>3`` (upstream's ``labels.Parse``); raises
    :class:`SelectorError`. The empty string selects everything."""
    if not isinstance(text, str):
        raise SelectorError(f"a label selector must be a string, not {type(text).__name__}")
    return _selector(_Parser(text).selector())


_EXPRESSION_OPERATORS: Final = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def label_selector_from_dict(selector: Any) -> LabelSelector:
    """A ``metav1.LabelSelector`` object, as upstream's ``LabelSelectorAsSelector`` reads it: None selects
    nothing (:data:`NOTHING`), an object without terms selects everything (:data:`EVERYTHING`)."""
    if selector is None:
        return NOTHING
    if not isinstance(selector, dict):
        raise SelectorError(f"a label selector must be an object, not {type(selector).__name__}")
    match_labels = as_dict(selector.get("matchLabels"))
    expressions = [as_dict(e) for e in as_list(selector.get("matchExpressions"))]
    requirements = [requirement(str(k), Operator.EQUALS, [str(v)]) for k, v in match_labels.items()]
    for expression in expressions:
        operator = _EXPRESSION_OPERATORS.get(str(expression.get("operator")))
        if operator is None:
            raise SelectorError(
                f"{json.dumps(str(expression.get('operator')))} is not a valid label selector operator"
            )
        values = [str(v) for v in as_list(expression.get("values"))]
        requirements.append(requirement(str(expression.get("key") or ""), operator, values))
    return _selector(requirements)


# --- field selectors ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FieldTerm:
    """``field=value`` (or ``field!=value`` when ``negated``); a missing field reads as the empty string."""

    field: str
    value: str
    negated: bool = False

    def matches(self, fields: Mapping[str, str]) -> bool:
        return (fields.get(self.field, "") == self.value) != self.negated

    def __str__(self) -> str:
        escaped = re.sub(r"([\\,=])", r"\\\1", self.value)
        return f"{self.field}{'!=' if self.negated else '='}{escaped}"


@dataclasses.dataclass(frozen=True)
class FieldSelector:
    """A conjunction of field terms, sorted as upstream sorts them; no terms selects everything."""

    terms: tuple[FieldTerm, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.terms

    @property
    def fields(self) -> list[str]:
        """The field labels the selector names, for :func:`unsupported_fields`."""
        return [term.field for term in self.terms]

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(term.matches(fields) for term in self.terms)

    def __str__(self) -> str:
        return ",".join(str(term) for term in self.terms)


def _split_terms(text: str) -> list[str]:
    """Split on commas a backslash does not escape; the escapes stay in place for :func:`_unescape`."""
    terms: list[str] = []
    start = 0
    escaped = False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


_TERM: Final = re.compile(r"(.*?)(!=|==|=)(.*)", re.DOTALL)


def _unescape(value: str) -> str:
    """Upstream's ``UnescapeValue``: only ``\\\\``, ``\\,`` and ``\\=`` are escapes; a bare ``,`` or ``=`` is an error."""
    out: list[str] = []
    escaped = False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {char}")
        else:
            out.append(char)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(text: str) -> FieldSelector:
    """Parse ``a=b,c!=d`` (``==`` means ``=``; ``\\,``, ``\\=`` and ``\\\\`` escape in values), as upstream's
    ``fields.ParseSelector``; raises :class:`SelectorError`. The empty string selects everything."""
    if not isinstance(text, str):
        raise SelectorError(f"a field selector must be a string, not {type(text).__name__}")
    terms: list[FieldTerm] = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        match = _TERM.fullmatch(part)
        if match is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, operator, value = match.groups()
        terms.append(FieldTerm(field, _unescape(value), negated=operator == "!="))
    return FieldSelector(tuple(terms))


# --- the fields each kind can be selected by ----------------------------------------------------------------

_Extract = Callable[[Obj], str]


def _text(value: Any) -> str:
    """A field value as the API server prints it into a field set."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None or isinstance(value, dict | list) else str(value)


def _at(dotted: str, default: str = "") -> _Extract:
    """Reads the field at a dotted path, ``default`` when it is absent or empty."""
    steps = dotted.split(".")

    def extract(obj: Obj) -> str:
        value: Any = obj
        for step in steps:
            value = as_dict(value).get(step)
        return _text(value) or default

    return extract


def _first_pod_ip(pod: Obj) -> str:
    """The primary pod IP: upstream reads ``status.podIPs[0]``, which ``status.podIP`` mirrors."""
    ips = as_list(as_dict(pod.get("status")).get("podIPs"))
    return _text(as_dict(ips[0]).get("ip")) if ips else _at("status.podIP")(pod)


def _event_source(event: Obj) -> str:
    """``source.component``, or the reporting controller of events written through events.k8s.io."""
    return _at("source.component")(event) or _at("reportingComponent")(event)


def _never_set(_: Obj) -> str:
    """A label upstream accepts but never fills, so it only matches the empty string."""
    return ""


_NAME: Final[dict[str, _Extract]] = {"metadata.name": _at("metadata.name")}
_NAMESPACED: Final[dict[str, _Extract]] = {**_NAME, "metadata.namespace": _at("metadata.namespace")}

# (group, kind) -> field label -> its value. Kinds upstream registers no conversion for accept only name and
# namespace. Cluster-scoped Node and Namespace do not accept metadata.namespace, as upstream.
_SELECTABLE: Final[dict[tuple[str, str], dict[str, _Extract]]] = {
    ("", "Pod"): {
        **_NAMESPACED,
        "spec.nodeName": _at("spec.nodeName"),
        "spec.host": _at("spec.nodeName"),  # upstream's alias for old clients
        "spec.restartPolicy": _at("spec.restartPolicy"),
        "spec.schedulerName": _at("spec.schedulerName"),
        "spec.serviceAccountName": _at("spec.serviceAccountName"),
        "spec.hostNetwork": _at("spec.hostNetwork", "false"),
        "status.phase": _at("status.phase"),
        "status.podIP": _first_pod_ip,
        "status.podIPs": _never_set,
        "status.nominatedNodeName": _at("status.nominatedNodeName"),
    },
    ("", "Event"): {
        **_NAMESPACED,
        **{f"involvedObject.{f}": _at(f"involvedObject.{f}") for f in ("kind", "namespace", "name", "uid")},
        **{
            f"involvedObject.{f}": _at(f"involvedObject.{f}")
            for f in ("apiVersion", "resourceVersion", "fieldPath")
        },
        "reason": _at("reason"),
        "reportingComponent": _at("reportingComponent"),
        "source": _event_source,
        "type": _at("type"),
    },
    ("batch", "Job"): {**_NAMESPACED, "status.successful": _at("status.succeeded", "0")},
    ("", "Secret"): {**_NAMESPACED, "type": _at("type")},
    ("", "Service"): {**_NAMESPACED, "spec.clusterIP": _at("spec.clusterIP"), "spec.type": _at("spec.type")},
    ("", "Namespace"): {**_NAME, "status.phase": _at("status.phase")},
    ("", "Node"): {**_NAME, "spec.unschedulable": _at("spec.unschedulable", "false")},
}


def _selectable(group: str, kind: str) -> dict[str, _Extract]:
    return _SELECTABLE.get((group, kind), _NAMESPACED)


def fields_of(group: str, kind: str, obj: Any) -> dict[str, str]:
    """The selectable fields of ``obj`` and their values, as the upstream API server sets them."""
    data = as_dict(obj)
    return {field: extract(data) for field, extract in _selectable(group, kind).items()}


def unsupported_fields(group: str, kind: str, selector: FieldSelector) -> list[str]:
    """Fields the selector names that this kind cannot be selected by; the server refuses the first with
    :func:`unsupported_field_message`."""
    supported = _selectable(group, kind)
    return [field for field in selector.fields if field not in supported]


# Kinds whose group registers its own field-label conversion; the others get the generic one's words.
_CONVERTED: Final = frozenset(
    {("", "Pod"), ("", "Node"), ("", "Event"), ("", "Namespace"), ("", "Secret"), ("", "Service")}
)


def unsupported_field_message(group: str, kind: str, field: str, custom_resource: bool = False) -> str:
    """The 400 message for a field a kind cannot be selected by: each upstream conversion words it its own way."""
    if (group, kind) == ("batch", "Job"):
        return f"field label {json.dumps(field)} not supported for Job"
    if custom_resource or (group, kind) in _CONVERTED:
        return f"field label not supported: {field}"
    return f'{json.dumps(field)} is not a known field selector: only "metadata.name", "metadata.namespace"'
