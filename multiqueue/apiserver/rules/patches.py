"""Patch semantics of the Kubernetes API: JSON patch, JSON merge patch and strategic merge patch.

The strategic merge of built-in kinds needs to know, for each list in an object, whether it merges by a key
(``containers`` by ``name``, ``conditions`` by ``type``), merges as a set of primitives (``finalizers``), or is
replaced whole. :func:`list_strategy` answers that from one table, which the OpenAPI documents also publish as
``x-kubernetes-patch-merge-key`` / ``x-kubernetes-patch-strategy`` so ``kubectl apply`` computes the same patches.

Every function returns a new object and leaves its inputs alone. A patch that cannot apply raises
:class:`PatchError` carrying the status the API server answers with; nothing else is raised, whatever the input.
Error texts are upstream's (evanphx/json-patch, apimachinery's strategicpatch) where the case exists there.

A merged list is ordered as upstream orders it: without ``$setElementOrder``, the items the patch names (in patch
order) and the server's other items (in their order) are interleaved by their places in the live list, a new item
going before any server item it meets (:func:`_interleave`); ``kubectl apply`` sends ``$setElementOrder``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any, Final, Literal, ParamSpec, TypeVar

from multiqueue.api.meta import as_dict
from multiqueue.api.types import Obj
from multiqueue.apiserver.rules.godecode import MAX_DEPTH, TooDeep, nesting_depth

# Marks a list of primitives merged as a set (upstream's patchStrategy "merge" without a merge key).
PRIMITIVE_SET: Final = ""

_CONTAINER_LISTS: Final = {
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}

_CONTAINER_STATUS_LISTS: Final = {"volumeMounts": "mountPath", "allocatedResourcesStatus": "name"}

_OBJECT_META: Final[dict[str, str]] = {"finalizers": PRIMITIVE_SET, "ownerReferences": "uid"}

_POD_SPEC: Final[dict[str, str]] = {
    "volumes": "name",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "topologySpreadConstraints": "topologyKey",
    "evictionResponders": "name",
    **{
        f"{containers}[].{field}": key
        for containers in ("containers", "initContainers", "ephemeralContainers")
        for field, key in _CONTAINER_LISTS.items()
    },
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
}

_POD_STATUS: Final[dict[str, str]] = {
    "conditions": "type",
    "podIPs": "ip",
    "hostIPs": "ip",
    "resourceClaimStatuses": "name",
    "nodeAllocatableResourceClaimStatuses": "resourceClaimName",
    "nodeAllocatableResourceClaimStatuses[].mapping": "name",
    "nodeAllocatableResourceClaimStatuses[].overhead": "name",
    **{
        f"{statuses}[].{field}": key
        for statuses in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")
        for field, key in _CONTAINER_STATUS_LISTS.items()
    },
}


def _nested(prefix: str, table: dict[str, str]) -> dict[str, str]:
    return {f"{prefix}.{path}": key for path, key in table.items()}


_META: Final = _nested("metadata", _OBJECT_META)

# A PodTemplateSpec: its own ObjectMeta lists and a PodSpec.
_POD_TEMPLATE: Final = {**_nested("metadata", _OBJECT_META), **_nested("spec", _POD_SPEC)}

_JOB_SPEC: Final = {**_nested("template", _POD_TEMPLATE), "scheduling.resourceClaims": "name"}

# (group, kind) -> dotted list path ("[]" steps into list items) -> merge key, or PRIMITIVE_SET. Taken from the
# patchStrategy/patchMergeKey tags of k8s.io/api; a list not named here is replaced whole, as upstream does.
MERGE_KEYS: Final[dict[tuple[str, str], dict[str, str]]] = {
    ("", "Pod"): {**_META, **_nested("spec", _POD_SPEC), **_nested("status", _POD_STATUS)},
    ("batch", "Job"): {**_META, **_nested("spec", _JOB_SPEC), "status.conditions": "type"},
    ("batch", "CronJob"): {
        **_META,
        **_nested("spec.jobTemplate.metadata", _OBJECT_META),
        **_nested("spec.jobTemplate.spec", _JOB_SPEC),
    },
    ("", "Node"): {
        **_META,
        "spec.podCIDRs": PRIMITIVE_SET,
        "status.conditions": "type",
        "status.addresses": "type",
    },
    ("", "Namespace"): {**_META, "status.conditions": "type"},
    ("", "Service"): {**_META, "spec.ports": "port", "status.conditions": "type"},
    ("apps", "Deployment"): {**_META, **_nested("spec.template", _POD_TEMPLATE), "status.conditions": "type"},
    ("", "ServiceAccount"): {**_META, "secrets": "name"},
    ("", "Event"): dict(_META),
    ("", "ConfigMap"): dict(_META),
    ("", "Secret"): dict(_META),
    ("coordination.k8s.io", "Lease"): dict(_META),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): dict(_META),
}


def list_strategy(group: str, kind: str, path: str) -> str | None:
    """The merge key of the list at ``path`` (e.g. ``spec.template.spec.containers``), ``PRIMITIVE_SET``, or
    None when the list is replaced whole (the default for every list not in the table)."""
    return MERGE_KEYS.get((group, kind), _META).get(path)


class PatchError(Exception):
    """A patch that cannot be applied: ``code`` 400 (``BadRequest``) for a malformed body, 422 (``Invalid``)
    for a well-formed patch that does not fit the object, 413 for one with too many operations, which is how
    upstream's API server answers."""

    def __init__(self, message: str, code: Literal[400, 413, 422] = 422, *, told: bool = True) -> None:
        super().__init__(message)
        self.code = code
        self.reason = {400: "BadRequest", 413: "RequestEntityTooLarge", 422: "Invalid"}[code]
        # False where upstream answers its generic 422 without saying what failed (a failed test, a copy limit).
        self.told = told


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _bounded(apply: Callable[_P, _R]) -> Callable[_P, _R]:
    """A document nested past Python's recursion limit is refused like any malformed body, never crashed on."""

    @functools.wraps(apply)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return apply(*args, **kwargs)
        except RecursionError:
            raise PatchError("the patch or the object is nested too deeply", 400) from None

    return guarded


