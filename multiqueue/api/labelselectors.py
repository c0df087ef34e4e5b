"""Label selectors as upstream's ``labels.Selector``: requirements (``key op values``), validated as upstream's
``NewRequirement`` validates them, their matching against a set of labels, and the ``metav1.LabelSelector``
object form. The ``-l`` text form is parsed in ``labelsyntax``.

The API server filters LIST and WATCH with them; the dispatcher matches worker labels against a Job's
``multiqueue.dev/cluster-selector`` annotation with the same code. Building one never raises anything but
:class:`~multiqueue.api.errors.SelectorError`, whose message is upstream's.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Final

from multiqueue.api.errors import FieldError, SelectorError, invalid
from multiqueue.api.meta import as_dict, as_list, label_value_errors, qualified_name_errors


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
SET_OPERATORS: Final = frozenset({Operator.IN, Operator.NOT_IN})
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
        if self.operator in SET_OPERATORS:
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
    if operator in SET_OPERATORS and not values:
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


def conjunction(requirements: list[Requirement]) -> LabelSelector:
    """The selector requiring all of ``requirements``, in upstream's order (by key), so equal selectors compare equal."""
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


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
    return conjunction(requirements)
