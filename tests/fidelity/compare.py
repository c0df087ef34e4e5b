"""Normalizing two servers' answers to one request and saying how they differ.

What is different by nature between two clusters is replaced by a placeholder before comparing: uids,
resourceVersions, timestamps (also those of ``managedFields`` entries, whose fields and managers are compared, in
upstream's order without the entries' times: both servers order entries by the second each was last written, and
two writes fall in one second on one server and in two on the other), generated names, continue tokens and ``selfLink``. What remains must be equal: the status code, the body (for errors the
Status reason, message and causes), the ``Warning`` headers and, for a watch, the event types in order with the
objects' names and labels, counting only the events of writes both servers answered alike (:func:`events_of`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Container, Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import yaml

TIME: Final = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
UID_ANYWHERE: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
RV_IN_RECORD: Final = re.compile(r"(ResourceVersion in record )\(\d+\)")
CURRENT_RV: Final = re.compile(r"(Too large resource version: \d+, current: )\d+")
VOLATILE_META: Final = ("uid", "resourceVersion", "creationTimestamp", "selfLink", "deletionTimestamp")
DIFFERENCES: Final = Path(__file__).with_name("differences.yaml")


@dataclasses.dataclass
class Answer:
    """What one server said: code, decoded body (or text), Warning headers, watch events."""

    code: int
    body: Any
    warnings: list[str] = dataclasses.field(default_factory=list)
    events: list[Any] | None = None


def _scrub(value: Any, generated: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in VOLATILE_META and isinstance(item, str | int) and item not in ("", None):
                out[key] = f"<{key}>"
            elif key == "managedFields":
                out[key] = _managed_entries(item) if isinstance(item, list) else item
            elif key in ("continue",) and isinstance(item, str) and item:
                out[key] = "<continue>"
            else:
                out[key] = _scrub(item, generated)
        return out
    if isinstance(value, list):
        return [_scrub(v, generated) for v in value]
    if isinstance(value, str):
        if TIME.match(value):
            return "<time>"
        value = UID_ANYWHERE.sub("<uid>", value)
        value = RV_IN_RECORD.sub(r"\1(<resourceVersion>)", value)
        value = CURRENT_RV.sub(r"\1<resourceVersion>", value)
        for name, placeholder in generated.items():
            value = value.replace(name, placeholder)
        return value
    return value


def _managed_entries(entries: list[Any]) -> list[Any]:
    scrubbed = [
        {k: ("<time>" if k == "time" else v) for k, v in e.items()} if isinstance(e, dict) else e
        for e in entries
    ]
    if not all(isinstance(e, dict) for e in scrubbed):
        return scrubbed
    return sorted(
        scrubbed,
        key=lambda e: (
            str(e.get("operation", "")),
            str(e.get("manager", "")),
            str(e.get("apiVersion", "")),
            str(e.get("subresource", "")),
        ),
    )


def _generated_names(body: Any) -> dict[str, str]:
    """Names a server made up from generateName, so both sides' names compare equal."""
    found: dict[str, str] = {}
    items: list[Any] = [body]
    if isinstance(body, dict) and isinstance(body.get("items"), list):
        items = body["items"]
    for item in items:
        meta = item.get("metadata") if isinstance(item, dict) else None
        if isinstance(meta, dict) and meta.get("generateName") and isinstance(meta.get("name"), str):
            found[meta["name"]] = f"{meta['generateName']}<generated>"
    return found


def normalize(answer: Answer) -> dict[str, Any]:
    """The comparable form of an answer."""
    generated = _generated_names(answer.body)
    out: dict[str, Any] = {"code": answer.code, "body": _scrub(answer.body, generated)}
    out["warnings"] = sorted(_scrub(answer.warnings, generated))
    if answer.events is not None:
        out["events"] = [_event_summary(e) for e in answer.events if _event_type(e) != "BOOKMARK"]
        out["body"] = None
    return out


def _event_type(event: Any) -> str:
    return str(event.get("type")) if isinstance(event, dict) else "?"


def _event_meta(event: Any) -> dict[str, Any]:
    obj = event.get("object") if isinstance(event, dict) else None
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else {}


def _event_summary(event: Any) -> str:
    """Type, name and labels: enough to tell which state of which object a watch was shown."""
    meta = _event_meta(event)
    name = meta.get("generateName") or meta.get("name")
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    shown = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return f"{_event_type(event)} {name} {{{shown}}}"


def writers(answers: Mapping[str, Answer], writes: Iterable[str]) -> dict[str, str]:
    """resourceVersion -> the write (of ``writes``, in order) whose successful answer first carried it: which
    request made each event a watch shows."""
    made: dict[str, str] = {}
    for request_id in writes:
        answer = answers[request_id]
        meta = answer.body.get("metadata") if isinstance(answer.body, dict) else None
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if 200 <= answer.code < 300 and rv:
            made.setdefault(str(rv), request_id)
    return made


def events_of(answer: Answer, made_by: Mapping[str, str], agreed: Container[str]) -> Answer:
    """A watch's answer with only the events of writes both servers answered alike.

    A write the two servers answered differently is a difference of its own request; its event (or the lack of
    one) would only repeat it here. Objects no request of the script wrote (a namespace's root CA ConfigMap and
    ServiceAccount, made by controllers at their own pace) appear in either watch by timing. What is left shows
    how the watch itself behaves: order, types, selectors, the state each event carries.
    """
    if answer.events is None:
        return answer
    kept = []
    for event in answer.events:
        if _event_type(event) in ("ADDED", "MODIFIED", "DELETED"):
            author = made_by.get(str(_event_meta(event).get("resourceVersion")))
            if author is None or author not in agreed:
                continue
        kept.append(event)
    return dataclasses.replace(answer, events=kept)


def differences(embedded: Mapping[str, Any], upstream: Mapping[str, Any]) -> list[str]:
    """Dotted paths where two normalized answers differ, each with both values (short)."""
    found: list[str] = []
    _walk("", embedded, upstream, found)
    return found


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def _walk(path: str, ours: Any, theirs: Any, found: list[str]) -> None:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in ours:
                found.append(f"{sub}: missing here, upstream {_short(theirs[key])}")
            elif key not in theirs:
                found.append(f"{sub}: {_short(ours[key])} here, absent upstream")
            else:
                _walk(sub, ours[key], theirs[key], found)
        return
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _walk(f"{path}[{index}]", a, b, found)
        return
    if ours != theirs:
        found.append(f"{path}: {_short(ours)} here, upstream {_short(theirs)}")


# --- the known differences -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Known:
    """One entry of differences.yaml: which requests (fnmatch patterns on ids), what differs, why."""

    ids: tuple[str, ...]
    what: str
    why: str

    def covers(self, request_id: str) -> bool:
        return any(fnmatch.fnmatchcase(request_id, pattern) for pattern in self.ids)


def load_known(path: Path = DIFFERENCES) -> list[Known]:
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    known = []
    for entry in raw:
        ids = entry["ids"]
        known.append(
            Known(tuple([ids] if isinstance(ids, str) else ids), str(entry["what"]), str(entry["why"]))
        )
    return known


@dataclasses.dataclass(frozen=True)
class Verdict:
    unlisted: list[str]  # request ids that differ and no entry covers
    stale: list[Known]  # entries that cover no differing request


def judge(differing: Iterable[str], known: list[Known]) -> Verdict:
    differing = list(differing)
    unlisted = [rid for rid in differing if not any(k.covers(rid) for k in known)]
    stale = [k for k in known if not any(k.covers(rid) for rid in differing)]
    return Verdict(unlisted, stale)
