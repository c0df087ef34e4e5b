"""Patch semantics of the Kubernetes API: JSON patch, JSON merge patch and strategic merge patch.

The strategic merge of built-in kinds needs to know, for each list in an object, whether it merges by a key
(``containers`` by ``name``, ``conditions`` by ``type``), merges as a set of primitives (``finalizers``), or is
replaced whole. :func:`list_strategy` answers that from one table, which the OpenAPI documents also publish as
``x-kubernetes-patch-merge-key`` / ``x-kubernetes-patch-strategy`` so ``kubectl apply`` computes the same patches.
"""

from __future__ import annotations

import copy
from typing import Any, Final

# Marks a list of primitives merged as a set (upstream's patchStrategy "merge" without a merge key).
PRIMITIVE_SET: Final = ""

_CONTAINER_LISTS: Final = {
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}

_POD_SPEC: Final[dict[str, str]] = {
    "volumes": "name",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "topologySpreadConstraints": "topologyKey",
    **{
        f"{containers}[].{field}": key
        for containers in ("containers", "initContainers", "ephemeralContainers")
        for field, key in _CONTAINER_LISTS.items()
    },
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
}

_META: Final[dict[str, str]] = {
    "metadata.finalizers": PRIMITIVE_SET,
    "metadata.ownerReferences": "uid",
}


def _nested(prefix: str, table: dict[str, str]) -> dict[str, str]:
    return {f"{prefix}.{path}": key for path, key in table.items()}


_POD_TEMPLATE: Final = _nested("spec.template.spec", _POD_SPEC)

# (group, kind) -> dotted list path ("[]" steps into list items) -> merge key, or PRIMITIVE_SET.
MERGE_KEYS: Final[dict[tuple[str, str], dict[str, str]]] = {
    ("", "Pod"): {
        **_META,
        **_nested("spec", _POD_SPEC),
        "status.conditions": "type",
        "status.podIPs": "ip",
        "status.hostIPs": "ip",
    },
    ("batch", "Job"): {**_META, **_POD_TEMPLATE, "status.conditions": "type"},
    ("batch", "CronJob"): {
        **_META,
        **_nested("spec.jobTemplate", _POD_TEMPLATE),
        "status.active": "uid",
    },
    ("", "Node"): {**_META, "status.conditions": "type", "status.addresses": "type"},
    ("", "Namespace"): {**_META, "status.conditions": "type"},
    ("", "ServiceAccount"): {**_META, "secrets": "name", "imagePullSecrets": "name"},
    ("", "Event"): dict(_META),
    ("", "ConfigMap"): dict(_META),
    ("", "Secret"): dict(_META),
    ("coordination.k8s.io", "Lease"): dict(_META),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): {**_META, "status.conditions": "type"},
}


def list_strategy(group: str, kind: str, path: str) -> str | None:
    """The merge key of the list at ``path`` (e.g. ``spec.template.spec.containers``), ``PRIMITIVE_SET``, or
    None when the list is replaced whole (the default for every list not in the table)."""
    return MERGE_KEYS.get((group, kind), _META).get(path)


class PatchError(Exception):
    """A patch that cannot be applied. ``code``/``reason`` are what the server answers with."""

    def __init__(self, message: str, code: int = 422, reason: str = "Invalid") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


# --- JSON merge patch (RFC 7386) ----------------------------------------------------------------------------


