"""``metadata.managedFields``: which manager owns which fields, recorded on every write as kube-apiserver does.

Every create, update and patch is an *Update* by a manager (the ``fieldManager`` the client names, else the start
of its User-Agent): it comes to own the fields it changed. A server-side apply is an *Apply*: its manager owns
exactly the fields it applied. Entries are kept per manager, operation, API version and subresource, sorted as
upstream sorts them, with the time of the manager's last change. Upstream's behaviour is followed step by step:
objects written before any managedFields existed are not tracked until their first apply, which first records the
fields already there under ``before-first-apply``; at most ten update entries are kept (older ones merge into
``ancient-changes``); the object's identity fields (name, uid, resourceVersion, ...) are nobody's; ``kubectl``'s
apply may take over fields its client-side ``last-applied-configuration`` annotation shows it set.

This module decides; the API server calls it with the objects and writes what it returns.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Final

from multiqueue.api.errors import FieldError, forbidden, invalid, required, too_long
from multiqueue.api.meta import as_dict, parse_time
from multiqueue.api.types import Obj
from multiqueue.apiserver.rules import apply as smd
from multiqueue.apiserver.rules.fieldsets import (
    EMPTY,
    FieldsError,
    FieldSet,
    from_paths,
    go_json,
    parse_path,
    path_string,
)
from multiqueue.apiserver.rules.schemas import Node

APPLY: Final = "Apply"
UPDATE: Final = "Update"
FIELDS_V1: Final = "FieldsV1"
MAX_UPDATE_MANAGERS: Final = 10
MAX_MANAGER_LENGTH: Final = 128
ANCIENT_CHANGES: Final = "ancient-changes"
BEFORE_FIRST_APPLY: Final = "before-first-apply"
UNKNOWN_MANAGER: Final = "unknown"
KUBECTL: Final = "kubectl"
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
MAX_ANNOTATIONS_BYTES: Final = 256 * 1024
_CURRENT_OPERATION: Final = "current-operation"

# Fields of every object no manager owns.
_IDENTITY_FIELDS: Final = from_paths(
    *(
        parse_path(p)
        for p in (
            "apiVersion",
            "kind",
            "metadata",
            "metadata.name",
            "metadata.namespace",
            "metadata.creationTimestamp",
            "metadata.selfLink",
            "metadata.uid",
            "metadata.clusterName",
            "metadata.generation",
            "metadata.managedFields",
            "metadata.resourceVersion",
        )
    )
)


class ManagedFieldsError(ValueError):
    """managedFields that cannot be read."""


class ApplyError(ValueError):
    """An apply request upstream refuses before merging: ``code`` 400 or 500, with upstream's message."""

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True)
class Context:
    """What the server knows about the write: the kind's schema and version, the subresource, the time, and the
    fields the kind's strategy resets on this endpoint (upstream's GetResetFields)."""

    node: Node
    api_version: str
    kind: str
    subresource: str
    now: str
    reset: FieldSet = EMPTY

    def keep(self, fieldset: FieldSet) -> FieldSet:
        return fieldset.recursive_difference(self.reset)


@dataclasses.dataclass
class Managed:
    """Decoded managedFields: each manager's fields, and the time of its last change (None when unknown)."""

    fields: smd.Managers = dataclasses.field(default_factory=dict)
    times: dict[str, str | None] = dataclasses.field(default_factory=dict)


# --- manager identities and entries -------------------------------------------------------------------------


def identity(manager: str, operation: str, api_version: str, subresource: str) -> str:
    """How upstream keys a manager: its entry without fields and time as Go's JSON (no version for Apply)."""
    parts = [("manager", manager), ("operation", operation)]
    if api_version and operation != APPLY:
        parts.append(("apiVersion", api_version))
    if subresource:
        parts.append(("subresource", subresource))
    return "{" + ",".join(f'"{name}":{go_json(text)}' for name, text in parts if text) + "}"


def _identity_parts(manager_id: str) -> dict[str, str]:
    try:
        parsed = json.loads(manager_id)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in parsed.items()} if isinstance(parsed, dict) else {}


