"""Server-side apply's algorithm: objects read as field sets through their schema, merged, pruned and compared.

This is upstream's structured-merge-diff behaviour on plain dicts. A manager owns the fields it set: an *apply*
owns exactly the fields of its configuration, an *update* the fields it changed. Applying merges the configuration
into the live object (granular maps and keyed lists merge, atomic values are replaced), removes what the same
manager applied before and no longer applies (unless someone else owns it), and fails with one :class:`Conflict`
per field another manager owns and the configuration changes, unless forced, in which case ownership moves.

A manager set is keyed by the manager's identity (see ``managedfields``); every function is pure and returns new
values.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from multiqueue.api.types import Obj
from multiqueue.apiserver.rules.fieldsets import (
    EMPTY,
    Builder,
    FieldSet,
    Path,
    PathElement,
    field,
    freeze,
    index,
    key,
    path_string,
    value,
)
from multiqueue.apiserver.rules.schemas import ATOMIC_UNTYPED, ListType, MapType, Node, Scalar, Untyped, shape


class _Absent:
    """A field that is not there at all, as opposed to one set to null."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


class SchemaError(ValueError):
    """A value that does not fit its schema (an applied configuration upstream would refuse)."""


@dataclasses.dataclass(frozen=True)
class VersionedSet:
    """What one manager owns, in the API version it wrote, and whether it applied (or updated)."""

    fields: FieldSet
    api_version: str
    applied: bool


Managers = dict[str, VersionedSet]


@dataclasses.dataclass(frozen=True)
class Conflict:
    manager: str
    path: Path


class Conflicts(Exception):
    """An apply changes fields other managers own; ``conflicts`` in upstream's order."""

    def __init__(self, conflicts: list[Conflict]) -> None:
        super().__init__(", ".join(f"{c.manager}: {path_string(c.path)}" for c in conflicts))
        self.conflicts = conflicts


# --- reading a value through its node -------------------------------------------------------------------------


def _as_map(data: Any) -> dict[str, Any] | None:
    return data if isinstance(data, dict) else None


def _as_list(data: Any) -> list[Any] | None:
    return data if isinstance(data, list) else None


def _equal(a: Any, b: Any) -> bool:
    return freeze(a) == freeze(b)


def item_element(node: ListType, item: Any) -> PathElement:
    """The path element naming an item of a set or keyed list; raises SchemaError for an item that has none."""
    if node.kind == "set":
        if isinstance(item, dict):
            raise SchemaError("associative list without keys has an element that's a map type")
        if isinstance(item, list):
            raise SchemaError("not supported: associative list with lists as elements")
        if item is None:
            raise SchemaError("associative list without keys has an element that's an explicit null")
        return value(item)
    if item is None:
        raise SchemaError("associative list with keys may not have a null element")
    if not isinstance(item, dict):
        raise SchemaError("associative list with keys may not have non-map elements")
    element_type = node.element
    found: dict[str, Any] = {}
    for name in node.keys:
        if name in item:
            found[name] = item[name]
        elif isinstance(element_type, MapType) and element_type.default(name) is not None:
            found[name] = element_type.default(name)
    if not found:
        keys = "[" + " ".join(f'"{k}"' for k in node.keys) + "]"
        raise SchemaError(
            f"associative list with keys has an element that omits all key fields {keys} "
            "(and doesn't have default values for any key fields)"
        )
    return key(found)


def _items(node: ListType, items: list[Any]) -> Iterator[tuple[PathElement, Any]]:
    """(element, item) for each item that names itself; items that cannot are skipped."""
    for item in items:
        try:
            yield item_element(node, item), item
        except SchemaError:
            continue


# --- the fields an object sets ------------------------------------------------------------------------------


def object_fields(data: Any, node: Node) -> FieldSet:
    """Every field ``data`` sets: leaves, atomic values, list items, map entries, and empty or null maps."""
    builder = Builder()
    _collect(data, node, (), builder)
    return builder.build()


