"""Object metadata rules shared by every kind: names, labels, owner references, conditions and timestamps.

Pure functions over plain dicts. Validators return upstream's messages so errors read like a real API server's.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from multiqueue.api.errors import ErrorType, FieldError, Printed, forbidden, immutable, invalid, required
from multiqueue.api.types import Obj

DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
LABEL_VALUE_MAX: Final = 63
ANNOTATIONS_MAX_BYTES: Final = 256 * 1024

_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL: Final = re.compile(_LABEL_FMT)
_DNS1123_SUBDOMAIN: Final = re.compile(rf"{_LABEL_FMT}(\.{_LABEL_FMT})*")
_QUALIFIED_NAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME: Final = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE: Final = re.compile(rf"({_QUALIFIED_NAME_FMT})?")

_LABEL_MSG: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_NAME_PART_MSG: Final = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE_MSG: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _max_len_msg(limit: int) -> str:
    return f"must be no more than {limit} characters"


def _max_bytes_msg(limit: int) -> str:
    """Label keys and values are checked by upstream's newer content rules, which count bytes."""
    return f"must be no more than {limit} bytes"


def dns1123_label_errors(value: str) -> list[str]:
    errs = [] if len(value) <= DNS1123_LABEL_MAX else [_max_len_msg(DNS1123_LABEL_MAX)]
    if not _DNS1123_LABEL.fullmatch(value):
        # Within the length already checked, a subdomain that is no label has dots.
        errs.append("must not contain dots" if _DNS1123_SUBDOMAIN.fullmatch(value) else _LABEL_MSG)
    return errs


def dns1123_subdomain_errors(value: str, in_bytes: bool = False) -> list[str]:
    too_long = _max_bytes_msg if in_bytes else _max_len_msg
    errs = [] if len(value) <= DNS1123_SUBDOMAIN_MAX else [too_long(DNS1123_SUBDOMAIN_MAX)]
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errs.append(_SUBDOMAIN_MSG)
    return errs


def qualified_name_errors(value: str) -> list[str]:
    """Label and annotation keys: an optional DNS subdomain prefix and '/', then a name of at most 63."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            f"a valid label key {_NAME_PART_MSG.removeprefix('name part ')} with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    errs: list[str] = []
    if len(parts) == 2:
        prefix = parts[0]
        errs += (
            [f"prefix part {e}" for e in dns1123_subdomain_errors(prefix, in_bytes=True)]
            if prefix
            else ["prefix part must be non-empty"]
        )
    name = parts[-1]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > LABEL_VALUE_MAX:
        errs.append(f"name part {_max_bytes_msg(LABEL_VALUE_MAX)}")
    if not _QUALIFIED_NAME.fullmatch(name):
        errs.append(_NAME_PART_MSG)
    return errs


def label_value_errors(value: str) -> list[str]:
    errs = [] if len(value) <= LABEL_VALUE_MAX else [_max_bytes_msg(LABEL_VALUE_MAX)]
    if not _LABEL_VALUE.fullmatch(value):
        errs.append(_LABEL_VALUE_MSG)
    return errs


def validate_labels(labels: Any, path: str) -> list[FieldError]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [invalid(path, labels, "must be a map of string keys to string values")]
    errs: list[FieldError] = []
    for key, value in labels.items():
        errs += [invalid(path, key, m) for m in qualified_name_errors(str(key))]
        if not isinstance(value, str):
            errs.append(invalid(f"{path}[{key}]", value, "must be a string"))
        else:
            errs += [invalid(path, value, m) for m in label_value_errors(value)]
    return errs


def validate_annotations(annotations: Any, path: str) -> list[FieldError]:
    if annotations is None:
        return []
    if not isinstance(annotations, dict):
        return [invalid(path, annotations, "must be a map of string keys to string values")]
    errs: list[FieldError] = []
    total = 0
    for key, value in annotations.items():
        errs += [invalid(path, key, m) for m in qualified_name_errors(str(key).lower())]
        if not isinstance(value, str):
            errs.append(invalid(f"{path}[{key}]", value, "must be a string"))
            continue
        total += len(str(key)) + len(value)
    if total > ANNOTATIONS_MAX_BYTES:
        errs.append(FieldError(ErrorType.TOO_LONG, path, f"must have at most {ANNOTATIONS_MAX_BYTES} bytes"))
    return errs


# OwnerReference's fields in Go's order, which is how upstream prints a list of them in a message.
_OWNER_REFERENCE_FIELDS: Final = ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")
# Finalizers of built-in kinds without a domain must be one of these (core validation's standard names).
STANDARD_FINALIZERS: Final = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def validate_owner_references(refs: Any, path: str) -> list[FieldError]:
    """Upstream's ValidateOwnerReferences: each reference names its owner in full; one controller at most."""
    errs: list[FieldError] = []
    controller = ""
    for index, ref in enumerate(as_list(refs)):
        ref = as_dict(ref)
        errs += [
            required(f"{path}[{index}].{key}", "must not be empty")
            for key in _OWNER_REFERENCE_FIELDS[:4]
            if not ref.get(key)
        ]
        if ref.get("controller") is True:
            current = f"{ref.get('kind', '')}/{ref.get('name', '')}"
            if controller:
                in_go_order = [
                    {k: as_dict(r)[k] for k in _OWNER_REFERENCE_FIELDS if k in as_dict(r)}
                    for r in as_list(refs)
                ]
                detail = (
                    'Only one reference can have Controller set to true. Found "true" in references for '
                    f"{controller} and {current}"
                )
                errs.append(invalid(path, Printed(json.dumps(in_go_order, separators=(",", ":"))), detail))
            else:
                controller = current
    return errs