# --- JSON values --------------------------------------------------------------------------------------------


def _token(value: Any) -> Hashable:
    """A hashable stand-in with JSON's equality: 1 and 1.0 are one number, true and 1 are different values."""
    if isinstance(value, bool) or value is None:
        return (type(value).__name__, value)
    if isinstance(value, int | float):
        return ("number", int(value) if isinstance(value, float) and value.is_integer() else value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, dict):
        return ("object", frozenset((key, _token(item)) for key, item in value.items()))
    if isinstance(value, list):
        return ("array", tuple(_token(item) for item in value))
    return ("other", repr(value))


def _json_kind(value: Any) -> str:
    """The JSON type name Go's decoder names in its errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    kinds = {dict: "object", list: "array", str: "string", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def _go(value: Any) -> str:
    """``value`` as Go's ``%v`` prints decoded JSON (``map[name:a]``), so messages read like upstream's."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, dict):
        pairs = sorted((str(key), _go(item)) for key, item in value.items())
        return "map[" + " ".join(f"{key}:{item}" for key, item in pairs) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go(item) for item in value) + "]"
    return str(value)


# --- JSON merge patch (RFC 7386) ----------------------------------------------------------------------------


@_bounded
def apply_merge_patch(doc: Obj, patch: Any) -> Obj:
    """RFC 7386: maps merge recursively, null deletes, anything else replaces. The body must be an object, as
    the API server requires: there is an object to patch."""
    if not isinstance(patch, dict):
        raise PatchError("Invalid JSON Patch", 400)
    return _merge_into(copy.deepcopy(as_dict(doc)), patch)