def decode(entries: Any) -> Managed:
    """Read managedFields; raises :class:`ManagedFieldsError` with upstream's reason for a bad entry."""
    managed = Managed()
    if entries is None:
        return managed
    if not isinstance(entries, list):
        raise ManagedFieldsError("managedFields must be a list")
    for position, raw in enumerate(entries):
        entry = as_dict(raw)
        operation = entry.get("operation")
        if operation not in (APPLY, UPDATE):
            raise ManagedFieldsError("operation must be `Apply` or `Update`")
        api_version = entry.get("apiVersion")
        if not isinstance(api_version, str) or not api_version:
            raise ManagedFieldsError("apiVersion must not be empty")
        fields_type = entry.get("fieldsType")
        if not fields_type:
            raise ManagedFieldsError(f"missing fieldsType in managed fields entry {position}")
        if fields_type != FIELDS_V1:
            raise ManagedFieldsError(
                f"invalid fieldsType {json.dumps(fields_type)} in managed fields entry {position}"
            )
        manager_id = identity(
            str(entry.get("manager") or ""), operation, api_version, str(entry.get("subresource") or "")
        )
        try:
            fields = FieldSet.from_fields(entry.get("fieldsV1") or {})
        except FieldsError as exc:
            raise ManagedFieldsError(f"error decoding versioned set: {exc}") from exc
        managed.fields[manager_id] = smd.VersionedSet(fields, api_version, operation == APPLY)
        time = entry.get("time")
        managed.times[manager_id] = time if isinstance(time, str) else None
    return managed


def _seconds(time: str | None) -> float:
    moment = parse_time(time)
    return moment.timestamp() if moment is not None else 0.0


def encode(managed: Managed) -> list[Obj] | None:
    """managedFields entries in upstream's order (Apply before Update, then oldest first); None when empty."""
    if not managed.fields:
        return None
    entries = []
    for manager_id, versioned in managed.fields.items():
        parts = _identity_parts(manager_id)
        entry: Obj = {
            "manager": parts.get("manager", ""),
            "operation": APPLY if versioned.applied else parts.get("operation", UPDATE),
            "apiVersion": versioned.api_version,
        }
        time = managed.times.get(manager_id)
        if time:
            entry["time"] = time
        entry["fieldsType"] = FIELDS_V1
        entry["fieldsV1"] = versioned.fields.to_fields()
        if parts.get("subresource"):
            entry["subresource"] = parts["subresource"]
        entries.append(entry)
    entries.sort(
        key=lambda e: (
            e["operation"],
            _seconds(e.get("time")),
            e["manager"],
            e["apiVersion"],
            e.get("subresource", ""),
        )
    )
    return entries


def without_times(entries: Any) -> Any:
    """managedFields with their times left out, to tell a change of ownership from a change of time only."""
    if not isinstance(entries, list):
        return entries
    return [{k: v for k, v in as_dict(e).items() if k != "time"} for e in entries]


# --- who is writing ----------------------------------------------------------------------------------------


def manager_from_user_agent(user_agent: str) -> str:
    """Upstream's default manager: the User-Agent up to its first ``/``, printable characters, at most 128 bytes."""
    out = ""
    for char in user_agent.split("/")[0]:
        if not char.isprintable():
            continue
        if len((out + char).encode()) > MAX_MANAGER_LENGTH:
            break
        out += char
    return out


def manager_problems(field_manager: str) -> list[FieldError]:
    """Upstream's ValidateFieldManager: at most 128 bytes, printable characters only."""
    problems = []
    if len(field_manager.encode()) > MAX_MANAGER_LENGTH:
        problems.append(too_long("fieldManager", MAX_MANAGER_LENGTH))
    position = 0
    for char in field_manager:
        if not char.isprintable():
            problems.append(
                invalid(
                    "fieldManager",
                    field_manager,
                    f"invalid character U+{ord(char):04X} (at position {position})",
                )
            )
        position += len(char.encode())
    return problems


def patch_option_problems(field_manager: str, force_given: bool, is_apply: bool) -> list[FieldError]:
    """Upstream's ValidatePatchOptions: apply needs a field manager, only apply takes ``force``."""
    problems = []
    if is_apply and not field_manager:
        problems.append(required("fieldManager", "is required for apply patch"))
    if not is_apply and force_given:
        problems.append(forbidden("force", "may not be specified for non-apply patch"))
    return problems + manager_problems(field_manager)


# --- the update path ----------------------------------------------------------------------------------------


def _strip_identity(managed: Managed, manager_id: str) -> None:
    versioned = managed.fields.get(manager_id)
    if versioned is None:
        return
    rest = versioned.fields.difference(_IDENTITY_FIELDS)
    if rest.empty:
        del managed.fields[manager_id]
    else:
        managed.fields[manager_id] = dataclasses.replace(versioned, fields=rest)


def _record_update(old: Any, new: Any, managed: Managed, manager: str, context: Context) -> Managed:
    """Upstream's update stack below the skip: build the identity, record the change, cap the update entries."""
    manager_id = identity(manager or UNKNOWN_MANAGER, UPDATE, context.api_version, context.subresource)
    fields = smd.update(
        old, new, context.node, context.api_version, dict(managed.fields), _CURRENT_OPERATION, context.keep
    )
    result = Managed(fields, dict(managed.times))
    _strip_identity(result, _CURRENT_OPERATION)
    current = result.fields.pop(_CURRENT_OPERATION, None)
    if current is not None:
        previous = result.fields.get(manager_id)
        union = current.fields if previous is None else current.fields.union(previous.fields)
        result.fields[manager_id] = smd.VersionedSet(union, current.api_version, False)
        result.times[manager_id] = context.now
    return _cap_updates(result)