def _collect(data: Any, node: Node, path: Path, out: Builder) -> None:
    node = shape(node, data)
    if isinstance(node, ListType):
        if node.kind == "atomic":
            out.insert(path)
            return
        items = _as_list(data) or []
        seen: set[PathElement] = set()
        duplicated: set[PathElement] = set()
        for element, _ in _items(node, items):
            if element in seen:
                duplicated.add(element)
            seen.add(element)
        for element in duplicated:
            out.insert((*path, element))
        for element, item in _items(node, items):
            if element not in duplicated:
                _collect(item, node.element, (*path, element), out)
                out.insert((*path, element))
        return
    if isinstance(node, MapType):
        if node.atomic:
            out.insert(path)
            return
        for name, child in (_as_map(data) or {}).items():
            child_type = node.field_type(name)
            if child_type is None:
                continue
            child_path = (*path, field(name))
            _collect(child, child_type, child_path, out)
            if child is None or child == {} or not node.declares(name):
                out.insert(child_path)
        return
    out.insert(path)


def ensure_named_fields(fieldset: FieldSet, node: Node) -> FieldSet:
    """``fieldset`` plus every struct field that has paths below it, as upstream prunes with."""
    if fieldset.empty:
        return fieldset
    members = set(fieldset.members)
    children = {}
    for element, below in fieldset.children.items():
        child_type: Node | None = None
        if isinstance(node, MapType) and element[0] == 0:
            if node.declares(element[1]):
                members.add(element)
            child_type = node.field_type(element[1])
        elif isinstance(node, ListType) and element[0] == 1:
            child_type = node.element
        children[element] = ensure_named_fields(below, child_type or ATOMIC_UNTYPED)
    return FieldSet(frozenset(members), children)


# --- comparing two objects ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Comparison:
    added: FieldSet
    modified: FieldSet
    removed: FieldSet

    def filtered(self, keep: Callable[[FieldSet], FieldSet]) -> Comparison:
        return Comparison(keep(self.added), keep(self.modified), keep(self.removed))


class _Compare:
    def __init__(self) -> None:
        self.added, self.modified, self.removed = Builder(), Builder(), Builder()

    def leaf(self, old: Any, new: Any, path: Path) -> None:
        if old is ABSENT:
            self.added.insert(path)
        elif new is ABSENT:
            self.removed.insert(path)
        elif not _equal(old, new):
            self.modified.insert(path)

    def walk(self, old: Any, new: Any, node: Node, path: Path) -> None:
        present = new if new is not ABSENT else old
        shaped = shape(node, present)
        differs = old is not ABSENT and new is not ABSENT and type(shape(node, old)) is not type(shaped)
        if isinstance(node, Untyped) and differs:
            # A value that changed shape (a string became a map): the whole value changed.
            self.leaf(old, new, path)
            return
        if not self._descend(old, new, shaped, path):
            self.leaf(old, new, path)
            return
        if old is ABSENT:
            self.added.insert(path)
        elif new is ABSENT:
            self.removed.insert(path)

    def _descend(self, old: Any, new: Any, node: Node, path: Path) -> bool:
        """Compare below this node; False when it is a leaf (scalar, atomic, or empty on both sides)."""
        if isinstance(node, ListType):
            old_items, new_items = _as_list(old) or [], _as_list(new) or []
            if node.kind == "atomic" or (not old_items and not new_items):
                return False
            self._list(old_items, new_items, node, path)
            return True
        if isinstance(node, MapType):
            old_map, new_map = _as_map(old) or {}, _as_map(new) or {}
            if node.atomic or (not old_map and not new_map):
                return False
            for name in [*old_map, *(n for n in new_map if n not in old_map)]:
                child_type = node.field_type(name)
                if child_type is None:
                    continue
                self.walk(
                    old_map.get(name, ABSENT), new_map.get(name, ABSENT), child_type, (*path, field(name))
                )
            return True
        return False

    def _list(self, old_items: list[Any], new_items: list[Any], node: ListType, path: Path) -> None:
        order: list[PathElement] = []
        old_by: dict[PathElement, list[Any]] = {}
        new_by: dict[PathElement, list[Any]] = {}
        for element, item in _items(node, old_items):
            if element not in old_by:
                order.append(element)
            old_by.setdefault(element, []).append(item)
        for element, item in _items(node, new_items):
            if element not in new_by and element not in old_by:
                order.append(element)
            new_by.setdefault(element, []).append(item)
        for element in order:
            olds, news = old_by.get(element, []), new_by.get(element, [])
            child = (*path, element)
            if len(olds) <= 1 and len(news) <= 1:
                self.walk(olds[0] if olds else ABSENT, news[0] if news else ABSENT, node.element, child)
            elif len(olds) >= 2 and len(news) >= 2:
                if len(olds) != len(news) or not all(_equal(a, b) for a, b in zip(olds, news, strict=True)):
                    self.modified.insert(child)
            elif len(olds) >= 2:
                if news:
                    self.walk(ABSENT, news[0], node.element, child)
                self.removed.insert(child)
            else:
                if olds:
                    self.walk(olds[0], ABSENT, node.element, child)
                self.added.insert(child)