def _merge_into(target: Obj, patch: Obj) -> Obj:
    """Merge ``patch`` into ``target`` in place; ``target`` is already the caller's private copy."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            current = target.get(key)
            target[key] = _merge_into(current if isinstance(current, dict) else {}, value)
        else:
            target[key] = copy.deepcopy(value)
    return target


# --- JSON patch (RFC 6902) ----------------------------------------------------------------------------------

_ARRAY_INDEX: Final = re.compile(r"0|[1-9][0-9]*")
_BAD_ESCAPE: Final = re.compile(r"~(?![01])")


# kube-apiserver's bounds on a JSON patch: how many operations it may have, and how many bytes its copy operations
# may add up to (--max-request-bytes by default), so a small patch cannot grow an object without bound.
MAX_OPERATIONS: Final = 10_000
MAX_COPY_BYTES: Final = 3 * 1024 * 1024


@dataclasses.dataclass
class _Copies:
    """The copy operations of one patch: how many bytes of compact JSON they have added, and the values they
    share.

    A refused amplification must stay cheap for the server's other clients, so a copy costs nothing until the
    patch is done: the copied value is shared, not duplicated, and a container is duplicated (one level at a
    time, along the path) only when an operation is about to change it; an accepted patch is made a tree again
    at the end. Sizes are remembered per container (with the container, which keeps its id from being reused)
    and forgotten along every path an operation changes, so the size of a value built by copies is the sum of
    its parts, never a new serialization.
    """

    spent: int = 0
    sizes: dict[int, tuple[Any, int]] = dataclasses.field(default_factory=dict)
    shared: dict[int, Any] = dataclasses.field(default_factory=dict)

    def take(self, value: Any, source: str, path: str) -> Any:
        """``value`` to place at ``path``, once the budget allows it."""
        size = self.size(value)
        self.spent += size
        if self.spent > MAX_COPY_BYTES:
            raise PatchError(
                "Unable to complete the copy, the accumulated size increase of copy is "
                f"{self.spent}, exceeding the limit {MAX_COPY_BYTES}",
                told=False,
            )
        if not isinstance(value, dict | list):
            return value
        if path.startswith(source + "/"):
            # Placed inside itself: a copy of its own level (sharing the whole would make a cycle).
            value = self._level_copy(value)
            self.sizes[id(value)] = (value, size)
        else:
            self.shared[id(value)] = value
        return value

    def _level_copy(self, value: Any) -> Any:
        """A copy of one level of ``value``: its children now stand in two places, so they are shared."""
        copied = copy.copy(value)
        for child in copied.values() if isinstance(copied, dict) else copied:
            if isinstance(child, dict | list):
                self.shared[id(child)] = child
        return copied

    def size(self, value: Any) -> int:
        if not isinstance(value, dict | list):
            return len(json.dumps(value, ensure_ascii=False).encode())
        known = self.sizes.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        separators = max(len(value) - 1, 0)
        if isinstance(value, list):
            total = 2 + separators + sum(self.size(item) for item in value)
        else:
            total = 2 + separators + sum(self.size(k) + 1 + self.size(v) for k, v in value.items())
        self.sizes[id(value)] = (value, total)
        return total

    def changing(self, root: Any, pointer: str) -> None:
        """The containers from ``root`` down to ``pointer`` are about to change: each shared one is replaced by a
        copy of its own level (whose children are then shared), and their sizes are stale."""
        self.sizes.pop(id(root), None)
        node = root
        for raw in pointer.split("/")[1:]:
            token: Any = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list) and token.isdigit() and int(token) < len(node):
                token = int(token)
            elif not (isinstance(node, dict) and token in node):
                return
            child = node[token]
            if not isinstance(child, dict | list):
                return
            if id(child) in self.shared:
                child = node[token] = self._level_copy(child)
            self.sizes.pop(id(child), None)
            node = child

    def as_tree(self, result: Any) -> Any:
        """The patched document with nothing shared, for whoever changes it next (a deep copy would keep what
        is shared shared; JSON does not)."""
        return json.loads(json.dumps(result)) if self.shared else result


@_bounded
def apply_json_patch(doc: Obj, ops: Any) -> Obj:
    """RFC 6902 on a copy of ``doc``: every operation applies, in order, or the patch fails as a whole."""
    if not isinstance(ops, list):
        raise PatchError(
            f"json: cannot unmarshal {_json_kind(ops)} into Go value of type jsonpatch.Patch", 400
        )
    if len(ops) > MAX_OPERATIONS:
        raise PatchError(
            "Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{MAX_OPERATIONS}, got {len(ops)}",
            413,
        )
    result: Any = copy.deepcopy(as_dict(doc))
    copies = _Copies()
    for op in ops:
        result = _apply_operation(result, op, copies)
    result = copies.as_tree(result)
    if not isinstance(result, dict):
        raise PatchError(f"the patched document is a JSON {_json_kind(result)}, not an object")
    if nesting_depth(result) > MAX_DEPTH:
        raise PatchError(f"the patched object {TooDeep(MAX_DEPTH)}")
    return result


def _apply_operation(root: Any, op: Any, copies: _Copies) -> Any:
    """One operation on ``root`` (changed in place where it can be); returns the new root."""
    if not isinstance(op, dict):
        raise PatchError(
            f"json: cannot unmarshal {_json_kind(op)} into Go value of type jsonpatch.Operation", 400
        )
    kind = op.get("op")
    if kind not in ("add", "remove", "replace", "move", "copy", "test"):
        raise PatchError(f"Unexpected kind: {kind if isinstance(kind, str) else 'unknown'}")
    path = _operand(op, "path", kind)
    if kind == "copy":
        source = _operand(op, "from", kind)
        value = copies.take(_read(root, source, kind), source, path)
        copies.changing(root, _parent(path))
        return _write(root, path, value, kind, insert=True)
    if kind != "test":
        copies.changing(root, _parent(path))
    if kind == "remove":
        _delete(root, path, kind)
        return root
    if kind == "move":
        source = _operand(op, "from", kind)
        copies.changing(root, _parent(source))
        if path.startswith(source + "/"):
            raise PatchError(f"move operation does not apply: {path} is inside the value at {source}")
        return _write(root, path, _delete(root, source, kind), kind, insert=True)
    if "value" not in op:
        raise PatchError(f"{kind} operation failed to decode value: missing value")
    if kind == "test":
        if _token(_read(root, path, kind)) != _token(op["value"]):
            raise PatchError(f"testing value {path} failed: test failed", told=False)
        return root
    return _write(root, path, copy.deepcopy(op["value"]), kind, insert=kind == "add")


def _operand(op: Obj, name: str, kind: str) -> str:
    """The ``path`` or ``from`` pointer of an operation."""
    if name not in op:
        raise PatchError(f"{kind} operation failed to decode {name}: missing value")
    pointer = op[name]
    if not isinstance(pointer, str):
        raise PatchError(
            f"{kind} operation failed to decode {name}: "
            f"json: cannot unmarshal {_json_kind(pointer)} into Go value of type string"
        )
    return pointer


def _parent(pointer: str) -> str:
    return pointer.rsplit("/", 1)[0] if pointer else ""


def _missing(kind: str, pointer: str) -> PatchError:
    return PatchError(f'{kind} operation does not apply: doc is missing path: "{pointer}": missing value')


def _split(pointer: str, kind: str) -> list[str]:
    """RFC 6901 reference tokens, unescaped; a pointer that is not one points nowhere."""
    if (pointer and not pointer.startswith("/")) or _BAD_ESCAPE.search(pointer):
        raise _missing(kind, pointer)
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer.split("/")[1:]]


def _locate(root: Any, pointer: str, kind: str) -> tuple[Obj | list[Any], str]:
    """The container of the value ``pointer`` names, and its last token; the container must exist."""
    tokens = _split(pointer, kind)
    if not tokens:
        raise _missing(kind, pointer)
    node = root
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and _ARRAY_INDEX.fullmatch(token) and int(token) < len(node):
            node = node[int(token)]
        else:
            raise _missing(kind, pointer)
    if not isinstance(node, dict | list):
        raise _missing(kind, pointer)
    return node, tokens[-1]


def _index(array: list[Any], token: str, kind: str, pointer: str, *, insert: bool) -> int:
    """A valid position in ``array``: an existing element, or also the end (``-`` or ``len``) to insert."""
    if insert and token == "-":
        return len(array)
    if not _ARRAY_INDEX.fullmatch(token):
        raise PatchError(
            f"error in {kind} for path: '{pointer}': value was not a proper array index: '{token}'"
        )
    index = int(token)
    if index > len(array) or (index == len(array) and not insert):
        raise PatchError(
            f"error in {kind} for path: '{pointer}': Unable to access invalid index: {index}: "
            "invalid index referenced"
        )
    return index


def _read(root: Any, pointer: str, kind: str) -> Any:
    if pointer == "":
        return root
    container, token = _locate(root, pointer, kind)
    if isinstance(container, list):
        return container[_index(container, token, kind, pointer, insert=False)]
    if token not in container:
        raise _missing(kind, pointer)
    return container[token]


def _write(root: Any, pointer: str, value: Any, kind: str, *, insert: bool) -> Any:
    """Add (``insert``) or replace the value at ``pointer``; returns the new root."""
    if pointer == "":
        return value
    container, token = _locate(root, pointer, kind)
    if isinstance(container, list):
        index = _index(container, token, kind, pointer, insert=insert)
        if insert:
            container.insert(index, value)
        else:
            container[index] = value
    elif insert or token in container:
        container[token] = value
    else:
        raise _missing(kind, pointer)
    return root


def _delete(root: Any, pointer: str, kind: str) -> Any:
    """Remove the value at ``pointer`` and return it."""
    container, token = _locate(root, pointer, kind)
    if isinstance(container, list):
        return container.pop(_index(container, token, kind, pointer, insert=False))
    if token not in container:
        raise PatchError(
            f"error in {kind} for path: '{pointer}': Unable to remove nonexistent key: {token}: missing value"
        )
    return container.pop(token)


# --- strategic merge patch ----------------------------------------------------------------------------------

_PATCH: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_DELETE_FROM: Final = "$deleteFromPrimitiveList"
_SET_ORDER: Final = "$setElementOrder"

_BAD_PRIMITIVE_LIST: Final = "invalid patch format of primitive list"
_BAD_ORDER_LIST: Final = "invalid patch format of setElementOrder list"


@_bounded
def apply_strategic_merge_patch(doc: Obj, patch: Any, group: str, kind: str) -> Obj:
    """Kubernetes' strategic merge for the built-in ``group``/``kind``: lists merge as :func:`list_strategy`
    says, maps merge, null deletes, and the ``$`` directives steer it; no directive reaches the result."""
    if not isinstance(patch, dict):
        raise PatchError("invalid JSON document", 400)
    merge = _StrategicMerge(MERGE_KEYS.get((group, kind), _META))
    return merge.merge_map(copy.deepcopy(as_dict(doc)), patch, "")


def _is_directive(key: Any) -> bool:
    """Keys starting with ``$`` steer the merge; no built-in kind has a field named like that."""
    return isinstance(key, str) and key.startswith("$")


def _carries_directive(item: Any) -> bool:
    """A list item holding ``$patch`` is an instruction about the list, never an item of it."""
    return isinstance(item, dict) and _PATCH in item


def _parallel_field(key: str, prefix: str, error: str) -> str:
    """The field a parallel-list directive (``$setElementOrder/containers``) is about."""
    head, slash, field = key.partition("/")
    if head != prefix or not slash:
        raise PatchError(error, 400)
    return field


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _element_kind(*lists: list[Any]) -> str | None:
    """The one JSON type of every item of ``lists`` (None when they are empty), as a merging list needs."""
    kinds = {_json_kind(item) for items in lists for item in items}
    if len(kinds) > 1:
        raise PatchError(f"list element types are not identical: {_go(list(lists))}")
    if "array" in kinds:
        raise PatchError("lists of lists are not supported")
    return kinds.pop() if kinds else None


class _Unkeyed:
    """The identity of an item without a merge key: equal to nothing else."""


def _interleave(
    merged: list[Any],
    patch_order: list[Hashable],
    live_order: list[Hashable],
    identity: Callable[[Any], Hashable],
) -> list[Any]:
    """A merged list in upstream's order (strategicpatch's normalizeElementOrder and mergeSortedSlice).

    The items the patch names, in patch order, and the server's other items, in live order, are merged as two
    sorted runs: a server item goes first only when both it and the next patch item are in the live list and it
    comes earlier there.
    """

    def place(order: list[Hashable], item: Any) -> int | None:
        token = identity(item)
        return order.index(token) if token in order else None

    named = [item for item in merged if identity(item) in patch_order]
    named.sort(key=lambda item: patch_order.index(identity(item)))
    server_only = [item for item in merged if identity(item) not in patch_order]
    out: list[Any] = []
    while server_only or named:
        if server_only and named:
            left, right = place(live_order, server_only[0]), place(live_order, named[0])
            take_server = left is not None and right is not None and left < right
        else:
            take_server = bool(server_only)
        out.append(server_only.pop(0) if take_server else named.pop(0))
    return out


def _merge_key_of(entry: Obj, key: str) -> Any:
    if key not in entry:
        raise PatchError(f"map: {_go(entry)} does not contain declared merge key: {key}")
    return entry[key]


@dataclasses.dataclass(frozen=True)
class _StrategicMerge:
    """One strategic merge: the merge keys of the kind being patched, and the walk that applies them.

    The ``merge_*`` methods change their target (the caller's private copy) in place; values taken from the patch
    are rebuilt through the same walk, so its directives and nulls never reach the result.
    """

    merge_keys: Mapping[str, str]

    def merge_map(self, target: Obj, patch: Obj, path: str) -> Obj:
        directive = patch.get(_PATCH, "merge")
        if directive == "replace":
            return self.merge_map({}, {k: v for k, v in patch.items() if k != _PATCH}, path)
        if directive == "delete":
            return {}
        if directive != "merge":
            raise PatchError(f"unknown patch type: {_go(directive)} in map: {_go(patch)}")
        self._retain_keys(target, patch)
        ordered = self._set_element_orders(target, patch, path)
        for key, value in patch.items():
            if _is_directive(key):
                if key.startswith(_DELETE_FROM):
                    self._delete_from_list(target, key, value)
            elif key not in ordered:
                merged = self.merge_value(target.get(key), value, _join(path, key))
                if merged is None:
                    target.pop(key, None)
                else:
                    target[key] = merged
        return target

    def merge_value(self, current: Any, patch: Any, path: str) -> Any:
        """What a field becomes; None when the patch removes it (null, or a map with ``$patch: delete``)."""
        if isinstance(patch, dict):
            if patch.get(_PATCH) == "delete":
                return None
            return self.merge_map(current if isinstance(current, dict) else {}, patch, path)
        if isinstance(patch, list):
            return self.merge_list(current if isinstance(current, list) else [], patch, path)
        return patch

    def merge_list(self, current: list[Any], patch: list[Any], path: str, ordered: bool = True) -> list[Any]:
        """``ordered``: in upstream's order (:func:`_interleave`); otherwise merged items stay in place and new
        ones follow, for ``$setElementOrder`` to order."""
        strategy = self.merge_keys.get(path)
        if strategy is None:
            return self._fresh(patch, path)
        if _element_kind(current, patch) != "object":
            return self._union(current, patch, ordered)
        if strategy == PRIMITIVE_SET:
            raise PatchError("cannot merge lists without merge key for type map")
        return self._merge_by_key(current, patch, strategy, path, ordered)

    def _fresh(self, items: list[Any], path: str) -> list[Any]:
        """A list replaced whole: its items rebuilt from nothing, list directives dropped."""
        return [self.merge_value(None, item, f"{path}[]") for item in items if not _carries_directive(item)]

    @staticmethod
    def _union(current: list[Any], patch: list[Any], ordered: bool) -> list[Any]:
        """A set of primitives: every item once, ordered as upstream orders a merged list."""
        seen: set[Hashable] = set()
        union = []
        for item in (*current, *patch):
            token = _token(item)
            if token not in seen:
                seen.add(token)
                union.append(item)
        if not ordered:
            return union
        return _interleave(
            union, [_token(item) for item in patch], [_token(item) for item in current], _token
        )

    def _merge_by_key(
        self, current: list[Obj], patch: list[Obj], key: str, path: str, ordered: bool
    ) -> list[Any]:
        """Items with the same merge key merge; new ones are added."""
        plain = [entry for entry in patch if _PATCH not in entry]
        doomed: set[Hashable] = set()
        replace = False
        for entry in patch:
            directive = entry.get(_PATCH, "merge")
            if directive == "replace":
                replace = True
            elif directive == "delete":
                doomed.add(_token(_merge_key_of(entry, key)))
            elif directive != "merge":
                raise PatchError(f"unknown patch type: {_go(directive)} in map: {_go(entry)}")
        if replace:
            return self._fresh(plain, path)
        items = [item for item in current if key not in item or _token(item[key]) not in doomed]
        for entry in plain:
            wanted = _token(_merge_key_of(entry, key))
            match = next(
                (n for n, item in enumerate(items) if key in item and _token(item[key]) == wanted), None
            )
            if match is None:
                items.append(self.merge_map({}, entry, f"{path}[]"))
            else:
                items[match] = self.merge_map(items[match], entry, f"{path}[]")
        if not ordered:
            return items

        def merge_key(item: Obj) -> Hashable:
            return _token(item[key]) if key in item else _Unkeyed()

        patch_order = [_token(_merge_key_of(entry, key)) for entry in plain]
        return _interleave(items, patch_order, [merge_key(item) for item in current], merge_key)

    @staticmethod
    def _retain_keys(target: Obj, patch: Obj) -> None:
        """``$retainKeys``: fields of ``target`` not listed are cleared; the patch may only set listed ones."""
        if _RETAIN_KEYS not in patch:
            return
        retained = patch[_RETAIN_KEYS]
        if not isinstance(retained, list):
            raise PatchError("invalid patch format of retainKeys", 400)
        if any(
            value is not None and not _is_directive(key) and key not in retained
            for key, value in patch.items()
        ):
            raise PatchError("patch content doesn't match retainKeys list")
        for key in [key for key in target if key not in retained]:
            del target[key]

    @staticmethod
    def _delete_from_list(target: Obj, directive: str, doomed: Any) -> None:
        """``$deleteFromPrimitiveList/<field>``: drop those values from the list."""
        field = _parallel_field(directive, _DELETE_FROM, _BAD_PRIMITIVE_LIST)
        if not isinstance(doomed, list):
            raise PatchError(_BAD_PRIMITIVE_LIST, 400)
        current = target.get(field)
        if isinstance(current, list):
            tokens = {_token(value) for value in doomed}
            target[field] = [item for item in current if _token(item) not in tokens]

    def _set_element_orders(self, target: Obj, patch: Obj, path: str) -> set[str]:
        """Merge each list that has a ``$setElementOrder/<field>`` and put it in order; returns those fields."""
        done: set[str] = set()
        for directive, order in patch.items():
            if not (isinstance(directive, str) and directive.startswith(_SET_ORDER)):
                continue
            field = _parallel_field(directive, _SET_ORDER, _BAD_ORDER_LIST)
            if not isinstance(order, list):
                raise PatchError(_BAD_ORDER_LIST, 400)
            current, change = target.get(field), patch.get(field, [])
            if not isinstance(change, list) or not (change or isinstance(current, list)):
                continue  # a null or scalar the plain merge deals with, or nothing to order
            live = current if isinstance(current, list) else []
            child = _join(path, field)
            ordering = _Ordering(self.merge_keys.get(child) or None)
            ordering.check(change, order)
            merged = self.merge_list(live, change, child, ordered=False) if field in patch else live
            # Upstream's merge reuses the live list's storage, so the "live order" it then consults is the merged
            # list's first len(live) places: deletions move later items up, additions fill the places freed.
            # Reading it the same way orders lists exactly as a real API server does.
            target[field] = ordering.apply(merged, ordering.ranks(order), ordering.ranks(merged[: len(live)]))
            done.add(field)
        return done


@dataclasses.dataclass(frozen=True)
class _Ordering:
    """Upstream's ``$setElementOrder`` rules for one list: items the directive names take its order, and the
    server's other items keep their place relative to them as they stood in the live order."""

    merge_key: str | None

    def identity(self, item: Any) -> Hashable:
        """What names an item in the order list: its merge key, or the item itself for primitives."""
        if self.merge_key is None:
            return _token(item)
        if not isinstance(item, dict):
            raise PatchError(f"expected a map, but received a {_json_kind(item)}: {_go(item)}")
        return _token(_merge_key_of(item, self.merge_key))

    def ranks(self, items: list[Any]) -> dict[Hashable, int]:
        """The first position of each item's identity."""
        rank: dict[Hashable, int] = {}
        for position, item in enumerate(items):
            rank.setdefault(self.identity(item), position)
        return rank

    def check(self, patch: list[Any], order: list[Any]) -> None:
        """The patch's items must appear in the order list, in the same relative order."""
        remaining: Iterator[Hashable] = iter([self.identity(entry) for entry in order])
        if not all(self.identity(entry) in remaining for entry in patch if not _carries_directive(entry)):
            raise PatchError(
                f"The order in patch list:\n{_go(patch)}\n doesn't match {_SET_ORDER} list:\n{_go(order)}\n"
            )

    def apply(self, merged: list[Any], order: dict[Hashable, int], was: dict[Hashable, int]) -> list[Any]:
        """Items named by ``order`` sorted by it, merged with the server-only ones, which keep their order.

        At each step a server-only item goes first only when ``was`` (the live order) has it before the next named
        item; items ``was`` does not know are named items, and go first.
        """
        named = sorted(
            (item for item in merged if self.identity(item) in order), key=lambda i: order[self.identity(i)]
        )
        server_only = [item for item in merged if self.identity(item) not in order]
        result: list[Any] = []
        i = j = 0
        while i < len(server_only) and j < len(named):
            left, right = was.get(self.identity(server_only[i])), was.get(self.identity(named[j]))
            if left is not None and right is not None and left < right:
                result.append(server_only[i])
                i += 1
            else:
                result.append(named[j])
                j += 1
        return result + server_only[i:] + named[j:]
