"""Sets of field paths, the currency of server-side apply: who owns which fields of an object.

A path names one field of an object: a struct or map field (``.spec``), an item of a list keyed by some of its
fields (``[name="main"]``), an item of a list of primitives (``[="a"]``), or a position (``[0]``). A
:class:`FieldSet` holds paths as a tree: each node says which of its children are members themselves and which
have members below them. It is stored in an object's ``metadata.managedFields[].fieldsV1`` in upstream's
``FieldsV1`` form: ``f:`` fields, ``k:`` keyed items, ``v:`` values, ``i:`` positions, and ``.`` marking a node
that is a member and has members below it.

Everything here is pure; the order of paths and the text of every encoding are upstream's (structured-merge-diff),
so managedFields read the same on both servers, key for key.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

# A JSON value frozen into a hashable, ordered form: (rank, payload). Ranks follow upstream's ordering of values:
# numbers, strings, booleans, lists, maps, null.
Frozen = tuple[int, Any]
# A path element: (kind, payload); kinds in upstream's order of elements: fields, keys, values, positions.
PathElement = tuple[int, Any]
Path = tuple[PathElement, ...]

FIELD: Final = 0
KEY: Final = 1
VALUE: Final = 2
INDEX: Final = 3

_NUMBER, _STRING, _BOOL, _LIST, _MAP, _NULL = range(6)


class FieldsError(ValueError):
    """A ``fieldsV1`` document that cannot be read as a field set."""


def freeze(value: Any) -> Frozen:
    """``value`` as a hashable key that orders and compares as upstream's values do (1 and 1.0 are equal)."""
    if value is None:
        return (_NULL, None)
    if isinstance(value, bool):
        return (_BOOL, value)
    if isinstance(value, int | float):
        return (_NUMBER, value)
    if isinstance(value, str):
        return (_STRING, value)
    if isinstance(value, list):
        return (_LIST, tuple(freeze(item) for item in value))
    if isinstance(value, dict):
        return (_MAP, tuple(sorted((str(k), freeze(v)) for k, v in value.items())))
    return (_STRING, str(value))


def thaw(frozen: Frozen) -> Any:
    rank, payload = frozen
    if rank == _LIST:
        return [thaw(item) for item in payload]
    if rank == _MAP:
        return {key: thaw(item) for key, item in payload}
    return payload


def field(name: str) -> PathElement:
    return (FIELD, name)


def key(fields: Mapping[str, Any]) -> PathElement:
    """An item of a keyed list, named by its key fields (in name order, as upstream sorts them)."""
    return (KEY, tuple(sorted((name, freeze(value)) for name, value in fields.items())))


def value(item: Any) -> PathElement:
    return (VALUE, freeze(item))


def index(position: int) -> PathElement:
    return (INDEX, position)


# --- text forms ---------------------------------------------------------------------------------------------


