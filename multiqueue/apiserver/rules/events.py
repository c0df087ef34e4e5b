"""Core v1 Events as kube-apiserver stores and checks them: Go's zero values, and the lenient legacy validation
(any URL-safe name; the involved object's namespace must be the event's own).
"""

from __future__ import annotations

from typing import Any, Final

from multiqueue.api.errors import FieldError, invalid, required
from multiqueue.api.meta import (
    as_dict,
    namespace_of,
    path_segment_name_errors,
    qualified_name_errors,
    validate_object_meta,
)
from multiqueue.api.types import Obj

REPORTING_INSTANCE_MAX: Final = 128
ACTION_MAX: Final = 128
REASON_MAX: Final = 128
NOTE_MAX: Final = 1024
# Fields Go writes whether set or not: times as null, strings as "", structs as {}.
_ZEROS: Final[tuple[tuple[str, Any], ...]] = (
    ("eventTime", None),
    ("firstTimestamp", None),
    ("lastTimestamp", None),
    ("reportingComponent", ""),
    ("reportingInstance", ""),
)
_STRUCTS: Final = ("involvedObject", "source")


def default_event(event: Obj) -> None:
    """What an event reads back as after Go decoded and encoded it."""
    go_zeros(event, _ZEROS, _STRUCTS)


def go_zeros(event: Obj, zeros: tuple[tuple[str, Any], ...], structs: tuple[str, ...]) -> None:
    """The fields an Event version's Go type always writes, at their zero where unset; its structs as ``{}``
    where unset, each without its empty fields (every field of an ObjectReference and an EventSource is left out
    when empty)."""
    for field, zero in zeros:
        event.setdefault(field, zero)
    for field in structs:
        struct = event.get(field)
        if struct is None:
            event[field] = {}
        elif isinstance(struct, dict):
            event[field] = {k: v for k, v in struct.items() if v not in ("", None)}


def _too_long(path: str, limit: int) -> FieldError:
    return invalid(path, "", f"can have at most {limit} characters")


def legacy_errors(event: Obj, controller_path: str = "reportingComponent") -> list[FieldError]:
    """Upstream's legacyValidateEvent, which every write of an Event passes whatever its API: old-style events (no
    eventTime) only need matching namespaces; new-style ones also name who reported them and what happened.
    ``controller_path`` names the reporting controller's field as the API written through calls it."""
    namespace = namespace_of(event)
    involved = str(as_dict(event.get("involvedObject")).get("namespace") or "")
    mismatch = invalid("involvedObject.namespace", involved, "does not match event.namespace")
    if not event.get("eventTime"):
        if (not involved and namespace not in ("", "default")) or (involved and involved != namespace):
            return [mismatch]
        return []
    errs = [mismatch] if not involved and namespace not in ("default", "kube-system") else []
    component = str(event.get("reportingComponent") or "")
    if not component:
        errs.append(required(controller_path))
    errs += [invalid(controller_path, component, m) for m in qualified_name_errors(component)]
    for field, limit in (
        ("reportingInstance", REPORTING_INSTANCE_MAX),
        ("action", ACTION_MAX),
        ("reason", REASON_MAX),
    ):
        value = str(event.get(field) or "")
        if not value:
            errs.append(required(field))
        if len(value) > limit:
            errs.append(_too_long(field, limit))
    if len(str(event.get("message") or "")) > NOTE_MAX:
        errs.append(_too_long("message", NOTE_MAX))
    return errs


def validate_event(event: Obj) -> list[FieldError]:
    """The kind's own rules first; metadata is checked (names only as URL segments) when they pass."""
    return legacy_errors(event) or validate_object_meta(
        event.get("metadata"), namespaced=True, name_errors=path_segment_name_errors
    )


def validate_event_update(new: Obj) -> list[FieldError]:
    return legacy_errors(new)
