"""Field selectors (``kubectl get --field-selector``): upstream's ``fields.ParseSelector`` grammar and escapes,
and the fields each kind can be selected by, with the values and the refusal messages of the upstream API server.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from multiqueue.api.errors import SelectorError
from multiqueue.api.meta import as_dict, as_list
from multiqueue.api.types import Obj


@dataclasses.dataclass(frozen=True)
class FieldTerm:
    """``field=value`` (or ``field!=value`` when ``negated``); a missing field reads as the empty string."""

    field: str
    value: str
    negated: bool = False

    def matches(self, fields: Mapping[str, str]) -> bool:
        return (fields.get(self.field, "") == self.value) != self.negated

    def __str__(self) -> str:
        escaped = re.sub(r"([\\,=])", r"\\\1", self.value)
        return f"{self.field}{'!=' if self.negated else '='}{escaped}"


@dataclasses.dataclass(frozen=True)
class FieldSelector:
    """A conjunction of field terms, sorted as upstream sorts them; no terms selects everything."""

    terms: tuple[FieldTerm, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.terms

    @property
    def fields(self) -> list[str]:
        """The field labels the selector names, for :func:`unsupported_fields`."""
        return [term.field for term in self.terms]

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(term.matches(fields) for term in self.terms)

    def __str__(self) -> str:
        return ",".join(str(term) for term in self.terms)


def _split_terms(text: str) -> list[str]:
    """Split on commas a backslash does not escape; the escapes stay in place for :func:`_unescape`."""
    terms: list[str] = []
    start = 0
    escaped = False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


_TERM: Final = re.compile(r"(.*?)(!=|==|=)(.*)", re.DOTALL)


def _unescape(value: str) -> str:
    """Upstream's ``UnescapeValue``: only ``\\\\``, ``\\,`` and ``\\=`` are escapes; a bare ``,`` or ``=`` is an error."""
    out: list[str] = []
    escaped = False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {char}")
        else:
            out.append(char)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(text: str) -> FieldSelector:
    """Parse ``a=b,c!=d`` (``==`` means ``=``; ``\\,``, ``\\=`` and ``\\\\`` escape in values), as upstream's
    ``fields.ParseSelector``; raises :class:`SelectorError`. The empty string selects everything."""
    if not isinstance(text, str):
        raise SelectorError(f"a field selector must be a string, not {type(text).__name__}")
    terms: list[FieldTerm] = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        match = _TERM.fullmatch(part)
        if match is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, operator, value = match.groups()
        terms.append(FieldTerm(field, _unescape(value), negated=operator == "!="))
    # Upstream sorts the terms as written; sorted again as printed (``==`` as ``=``), the printed selector parses
    # back to the same one, whichever way each term was written.
    return FieldSelector(tuple(sorted(terms, key=str)))


# --- the fields each kind can be selected by ----------------------------------------------------------------

_Extract = Callable[[Obj], str]