def compare(old: Any, new: Any, node: Node) -> Comparison:
    """The fields ``new`` adds to, changes in and removes from ``old`` (either may be ABSENT)."""
    walker = _Compare()
    walker.walk(old, new, node, ())
    return Comparison(walker.added.build(), walker.modified.build(), walker.removed.build())


# --- merging a configuration into an object -----------------------------------------------------------------


def merge(live: Any, config: Any, node: Node) -> Any:
    """``config`` merged into ``live``: the configuration's values win; granular maps and keyed lists merge."""
    result = _merge(live, config, node)
    return {} if result is ABSENT else result


def _keep_config(live: Any, config: Any) -> Any:
    return copy.deepcopy(config if config is not ABSENT else live)


def _merge(live: Any, config: Any, node: Node) -> Any:
    node = shape(node, config if config is not ABSENT else live)
    if isinstance(node, ListType):
        live_items = _as_list(live) if live is not ABSENT else None
        config_items = _as_list(config) if config is not ABSENT else None
        if node.kind == "atomic" or (not live_items and not config_items):
            return _keep_config(live, config)
        merged = _merge_items(live_items or [], config_items or [], node)
        return merged if merged else ABSENT
    if isinstance(node, MapType):
        live_map = _as_map(live) if live is not ABSENT else None
        config_map = _as_map(config) if config is not ABSENT else None
        if node.atomic or (not live_map and not config_map):
            return _keep_config(live, config)
        out: dict[str, Any] = {}
        live_map, config_map = live_map or {}, config_map or {}
        for name in [*live_map, *(n for n in config_map if n not in live_map)]:
            child_type = node.field_type(name) or ATOMIC_UNTYPED
            merged = _merge(live_map.get(name, ABSENT), config_map.get(name, ABSENT), child_type)
            if merged is not ABSENT:
                out[name] = merged
        return out if out else ABSENT
    return _keep_config(live, config)


def _index(
    node: ListType, items: list[Any], duplicates_allowed: bool
) -> tuple[list[PathElement], dict[PathElement, Any]]:
    elements: list[PathElement] = []
    observed: dict[PathElement, Any] = {}
    for item in items:
        element = item_element(node, item)
        if element in observed:
            if not duplicates_allowed:
                raise SchemaError(f"duplicate entries for key {path_string((element,))}")
            observed[element] = ABSENT
        else:
            observed[element] = item
        elements.append(element)
    return elements, observed


def _merge_items(live: list[Any], config: list[Any], node: ListType) -> list[Any]:
    """Upstream's order: the configuration's items in its order, live-only items kept where they stood."""
    config_elements, config_by = _index(node, config, False)
    live_elements, live_by = _index(node, live, True)
    shared = [e for e in config_elements if e in live_by]
    next_shared = shared.pop(0) if shared else None
    merged_config: set[PathElement] = set()
    out: list[Any] = []

    def add(old: Any, new: Any) -> None:
        item = _merge(old, new, node.element)
        if item is not ABSENT:
            out.append(item)

    i = j = 0
    while i < len(live_elements) or j < len(config_elements):
        if i < len(live_elements) and j < len(config_elements):
            element = live_elements[i]
            if element == config_elements[j]:
                merged_config.add(element)
                add(live_by[element], config_by[element])
                i += 1
                j += 1
                next_shared = shared.pop(0) if shared else None
                continue
            if element in config_by and next_shared is not None and next_shared != element:
                i += 1
                continue
        if i < len(live_elements):
            element = live_elements[i]
            if element not in config_by:
                add(live[i], ABSENT)
                i += 1
                continue
            if element in merged_config:
                i += 1
        if j < len(config_elements):
            element = config_elements[j]
            merged_config.add(element)
            add(live_by.get(element, ABSENT), config_by[element])
            j += 1
            if next_shared is not None and next_shared == element:
                next_shared = shared.pop(0) if shared else None
    return out


# --- removing fields ----------------------------------------------------------------------------------------