def go_json(data: Any) -> str:
    """Compact JSON as Go writes it: map keys sorted, ``<``, ``>``, ``&`` and line separators escaped."""
    text = json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(raw, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _key_json(fields: tuple[tuple[str, Frozen], ...]) -> str:
    # Key fields stay in name order (Go writes them in the order held); their values are Go JSON.
    return "{" + ",".join(f"{json.dumps(name)}:{go_json(thaw(item))}" for name, item in fields) + "}"


def element_text(element: PathElement) -> str:
    """The ``fieldsV1`` key of one path element: ``f:name``, ``k:{"name":"a"}``, ``v:"x"``, ``i:0``."""
    kind, payload = element
    if kind == FIELD:
        return f"f:{payload}"
    if kind == KEY:
        return f"k:{_key_json(payload)}"
    if kind == VALUE:
        return f"v:{go_json(thaw(payload))}"
    return f"i:{payload}"


def parse_element(text: str) -> PathElement | None:
    """The path element a ``fieldsV1`` key names; None for a kind of element upstream would skip."""
    if len(text) < 2 or text[1] != ":":
        raise FieldsError(f"missing colon: {text}")
    kind, rest = text[0], text[2:]
    try:
        if kind == "f":
            return field(rest)
        if kind == "k":
            fields = json.loads(rest)
            if not isinstance(fields, dict):
                raise FieldsError(f"a key must be a JSON object: {text}")
            return key(fields)
        if kind == "v":
            return value(json.loads(rest))
        if kind == "i":
            return index(int(rest))
    except ValueError as exc:
        raise FieldsError(f"cannot read path element {text!r}: {exc}") from exc
    return None


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _value_string(frozen: Frozen) -> str:
    """A value as upstream prints it in a path: strings quoted, lists bracketed, maps as key=value runs."""
    rank, payload = frozen
    if rank == _NULL:
        return "null"
    if rank == _STRING:
        return _go_quote(payload)
    if rank == _BOOL:
        return "true" if payload else "false"
    if rank == _NUMBER:
        return repr(payload) if isinstance(payload, float) and not payload.is_integer() else str(payload)
    if rank == _LIST:
        return "[" + ",".join(_value_string(item) for item in payload) + "]"
    return "".join(f"{name}={_value_string(item)}" for name, item in payload)


def path_string(path: Path) -> str:
    """A path as upstream prints it in conflicts: ``.spec.containers[name="main"].image``."""
    parts = []
    for kind, payload in path:
        if kind == FIELD:
            parts.append(f".{payload}")
        elif kind == KEY:
            parts.append("[" + ",".join(f"{name}={_value_string(item)}" for name, item in payload) + "]")
        elif kind == VALUE:
            parts.append(f"[={_value_string(payload)}]")
        else:
            parts.append(f"[{payload}]")
    return "".join(parts)


# --- the set ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FieldSet:
    """A set of paths as a tree: ``members`` end here, ``children`` hold the (non-empty) sets below an element.

    Operations return new sets and leave their operands alone.
    """

    members: frozenset[PathElement] = frozenset()
    children: Mapping[PathElement, FieldSet] = dataclasses.field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.members and not self.children

    def child(self, element: PathElement) -> FieldSet:
        """The paths below ``element``, without it."""
        return self.children.get(element, EMPTY)

    def has(self, path: Path) -> bool:
        node = self
        for element in path[:-1]:
            found = node.children.get(element)
            if found is None:
                return False
            node = found
        return bool(path) and path[-1] in node.members

    def union(self, other: FieldSet) -> FieldSet:
        if other.empty:
            return self
        if self.empty:
            return other
        children = dict(self.children)
        for element, below in other.children.items():
            mine = children.get(element)
            children[element] = below if mine is None else mine.union(below)
        return FieldSet(self.members | other.members, children)

    def intersection(self, other: FieldSet) -> FieldSet:
        children = {}
        for element, below in self.children.items():
            theirs = other.children.get(element)
            if theirs is not None:
                common = below.intersection(theirs)
                if not common.empty:
                    children[element] = common
        return FieldSet(self.members & other.members, children)

    def difference(self, other: FieldSet) -> FieldSet:
        """Paths of ``self`` not in ``other``; a member of ``other`` does not remove the paths below it."""
        if other.empty:
            return self
        children = {}
        for element, below in self.children.items():
            theirs = other.children.get(element)
            rest = below if theirs is None else below.difference(theirs)
            if not rest.empty:
                children[element] = rest
        return FieldSet(self.members - other.members, children)

    def recursive_difference(self, other: FieldSet) -> FieldSet:
        """Paths of ``self`` neither in ``other`` nor below one of its members."""
        if other.empty:
            return self
        children = {}
        for element, below in self.children.items():
            if element in other.members:
                continue
            theirs = other.children.get(element)
            rest = below if theirs is None else below.recursive_difference(theirs)
            if not rest.empty:
                children[element] = rest
        return FieldSet(self.members - other.members, children)

    def paths(self, prefix: Path = ()) -> Iterator[Path]:
        """Every path, in upstream's order: a node's members first, then its children's paths."""
        for element in sorted(self.members):
            yield (*prefix, element)
        for element in sorted(self.children):
            yield from self.children[element].paths((*prefix, element))

    def to_fields(self) -> dict[str, Any]:
        """The ``fieldsV1`` document, keys in upstream's order."""
        out: dict[str, Any] = {}
        for element in sorted(self.members | set(self.children)):
            below = self.children.get(element)
            if below is None:
                out[element_text(element)] = {}
            elif element in self.members:
                out[element_text(element)] = {".": {}, **below.to_fields()}
            else:
                out[element_text(element)] = below.to_fields()
        return out

    @classmethod
    def from_fields(cls, fields: Any) -> FieldSet:
        """Read a ``fieldsV1`` document; raises :class:`FieldsError` when it is not one."""
        if not isinstance(fields, dict):
            raise FieldsError("fieldsV1 must be a JSON object")
        members: set[PathElement] = set()
        children: dict[PathElement, FieldSet] = {}
        for text, below in fields.items():
            if text == ".":
                continue
            element = parse_element(text)
            if element is None:
                continue
            nested = cls.from_fields(below)
            if not nested.empty:
                children[element] = nested
            if nested.empty or (isinstance(below, dict) and "." in below):
                members.add(element)
        return cls(frozenset(members), children)


EMPTY: Final = FieldSet()


class Builder:
    """Collects paths into a :class:`FieldSet` (sets themselves stay immutable)."""

    def __init__(self) -> None:
        self._members: set[PathElement] = set()
        self._children: dict[PathElement, Builder] = {}

    def insert(self, path: Path) -> None:
        if not path:
            return  # the whole object is never owned
        node = self
        for element in path[:-1]:
            node = node._children.setdefault(element, Builder())
        node._members.add(path[-1])

    def build(self) -> FieldSet:
        children = {}
        for element, below in self._children.items():
            built = below.build()
            if not built.empty:
                children[element] = built
        return FieldSet(frozenset(self._members), children)


def from_paths(*paths: Path) -> FieldSet:
    builder = Builder()
    for path in paths:
        builder.insert(path)
    return builder.build()


def parse_path(dotted: str) -> Path:
    """A path of plain fields from ``a.b.c`` (for tables of fixed paths)."""
    return tuple(field(part) for part in dotted.split(".") if part)