def _text(value: Any) -> str:
    """A field value as the API server prints it into a field set."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None or isinstance(value, dict | list) else str(value)


def _at(dotted: str, default: str = "") -> _Extract:
    """Reads the field at a dotted path, ``default`` when it is absent or empty."""
    steps = dotted.split(".")

    def extract(obj: Obj) -> str:
        value: Any = obj
        for step in steps:
            value = as_dict(value).get(step)
        return _text(value) or default

    return extract


def _first_pod_ip(pod: Obj) -> str:
    """The primary pod IP: upstream reads ``status.podIPs[0]``, which ``status.podIP`` mirrors."""
    ips = as_list(as_dict(pod.get("status")).get("podIPs"))
    return _text(as_dict(ips[0]).get("ip")) if ips else _at("status.podIP")(pod)


def _event_source(event: Obj) -> str:
    """``source.component``, or the reporting controller of events written through events.k8s.io."""
    return _at("source.component")(event) or _at("reportingComponent")(event)


def _never_set(_: Obj) -> str:
    """A label upstream accepts but never fills, so it only matches the empty string."""
    return ""


_NAME: Final[dict[str, _Extract]] = {"metadata.name": _at("metadata.name")}
_NAMESPACED: Final[dict[str, _Extract]] = {**_NAME, "metadata.namespace": _at("metadata.namespace")}

# (group, kind) -> field label -> its value. Kinds upstream registers no conversion for accept only name and
# namespace. Cluster-scoped Node and Namespace do not accept metadata.namespace, as upstream.
_SELECTABLE: Final[dict[tuple[str, str], dict[str, _Extract]]] = {
    ("", "Pod"): {
        **_NAMESPACED,
        "spec.nodeName": _at("spec.nodeName"),
        "spec.host": _at("spec.nodeName"),  # upstream's alias for old clients
        "spec.restartPolicy": _at("spec.restartPolicy"),
        "spec.schedulerName": _at("spec.schedulerName"),
        "spec.serviceAccountName": _at("spec.serviceAccountName"),
        "spec.hostNetwork": _at("spec.hostNetwork", "false"),
        "status.phase": _at("status.phase"),
        "status.podIP": _first_pod_ip,
        "status.podIPs": _never_set,
        "status.nominatedNodeName": _at("status.nominatedNodeName"),
    },
    ("", "Event"): {
        **_NAMESPACED,
        **{f"involvedObject.{f}": _at(f"involvedObject.{f}") for f in ("kind", "namespace", "name", "uid")},
        **{
            f"involvedObject.{f}": _at(f"involvedObject.{f}")
            for f in ("apiVersion", "resourceVersion", "fieldPath")
        },
        "reason": _at("reason"),
        "reportingComponent": _at("reportingComponent"),
        "source": _event_source,
        "type": _at("type"),
    },
    # events.k8s.io/v1 names the fields its own way and selects on the core ones (the stored Event is read).
    ("events.k8s.io", "Event"): {
        **_NAMESPACED,
        **{
            f"regarding.{f}": _at(f"involvedObject.{f}")
            for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
        },
        "reason": _at("reason"),
        "reportingController": _at("reportingComponent"),
        "type": _at("type"),
    },
    ("batch", "Job"): {**_NAMESPACED, "status.successful": _at("status.succeeded", "0")},
    ("", "Secret"): {**_NAMESPACED, "type": _at("type")},
    ("", "Service"): {**_NAMESPACED, "spec.clusterIP": _at("spec.clusterIP"), "spec.type": _at("spec.type")},
    ("", "Namespace"): {**_NAME, "status.phase": _at("status.phase")},
    ("", "Node"): {**_NAME, "spec.unschedulable": _at("spec.unschedulable", "false")},
}


def _selectable(group: str, kind: str) -> dict[str, _Extract]:
    return _SELECTABLE.get((group, kind), _NAMESPACED)


def fields_of(group: str, kind: str, obj: Any) -> dict[str, str]:
    """The selectable fields of ``obj`` and their values, as the upstream API server sets them."""
    data = as_dict(obj)
    return {field: extract(data) for field, extract in _selectable(group, kind).items()}


def unsupported_fields(group: str, kind: str, selector: FieldSelector) -> list[str]:
    """Fields the selector names that this kind cannot be selected by; the server refuses the first with
    :func:`unsupported_field_message`."""
    supported = _selectable(group, kind)
    return [field for field in selector.fields if field not in supported]


# Kinds whose group registers its own field-label conversion; the others get the generic one's words.
_CONVERTED: Final = frozenset(
    {
        ("", "Pod"),
        ("", "Node"),
        ("", "Event"),
        ("events.k8s.io", "Event"),
        ("", "Namespace"),
        ("", "Secret"),
        ("", "Service"),
    }
)


def unsupported_field_message(group: str, kind: str, field: str, custom_resource: bool = False) -> str:
    """The 400 message for a field a kind cannot be selected by: each upstream conversion words it its own way."""
    if (group, kind) == ("batch", "Job"):
        return f"field label {json.dumps(field)} not supported for Job"
    if custom_resource or (group, kind) in _CONVERTED:
        return f"field label not supported: {field}"
    return f'{json.dumps(field)} is not a known field selector: only "metadata.name", "metadata.namespace"'
