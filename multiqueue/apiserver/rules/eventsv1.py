"""Events served under events.k8s.io/v1 over the one store of core v1 Events, as kube-apiserver serves them.

Upstream keeps a single Event storage and shows it in both groups: an Event written through either is read back
through the other, its fields renamed (``note`` is ``message``, ``regarding`` is ``involvedObject``,
``reportingController`` is ``reportingComponent``, ``deprecatedSource`` is ``source``, ``deprecatedCount`` is
``count``, ``deprecatedFirstTimestamp``/``deprecatedLastTimestamp`` are ``firstTimestamp``/``lastTimestamp``);
the rest keep their names. Each direction writes the Go zero values its own version writes (``regarding: {}``
and ``eventTime: null`` here, ``reportingComponent: ""`` there) and leaves out the empty fields it omits, so a
round trip gives back the same object.

Writes through events.k8s.io/v1 are checked more strictly than core ones (``eventTime``, ``reportingController``,
``reportingInstance``, ``action``, ``reason`` and a Normal or Warning ``type`` are required there, the deprecated
fields must stay unset on create, and almost everything is immutable on update); the field paths of those errors
name the core fields, except ``reportingController``, as upstream reports them.
"""

from __future__ import annotations

import json
from typing import Any, Final

from multiqueue.api.errors import FieldError, Printed, immutable, invalid, required
from multiqueue.api.meta import as_dict, parse_time, validate_object_meta, validate_object_meta_update
from multiqueue.api.types import Obj
from multiqueue.apiserver.rules import events

API_VERSION: Final = "events.k8s.io/v1"
CORE_API_VERSION: Final = "v1"
# events.k8s.io/v1 name -> core v1 name, for the fields whose names differ.
RENAMED: Final[tuple[tuple[str, str], ...]] = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)
_TO_CORE: Final = dict(RENAMED)
_FROM_CORE: Final = {core: v1 for v1, core in RENAMED}
# Fields events.k8s.io/v1 writes whether set or not (the others are left out when empty).
_V1_ZEROS: Final[tuple[tuple[str, Any], ...]] = (
    ("eventTime", None),
    ("deprecatedFirstTimestamp", None),
    ("deprecatedLastTimestamp", None),
)
_V1_STRUCTS: Final = ("regarding", "deprecatedSource")
_OMITTED_WHEN_EMPTY: Final = ("reportingController", "reportingInstance", "action", "reason", "note", "type")
_CORE_OMITTED_WHEN_EMPTY: Final = ("reason", "message", "type", "action")
NORMAL: Final = "Normal"
WARNING: Final = "Warning"
# Go's field order of the internal types upstream prints when such a field may not change.
_REFERENCE_FIELDS: Final = (
    ("Kind", "kind"),
    ("Namespace", "namespace"),
    ("Name", "name"),
    ("UID", "uid"),
    ("APIVersion", "apiVersion"),
    ("ResourceVersion", "resourceVersion"),
    ("FieldPath", "fieldPath"),
)
_SOURCE_FIELDS: Final = (("Component", "component"), ("Host", "host"))


def _renamed(obj: Obj, names: dict[str, str], api_version: str) -> Obj:
    out: Obj = {}
    for key, value in obj.items():
        out[names.get(key, key)] = value
    out["apiVersion"] = api_version
    out["kind"] = "Event"
    return out


def _drop_empty(obj: Obj, fields: tuple[str, ...]) -> None:
    for field in fields:
        if field in obj and obj[field] in ("", None):
            del obj[field]


def _drop_unset(obj: Obj, count: str) -> None:
    """Fields Go leaves out when unset: the count at 0, ``series`` and ``related`` at null."""
    if obj.get(count) in (0, None):
        obj.pop(count, None)
    for field in ("series", "related"):
        if field in obj and obj[field] is None:
            del obj[field]


def default_event(event: Obj) -> None:
    """What an events.k8s.io/v1 Event reads back as after Go decoded and encoded it."""
    events.go_zeros(event, _V1_ZEROS, _V1_STRUCTS)
    _drop_empty(event, _OMITTED_WHEN_EMPTY)
    _drop_unset(event, "deprecatedCount")
    series = event.get("series")
    if isinstance(series, dict):
        series.setdefault("count", 0)
        series.setdefault("lastObservedTime", None)