def validate_finalizers(finalizers: Any, path: str) -> list[FieldError]:
    """Upstream's ValidateFinalizers: each a qualified name, and not both orphan and foregroundDeletion."""
    names = [str(f) for f in as_list(finalizers)]
    errs = [invalid(path, name, message) for name in names for message in qualified_name_errors(name)]
    if "orphan" in names and "foregroundDeletion" in names:
        errs.append(invalid(path, names, "finalizer orphan and foregroundDeletion cannot be both set"))
    return errs


def kube_finalizer_errors(finalizers: Any, path: str) -> list[FieldError]:
    """Core validation's extra rule for built-in kinds: a finalizer without a domain is a standard one."""
    detail = "name is neither a standard finalizer name nor is it fully qualified"
    return [
        invalid(f"{path}[{index}]", name, detail)
        for index, name in enumerate(str(f) for f in as_list(finalizers))
        if "/" not in name and name not in STANDARD_FINALIZERS
    ]


def path_segment_name_errors(value: str) -> list[str]:
    """The least any name must be, since it is a segment of the object's URL (Events need no more)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{part}'" for part in ("/", "%") if part in value]


NameRule = Callable[[str], list[str]]


def validate_object_meta(
    meta: Any,
    namespaced: bool,
    path: str = "metadata",
    name_errors: NameRule = dns1123_subdomain_errors,
    *,
    built_in: bool = True,
) -> list[FieldError]:
    """Upstream's ValidateObjectMeta; names are DNS-1123 subdomains (most kinds) unless the kind says otherwise
    (``dns1123_label_errors`` for Namespaces and Services, ``path_segment_name_errors`` for Events). Built-in
    kinds get core validation's finalizer rule on top; custom resources and CRDs do not."""
    if not isinstance(meta, dict):
        return [required(path, "")]
    errs: list[FieldError] = []
    name = meta.get("name")
    generate_name = meta.get("generateName")
    if not name and not generate_name:
        errs.append(required(f"{path}.name", "name or generateName is required"))
    elif name:
        if not isinstance(name, str):
            errs.append(invalid(f"{path}.name", name, "must be a string"))
        else:
            errs += [invalid(f"{path}.name", name, m) for m in name_errors(name)]
    namespace = meta.get("namespace")
    if namespaced:
        if not namespace:
            errs.append(required(f"{path}.namespace", ""))
        elif not isinstance(namespace, str):
            errs.append(invalid(f"{path}.namespace", namespace, "must be a string"))
        else:
            errs += [invalid(f"{path}.namespace", namespace, m) for m in dns1123_label_errors(namespace)]
    elif namespace:
        errs.append(forbidden(f"{path}.namespace", "not allowed on this type"))
    errs += validate_labels(meta.get("labels"), f"{path}.labels")
    errs += validate_annotations(meta.get("annotations"), f"{path}.annotations")
    errs += validate_owner_references(meta.get("ownerReferences"), f"{path}.ownerReferences")
    errs += validate_finalizers(meta.get("finalizers"), f"{path}.finalizers")
    if built_in:
        errs += kube_finalizer_errors(meta.get("finalizers"), f"{path}.finalizers")
    return errs