def apply_merge_patch(doc: Any, patch: Any) -> Any:
    """Maps merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(doc) if isinstance(doc, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


# --- JSON patch (RFC 6902) ----------------------------------------------------------------------------------


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise PatchError(f"invalid JSON pointer {path!r}", 400, "BadRequest")
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]] if path else []


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    current = doc
    for part in parts[:-1]:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise PatchError(f"doc is missing path: {path!r}")
    return current


def _index(container: list[Any], part: str, path: str, allow_end: bool) -> int:
    if part == "-" and allow_end:
        return len(container)
    if not part.isdigit() or (part != "0" and part.startswith("0")):
        raise PatchError(f"invalid array index {part!r} in {path!r}")
    index = int(part)
    if index > len(container) or (index == len(container) and not allow_end):
        raise PatchError(f"array index {index} out of bounds in {path!r}")
    return index


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, allow_end=False)]
    raise PatchError(f"doc is missing path: {path!r}")


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, allow_end=True), value)
    else:
        raise PatchError(f"doc is missing path: {path!r}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, path, allow_end=False)]
    else:
        raise PatchError(f"doc is missing path: {path!r}: missing value")
    return doc


def apply_json_patch(doc: Any, ops: Any) -> Any:
    """Apply a list of RFC 6902 operations to a copy of ``doc``."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations", 400, "BadRequest")
    result = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation: {op!r}", 400, "BadRequest")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {kind} at {path!r} has no value", 400, "BadRequest")
        if kind == "add":
            result = _add(result, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            result = _remove(result, path)
        elif kind == "replace":
            _get(result, path)
            result = (
                _add(_remove(result, path), path, copy.deepcopy(op["value"]))
                if _pointer(path)
                else op["value"]
            )
        elif kind in ("move", "copy"):
            source = str(op.get("from", ""))
            value = copy.deepcopy(_get(result, source))
            if kind == "move":
                result = _remove(result, source)
            result = _add(result, path, value)
        elif kind == "test":
            if _get(result, path) != op["value"]:
                raise PatchError(f"testing value {path} failed")
        else:
            raise PatchError(f"unexpected kind of JSON patch operation: {kind!r}", 400, "BadRequest")
    return result


# --- strategic merge patch ----------------------------------------------------------------------------------

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_PRIMITIVES = "$deleteFromPrimitiveList/"
_ELEMENT_ORDER = "$setElementOrder/"


def apply_strategic_merge_patch(doc: Any, patch: Any, group: str, kind: str) -> Any:
    """Kubernetes' strategic merge for built-in kinds: lists merge by their key where the table says so."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be an object", 400, "BadRequest")
    table = MERGE_KEYS.get((group, kind), _META)
    return _merge_map(copy.deepcopy(doc) if isinstance(doc, dict) else {}, patch, "", table)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _merge_map(
    target: dict[str, Any], patch: dict[str, Any], path: str, table: dict[str, str]
) -> dict[str, Any]:
    directive = patch.get(_DIRECTIVE)
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    if directive == "delete":
        return {}
    if directive not in (None, "merge"):
        raise PatchError(f"unknown patch type: {directive}")
    retain = patch.get(_RETAIN_KEYS)
    if isinstance(retain, list):
        target = {k: v for k, v in target.items() if k in retain}
    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVES):
            field = key[len(_DELETE_PRIMITIVES) :]
            removed = value if isinstance(value, list) else []
            target[field] = [v for v in target.get(field) or [] if v not in removed]
            continue
        if key.startswith("$"):
            continue
        child = _join(path, key)
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            existing = target.get(key)
            target[key] = _merge_map(existing if isinstance(existing, dict) else {}, value, child, table)
        elif isinstance(value, list):
            target[key] = _merge_list(target.get(key), value, child, table)
        else:
            target[key] = copy.deepcopy(value)
    for key, order in patch.items():
        if key.startswith(_ELEMENT_ORDER) and isinstance(order, list):
            field = key[len(_ELEMENT_ORDER) :]
            if isinstance(target.get(field), list):
                target[field] = _reorder(target[field], order, table.get(_join(path, field)))
    return target


def _merge_list(current: Any, patch: list[Any], path: str, table: dict[str, str]) -> list[Any]:
    strategy = table.get(path)
    existing = current if isinstance(current, list) else []
    if any(isinstance(item, dict) and item.get(_DIRECTIVE) == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and _DIRECTIVE in i)]
    if strategy is None:
        return copy.deepcopy(patch)
    if strategy == PRIMITIVE_SET:
        merged = list(existing)
        merged.extend(copy.deepcopy(item) for item in patch if item not in merged)
        return merged
    merged = [copy.deepcopy(item) for item in existing]
    positions = {item.get(strategy): i for i, item in enumerate(merged) if isinstance(item, dict)}
    deleted: set[Any] = set()
    item_path = f"{path}[]"
    for item in patch:
        if not isinstance(item, dict) or strategy not in item:
            raise PatchError(f"map: {item!r} does not contain declared merge key: {strategy}")
        key = item[strategy]
        if item.get(_DIRECTIVE) == "delete":
            deleted.add(key)
            continue
        if key in positions:
            merged[positions[key]] = _merge_map(merged[positions[key]], item, item_path, table)
        else:
            positions[key] = len(merged)
            merged.append(_merge_map({}, item, item_path, table))
    return [item for item in merged if not (isinstance(item, dict) and item.get(strategy) in deleted)]


def _reorder(items: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    """``$setElementOrder``: items named in ``order`` come in that order; others keep their place after them."""

    def identity(item: Any) -> Any:
        if merge_key and isinstance(item, dict):
            return item.get(merge_key)
        return item

    wanted = [o.get(merge_key) if merge_key and isinstance(o, dict) else o for o in order]
    rank = {key: i for i, key in enumerate(wanted)}
    ordered = sorted((i for i in items if identity(i) in rank), key=lambda i: rank[identity(i)])
    return ordered + [i for i in items if identity(i) not in rank]