def _cap_updates(managed: Managed) -> Managed:
    """At most ten update entries: the oldest merge into one ``ancient-changes`` entry per API version."""
    updaters = [m for m, v in managed.fields.items() if not v.applied]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return managed
    updaters.sort(key=lambda m: (int(_seconds(managed.times.get(m))), m))
    first_by_version: dict[str, str] = {}
    remaining = len(updaters)
    for manager_id in updaters:
        if remaining <= MAX_UPDATE_MANAGERS:
            break
        versioned = managed.fields[manager_id]
        time = managed.times.get(manager_id)
        bucket = identity(ANCIENT_CHANGES, UPDATE, versioned.api_version, "")
        first = first_by_version.get(versioned.api_version)
        if first is None:
            first_by_version[versioned.api_version] = manager_id
            continue
        if bucket not in managed.fields:
            managed.fields[bucket] = managed.fields.pop(first)
        managed.fields[bucket] = smd.VersionedSet(
            versioned.fields.union(managed.fields[bucket].fields), versioned.api_version, versioned.applied
        )
        del managed.fields[manager_id]
        remaining -= 1
        managed.times[bucket] = time
    return managed


def _is_reset(entries: Any) -> bool:
    """An empty list, or one empty entry: the client asks to forget all ownership."""
    return isinstance(entries, list) and (entries == [] or entries == [{}])


def _has_uid(obj: Any) -> bool:
    return bool(as_dict(as_dict(obj).get("metadata")).get("uid"))


def _decode_or_empty(entries: Any) -> Managed:
    try:
        return decode(entries)
    except ManagedFieldsError:
        return Managed()


def on_update(old: Obj, new: Obj, manager: str, context: Context) -> list[Obj] | None:
    """The managedFields of ``new`` after ``manager`` wrote it over ``old`` by a create, update or patch.

    ``old`` is the stored object, or the kind's zero object for a create; ``new`` carries the managedFields the
    client sent, which replace the recorded ones when valid (an empty list resets them), except on subresources.
    """
    old_entries = as_dict(old.get("metadata")).get("managedFields")
    sent = as_dict(new.get("metadata")).get("managedFields")
    if context.subresource:
        managed = _decode_or_empty(old_entries)
    elif _is_reset(sent):
        managed = Managed()
    else:
        managed = _decode_or_empty(sent)
        if not managed.fields:
            managed = _decode_or_empty(old_entries)
    if not managed.fields and _has_uid(old):
        return None  # written before ownership was tracked: it is not, until the first apply
    return encode(
        _record_update(without_managed_fields(old), without_managed_fields(new), managed, manager, context)
    )


def without_managed_fields(obj: Obj) -> Obj:
    """``obj`` without its managedFields (a shallow copy when it has some)."""
    meta = as_dict(obj.get("metadata"))
    if "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


# --- the apply path -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Applied:
    """An apply's outcome: the object to write (None when the apply changes nothing but ownership) and the new
    managedFields."""

    obj: Obj | None
    managed_fields: list[Obj] | None


def object_type(obj: Obj) -> str:
    """An object's group, version and kind as upstream prints them: ``batch/v1, Kind=Job``, ``/v1, Kind=Pod``."""
    api_version = str(obj.get("apiVersion") or "")
    group, slash, version = api_version.rpartition("/")
    if api_version.count("/") > 1:
        group = version = ""
    return f"{group if slash else ''}/{version}, Kind={obj.get('kind') or ''}"


def on_apply(live: Obj, config: Obj, manager: str, force: bool, context: Context, zero: Obj) -> Applied:
    """Apply ``config`` to ``live`` (``zero``, the kind's zero object, when there is none) as ``manager``.

    Raises :class:`smd.Conflicts` (forced conflicts move ownership instead), :class:`ApplyError` for a
    configuration upstream refuses, before anything is merged.
    """
    try:
        managed = decode(as_dict(live.get("metadata")).get("managedFields"))
    except ManagedFieldsError as exc:
        raise ApplyError(f"failed to decode managed fields: {exc}", 500) from exc
    expected = f"{context.api_version}, Kind={context.kind}"
    if object_type(config) != (expected if "/" in context.api_version else f"/{expected}"):
        raise ApplyError(f"invalid object type: {object_type(config)}")
    config_meta = as_dict(config.get("metadata"))
    if config_meta.get("managedFields") is not None:
        raise ApplyError("metadata.managedFields must be nil")
    problems = smd.check(config, context.node)
    if problems:
        what = f"{config_meta.get('namespace') or ''}/{config_meta.get('name') or ''}; {object_type(config)}"
        joined = problems[0] if len(problems) == 1 else "errors:\n" + "\n".join(f"  {p}" for p in problems)
        # kube-apiserver 1.37 answers this 500 (kubernetes/kubernetes#139253); the input is the client's, so 400.
        raise ApplyError(f"failed to create typed patch object ({what}): {joined}")
    live = without_managed_fields(live)
    if not managed.fields:
        # Ownership starts now: what the object already holds belongs to no applier.
        managed = _record_update(zero, live, managed, BEFORE_FIRST_APPLY, context)
    try:
        outcome, managed = _apply(live, config, managed, manager, force, context)
    except smd.Conflicts as conflicts:
        if manager != KUBECTL:
            raise
        allowed = _last_applied_fields(live, context)
        rest = [c for c in conflicts.conflicts if not allowed.has(c.path)]
        if rest:
            raise smd.Conflicts(rest) from None
        outcome, managed = _apply(live, config, managed, manager, True, context)
    if manager == KUBECTL and _annotations(outcome if outcome is not None else live).get(LAST_APPLIED):
        outcome = _with_last_applied(outcome if outcome is not None else live, config)
    return Applied(outcome, encode(managed))