def validate_object_meta_update(
    new: Any, old: Any, path: str = "metadata", *, built_in: bool = True
) -> list[FieldError]:
    """Identity fields never change on update."""
    new_meta = new if isinstance(new, dict) else {}
    old_meta = old if isinstance(old, dict) else {}
    errs: list[FieldError] = []
    for key in ("name", "namespace", "uid", "creationTimestamp"):
        if key in old_meta and new_meta.get(key) != old_meta.get(key):
            errs.append(immutable(f"{path}.{key}", new_meta.get(key)))
    errs += validate_labels(new_meta.get("labels"), f"{path}.labels")
    errs += validate_annotations(new_meta.get("annotations"), f"{path}.annotations")
    errs += validate_owner_references(new_meta.get("ownerReferences"), f"{path}.ownerReferences")
    errs += validate_finalizers(new_meta.get("finalizers"), f"{path}.finalizers")
    if built_in:
        errs += kube_finalizer_errors(new_meta.get("finalizers"), f"{path}.finalizers")
    return errs


# --- Small accessors ----------------------------------------------------------------------------------------


# ObjectMeta fields Go leaves out when empty (omitempty): written empty, they read back absent.
_OMITTED_WHEN_EMPTY: Final = ("labels", "annotations", "ownerReferences", "finalizers", "managedFields")


def drop_empty_metadata(obj: Obj) -> None:
    """Remove the metadata maps and lists a write left empty, as the object reads back from upstream."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for field in _OMITTED_WHEN_EMPTY:
            if field in meta and meta[field] in (None, {}, []):
                del meta[field]


def as_dict(value: Any) -> Obj:
    """``value`` if it is a dict, else an empty one: malformed input never raises in ``api/``."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_int(value: Any) -> int | None:
    """An integer field, or None when absent or not an integer (JSON booleans are not integers)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def metadata(obj: Any) -> Obj:
    return as_dict(as_dict(obj).get("metadata"))


def name_of(obj: Any) -> str:
    return str(metadata(obj).get("name") or "")


def namespace_of(obj: Any) -> str:
    return str(metadata(obj).get("namespace") or "")


def uid_of(obj: Any) -> str:
    return str(metadata(obj).get("uid") or "")


def labels_of(obj: Any) -> dict[str, str]:
    return as_dict(metadata(obj).get("labels"))


def annotations_of(obj: Any) -> dict[str, str]:
    return as_dict(metadata(obj).get("annotations"))


def key_of(obj: Any) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects: the key of caches and work queues. Interned: a
    manager holds the key of each Job in several maps (cache, ledger, queue, metrics), each made from its own event."""
    ns = namespace_of(obj)
    return sys.intern(f"{ns}/{name_of(obj)}") if ns else name_of(obj)


def is_deleting(obj: Any) -> bool:
    return bool(metadata(obj).get("deletionTimestamp"))


# --- Owner references ---------------------------------------------------------------------------------------


def owner_reference(owner: Obj, *, controller: bool = True, block_owner_deletion: bool = True) -> Obj:
    return {
        "apiVersion": str(owner.get("apiVersion", "")),
        "kind": str(owner.get("kind", "")),
        "name": name_of(owner),
        "uid": uid_of(owner),
        "controller": controller,
        "blockOwnerDeletion": block_owner_deletion,
    }


def controller_ref(obj: Any) -> Obj | None:
    """The owner reference marked ``controller: true``, if any."""
    for ref in as_list(metadata(obj).get("ownerReferences")):
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def is_controlled_by(obj: Any, owner: Any) -> bool:
    ref = controller_ref(obj)
    return ref is not None and bool(uid_of(owner)) and ref.get("uid") == uid_of(owner)


# --- Conditions (Jobs, Pods, Nodes and custom kinds share this shape) -----------------------------------------


def find_condition(conditions: Any, type_: str) -> Obj | None:
    for cond in as_list(conditions):
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def condition_is_true(conditions: Any, type_: str) -> bool:
    cond = find_condition(conditions, type_)
    return cond is not None and cond.get("status") == "True"


def set_condition(
    conditions: list[Obj],
    type_: str,
    status: str,
    reason: str,
    message: str,
    now: datetime,
) -> bool:
    """Add or update a condition in place; ``lastTransitionTime`` moves only when the status flips.

    Returns whether anything changed, so callers can skip a status write that would change nothing.
    """
    stamp = format_time(now)
    cond = find_condition(conditions, type_)
    if cond is None:
        conditions.append(
            {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastProbeTime": stamp,
                "lastTransitionTime": stamp,
            }
        )
        return True
    if cond.get("status") == status and cond.get("reason") == reason and cond.get("message") == message:
        return False
    if cond.get("status") != status:
        cond["lastTransitionTime"] = stamp
    cond.update(status=status, reason=reason, message=message, lastProbeTime=stamp)
    return True


# --- Time ---------------------------------------------------------------------------------------------------


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with second precision, as ``metav1.Time`` serialises."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: Any) -> datetime | None:
    """A timezone-aware datetime from an RFC 3339 string, or None when absent or malformed."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