def remove_fields(data: Any, doomed: FieldSet, node: Node) -> Any:
    """``data`` without the fields of ``doomed``; a map or list the removal empties goes too (ABSENT), as a
    typed object drops an empty optional field."""
    if doomed.empty:
        return data
    node = shape(node, data)
    if isinstance(node, ListType):
        items = _as_list(data)
        if not items or node.kind == "atomic":
            return data
        kept = []
        for item in items:
            try:
                element = item_element(node, item)
            except SchemaError:
                kept.append(item)
                continue
            if element in doomed.members:
                continue
            rest = remove_fields(item, doomed.child(element), node.element)
            if rest is not ABSENT:
                kept.append(rest)
        return kept or ABSENT
    if isinstance(node, MapType):
        entries = _as_map(data)
        if not entries or node.atomic:
            return data
        out = {}
        for name, child in entries.items():
            element = field(name)
            if element in doomed.members:
                continue
            rest = remove_fields(child, doomed.child(element), node.field_type(name) or ATOMIC_UNTYPED)
            if rest is not ABSENT:
                out[name] = rest
        return out or ABSENT
    return data


# --- checking a configuration -------------------------------------------------------------------------------


def check(data: Any, node: Node) -> list[str]:
    """Why ``data`` does not fit ``node``, in upstream's words (empty when it fits): fields the schema does not
    declare, values of the wrong type, list items without their keys or with duplicate keys."""
    problems: list[str] = []
    _check(data, node, (), problems)
    return problems


def _check(data: Any, node: Node, path: Path, problems: list[str]) -> None:
    where = path_string(path)
    prefix = f"{where}: " if where else ""
    if data is None:
        return
    node = shape(node, data)
    if isinstance(node, ListType):
        if not isinstance(data, list):
            problems.append(f"{prefix}expected list, got {_go_value(data)}")
            return
        seen: set[PathElement] = set()
        for position, item in enumerate(data):
            if node.kind == "atomic":
                element = index(position)
            else:
                try:
                    element = item_element(node, item)
                except SchemaError as exc:
                    problems.append(f"{prefix}element {position}: {exc}")
                    return
                if element in seen:
                    problems.append(f"{prefix}duplicate entries for key {path_string((element,))}")
                seen.add(element)
            _check(item, node.element, (*path, element), problems)
        return
    if isinstance(node, MapType):
        if not isinstance(data, dict):
            problems.append(f"{prefix}expected map, got {_go_value(data)}")
            return
        for name, child in data.items():
            child_type = node.field_type(name)
            if child_type is None:
                problems.append(f"{path_string((*path, field(name)))}: field not declared in schema")
                return
            _check(child, child_type, (*path, field(name)), problems)
        return
    if isinstance(node, Scalar):
        problem = _scalar_problem(node, data)
        if problem:
            problems.append(prefix + problem)


def _scalar_problem(node: Scalar, data: Any) -> str:
    is_number = isinstance(data, int | float) and not isinstance(data, bool)
    if node.kind == "numeric" and not is_number:
        return f"expected numeric (int or float), got {_go_type(data)}"
    if node.kind == "string" and not isinstance(data, str):
        return f"expected string, got {_go_value(data)}"
    if node.kind == "boolean" and not isinstance(data, bool):
        return f"expected boolean, got {_go_value(data)}"
    if node.kind == "untyped" and isinstance(data, dict | list):
        return f"expected any scalar, got {_go_value(data)}"
    return ""


def _go_type(data: Any) -> str:
    if isinstance(data, dict):
        return "map[string]interface {}"
    if isinstance(data, list):
        return "[]interface {}"
    if isinstance(data, bool):
        return "bool"
    if isinstance(data, str):
        return "string"
    return "int64" if isinstance(data, int) else "float64"


def _go_literal(data: Any) -> str:
    """``data`` as Go's %#v prints decoded YAML."""
    if isinstance(data, bool):
        return "true" if data else "false"
    if isinstance(data, str):
        return json.dumps(data, ensure_ascii=False)
    if isinstance(data, dict):
        return (
            "map[string]interface {}{"
            + ", ".join(f"{json.dumps(k)}:{_go_literal(v)}" for k, v in sorted(data.items()))
            + "}"
        )
    if isinstance(data, list):
        return "[]interface {}{" + ", ".join(_go_literal(v) for v in data) + "}"
    return "interface {}(nil)" if data is None else repr(data) if isinstance(data, float) else str(data)