def to_core(event: Obj) -> Obj:
    """The core v1 Event an events.k8s.io/v1 Event is stored (and read through /api/v1) as."""
    core = _renamed(event, _TO_CORE, CORE_API_VERSION)
    events.default_event(core)
    _drop_empty(core, _CORE_OMITTED_WHEN_EMPTY)
    _drop_unset(core, "count")
    series = core.get("series")
    if isinstance(series, dict) and series.get("count") in (0, None):
        core["series"] = {k: v for k, v in series.items() if k != "count"}
    return core


def from_core(core: Obj) -> Obj:
    """A stored (core v1) Event as events.k8s.io/v1 shows it."""
    event = _renamed(core, _FROM_CORE, API_VERSION)
    default_event(event)
    return event


# --- validation ---------------------------------------------------------------------------------------------


def _series_errors(core: Obj) -> list[FieldError]:
    series = core.get("series")
    if not isinstance(series, dict):
        return []
    errs = []
    count = series.get("count")
    if not isinstance(count, int) or count < 2:
        errs.append(invalid("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        errs.append(required("series.lastObservedTime"))
    return errs


def validate_create(event: Obj) -> list[FieldError]:
    """An events.k8s.io/v1 create: the legacy rules, then the strict ones of the new API."""
    core = to_core(event)
    errs = events.legacy_errors(core, controller_path="reportingController")
    errs += validate_object_meta(core.get("metadata"), namespaced=True)
    errs += _series_errors(core)
    if not core.get("eventTime"):
        errs.append(required("eventTime"))
    kind = str(core.get("type") or "")
    if kind not in (NORMAL, WARNING):
        errs.append(invalid("type", "", f"has invalid value: {kind}"))
    for field in ("firstTimestamp", "lastTimestamp"):
        if core.get(field):
            errs.append(invalid(field, "", "needs to be unset"))
    if core.get("count"):
        errs.append(invalid("count", "", "needs to be unset"))
    source = as_dict(core.get("source"))
    if source.get("component") or source.get("host"):
        errs.append(invalid("source", "", "needs to be unset"))
    return errs


def _go_struct(value: Any, fields: tuple[tuple[str, str], ...]) -> Printed:
    """An internal Go struct as json.Marshal prints it in an error: its Go field names, every field."""
    data = as_dict(value)
    return Printed(json.dumps({go: str(data.get(name) or "") for go, name in fields}, separators=(",", ":")))


def _time_value(value: Any) -> Printed:
    return Printed(json.dumps(value) if value else "null")


def validate_update(new: Obj, old: Obj) -> list[FieldError]:
    """An events.k8s.io/v1 update: the legacy rules, then nearly every field stays as it was."""
    core, before = to_core(new), to_core(old)
    errs = events.legacy_errors(core, controller_path="reportingController")
    errs += validate_object_meta_update(core.get("metadata"), before.get("metadata"))
    if core.get("series") != before.get("series"):
        errs += _series_errors(core)

    def changed(field: str) -> bool:
        return core.get(field) != before.get(field)

    if changed("involvedObject"):
        errs.append(immutable("involvedObject", _go_struct(core.get("involvedObject"), _REFERENCE_FIELDS)))
    for field in ("reason", "message"):
        if changed(field):
            errs.append(immutable(field, str(core.get(field) or "")))
    if changed("source"):
        errs.append(immutable("source", _go_struct(core.get("source"), _SOURCE_FIELDS)))
    for field in ("firstTimestamp", "lastTimestamp"):
        if changed(field):
            errs.append(immutable(field, _time_value(core.get(field))))
    if changed("count"):
        errs.append(immutable("count", int(core.get("count") or 0)))
    for field in ("reason", "type"):  # upstream checks the reason twice
        if changed(field):
            errs.append(immutable(field, str(core.get(field) or "")))
    if parse_time(core.get("eventTime")) != parse_time(before.get("eventTime")):
        errs.append(immutable("eventTime", _time_value(core.get("eventTime"))))
    if changed("action"):
        errs.append(immutable("action", str(core.get("action") or "")))
    if changed("related"):
        related = core.get("related")
        errs.append(
            immutable("related", _go_struct(related, _REFERENCE_FIELDS) if related else Printed("null"))
        )
    if changed("reportingComponent"):
        errs.append(immutable("reportingController", str(core.get("reportingComponent") or "")))
    if changed("reportingInstance"):
        errs.append(immutable("reportingInstance", str(core.get("reportingInstance") or "")))
    return errs
