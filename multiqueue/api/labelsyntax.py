"""The text form of a label selector (``kubectl get -l``): upstream's lexer and recursive-descent parser, with
its error messages, so a bad selector reads as it does against a real cluster.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

from multiqueue.api.errors import SelectorError, invalid
from multiqueue.api.labelselectors import (
    SET_OPERATORS,
    LabelSelector,
    Operator,
    Requirement,
    conjunction,
    requirement,
)
from multiqueue.api.meta import qualified_name_errors


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
        values = self._value_set() if operator in SET_OPERATORS else self._exact_value()
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
    return conjunction(_Parser(text).selector())