def _apply(
    live: Obj, config: Obj, managed: Managed, manager: str, force: bool, context: Context
) -> tuple[Obj | None, Managed]:
    manager_id = identity(manager, APPLY, context.api_version, context.subresource)
    new, fields = smd.apply(
        live, config, context.node, context.api_version, dict(managed.fields), manager_id, force, context.keep
    )
    result = Managed(fields, dict(managed.times))
    if new is not smd.ABSENT:
        result.times[manager_id] = context.now
    _strip_identity(result, manager_id)
    return (None if new is smd.ABSENT else new), result


def _annotations(obj: Obj) -> dict[str, Any]:
    return as_dict(as_dict(obj.get("metadata")).get("annotations"))


def _last_applied_fields(live: Obj, context: Context) -> FieldSet:
    """Fields kubectl's client-side apply last set and that still hold those values: its server-side apply may
    take them over without forcing."""
    text = _annotations(live).get(LAST_APPLIED)
    if not isinstance(text, str) or not text:
        return EMPTY
    try:
        last = json.loads(text)
    except ValueError:
        return EMPTY
    if not isinstance(last, dict) or last.get("apiVersion") != context.api_version:
        return EMPTY
    fields = smd.object_fields(last, context.node)
    changed = smd.compare(last, live, context.node)
    return fields.difference(changed.modified).difference(changed.added).difference(changed.removed)


def _with_last_applied(obj: Obj, config: Obj) -> Obj:
    """kubectl's server-side apply keeps an existing last-applied-configuration annotation current."""
    meta = dict(as_dict(config.get("metadata")))
    annotations = {k: v for k, v in as_dict(meta.get("annotations")).items() if k != LAST_APPLIED}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    text = json.dumps({**config, "metadata": meta}, separators=(",", ":"), sort_keys=True) + "\n"
    current = dict(_annotations(obj))
    current[LAST_APPLIED] = text
    if sum(len(k) + len(str(v)) for k, v in current.items()) > MAX_ANNOTATIONS_BYTES:
        del current[LAST_APPLIED]
    return {**obj, "metadata": {**as_dict(obj.get("metadata")), "annotations": current}}


# --- conflicts ----------------------------------------------------------------------------------------------


def _print_manager(manager_id: str) -> str:
    parts = _identity_parts(manager_id)
    if not parts:
        return json.dumps(manager_id, ensure_ascii=False)
    text = json.dumps(parts.get("manager", ""), ensure_ascii=False)
    if parts.get("subresource"):
        text += f" with subresource {json.dumps(parts['subresource'], ensure_ascii=False)}"
    if parts.get("operation") == UPDATE:
        text += f" using {parts.get('apiVersion', '')}"
    return text


def conflict_status(conflicts: list[smd.Conflict]) -> Obj:
    """The 409 upstream answers an apply that changes others' fields, one cause per field."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {_print_manager(c.manager)}",
            "field": path_string(c.path),
        }
        for c in conflicts
    ]
    if len(conflicts) == 1:
        only = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {_print_manager(only.manager)}: {path_string(only.path)}"
    else:
        by_manager: dict[str, list[str]] = {}
        for c in conflicts:
            by_manager.setdefault(c.manager, []).append(path_string(c.path))
        lines = []
        for manager_id in sorted(by_manager):
            lines.append(f"conflicts with {_print_manager(manager_id)}:")
            lines += [f"- {path}" for path in by_manager[manager_id]]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Conflict",
        "details": {"causes": causes},
        "code": 409,
    }


def reset_fields(paths: tuple[str, ...]) -> FieldSet:
    """The fields a strategy resets on an endpoint (``status``, ``spec``, ``metadata.labels``...)."""
    return from_paths(*(parse_path(p) for p in paths))