def _go_value(data: Any) -> str:
    """A value as upstream's messages print it (a structured-merge-diff value, %#v)."""
    return "&value.valueUnstructured{Value:" + _go_literal(data) + "}"


# --- the updater: ownership through updates and applies -----------------------------------------------------

Filter = Callable[[FieldSet], FieldSet]


def _no_filter(fieldset: FieldSet) -> FieldSet:
    return fieldset


def _settle(
    old: Any,
    new: Any,
    node: Node,
    managers: Managers,
    workflow: str,
    force: bool,
    reset: Filter,
) -> tuple[Managers, Comparison]:
    """What a change from ``old`` to ``new`` by ``workflow`` does to the other managers' fields.

    Fields others own that the change adds or modifies are conflicts (an error unless ``force``, when they lose
    them); fields the change removes are nobody's any more. Managers left with nothing are dropped.
    """
    comparison = compare(old, new, node).filtered(reset)
    changed = comparison.modified.union(comparison.added)
    conflicts: dict[str, FieldSet] = {}
    for manager, owned in managers.items():
        if manager != workflow:
            lost = owned.fields.intersection(changed)
            if not lost.empty:
                conflicts[manager] = lost
    if conflicts and not force:
        raise Conflicts(
            [Conflict(manager, path) for manager in sorted(conflicts) for path in conflicts[manager].paths()]
        )
    out: Managers = {}
    for manager, owned in managers.items():
        fields = owned.fields
        if manager != workflow:
            fields = fields.difference(conflicts.get(manager, EMPTY)).difference(comparison.removed)
        if not fields.empty:
            out[manager] = dataclasses.replace(owned, fields=fields)
    return out, comparison


def update(
    old: Any,
    new: Any,
    node: Node,
    api_version: str,
    managers: Managers,
    manager: str,
    reset: Filter = _no_filter,
) -> Managers:
    """Ownership after ``manager`` changed ``old`` into ``new`` by an update: it owns what it changed."""
    settled, comparison = _settle(old, new, node, managers, manager, True, reset)
    previous = settled.get(manager)
    owned = previous.fields.difference(comparison.removed) if previous is not None else EMPTY
    owned = reset(owned.union(comparison.modified).union(comparison.added))
    settled.pop(manager, None)
    if not owned.empty:
        settled[manager] = VersionedSet(owned, api_version, False)
    return settled


def apply(
    live: Any,
    config: Obj,
    node: Node,
    api_version: str,
    managers: Managers,
    manager: str,
    force: bool,
    reset: Filter = _no_filter,
) -> tuple[Any, Managers]:
    """Apply ``config`` as ``manager``: the new object (ABSENT when it equals ``live``) and the new ownership.

    Raises :class:`Conflicts` when the configuration changes fields other managers own and ``force`` is not set,
    and :class:`SchemaError` when the configuration does not fit the schema.
    """
    merged = merge(live, config, node)
    last = managers.get(manager)
    applying = dict(managers)
    applying[manager] = VersionedSet(reset(object_fields(config, node)), api_version, True)
    pruned = _prune(merged, applying, manager, last, node)
    settled, _ = _settle(live, pruned, node, applying, manager, force, reset)
    return (ABSENT if _equal(live, pruned) else pruned), settled


def _prune(
    merged: Obj, managers: Mapping[str, VersionedSet], manager: str, last: VersionedSet | None, node: Node
) -> Any:
    """Remove what ``manager`` applied last time and applies no more, unless another manager owns it."""
    if last is None or last.fields.empty:
        return merged
    pruned = remove_fields(merged, ensure_named_fields(last.fields, node), node)
    owned = EMPTY
    for versioned in managers.values():
        owned = owned.union(versioned.fields)
    merged_set = ensure_named_fields(object_fields(merged, node), node)
    pruned_set = ensure_named_fields(object_fields(pruned, node), node)
    pruned = remove_fields(
        merged, merged_set.difference(pruned_set.union(ensure_named_fields(owned, node))), node
    )
    pruned_set = ensure_named_fields(object_fields(pruned, node), node)
    dangling = merged_set.difference(pruned_set).intersection(ensure_named_fields(last.fields, node))
    result = remove_fields(merged, dangling, node)
    return {} if result is ABSENT else result
