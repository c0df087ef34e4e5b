"""A Job's worker affinity: the ``multiqueue.dev/worker-affinity`` annotation, required and preferred terms over
worker labels, parsed once per placement and matched against each worker.

Its JSON shape (documented in docs/reference/worker-affinity.md)::

    {"required": [TERM, ...], "preferred": [{"weight": 1-100, ...TERM}, ...]}

A TERM is a label selector object (``matchLabels``, ``matchExpressions`` with In, NotIn, Exists, DoesNotExist).
A worker passes ``required`` when any one of its terms matches (no terms: every worker passes); each matching
``preferred`` term adds its weight to the worker's affinity score.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Final

from multiqueue.api.errors import SelectorError
from multiqueue.api.labelselectors import LabelSelector, label_selector_from_dict

WORKER_AFFINITY_ANNOTATION: Final = "multiqueue.dev/worker-affinity"
MAX_WEIGHT: Final = 100
_FIELDS: Final = frozenset({"required", "preferred"})
_TERM_FIELDS: Final = frozenset({"matchLabels", "matchExpressions"})


class AffinityError(ValueError):
    """Why an affinity annotation cannot be read: one line for the Job's Event."""


@dataclasses.dataclass(frozen=True)
class Preference:
    weight: int
    selector: LabelSelector


@dataclasses.dataclass(frozen=True)
class Affinity:
    """Parsed terms; the empty one (no annotation) lets every worker pass and prefers none."""

    required: tuple[LabelSelector, ...] = ()
    preferred: tuple[Preference, ...] = ()

    def allows(self, labels: Mapping[str, str]) -> bool:
        return not self.required or any(term.matches(labels) for term in self.required)

    def weight(self, labels: Mapping[str, str]) -> int:
        """The sum of the weights of the preferred terms ``labels`` match."""
        return sum(p.weight for p in self.preferred if p.selector.matches(labels))


NO_AFFINITY: Final = Affinity()


def parse_affinity(text: str | None) -> Affinity:
    """The affinity an annotation's value states; raises :class:`AffinityError` saying what is wrong."""
    if text is None or not text.strip():
        return NO_AFFINITY
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AffinityError(
            f"invalid {WORKER_AFFINITY_ANNOTATION}: not JSON ({exc.msg} at {exc.pos})"
        ) from exc
    if not isinstance(data, dict):
        raise AffinityError(f"invalid {WORKER_AFFINITY_ANNOTATION}: must be a JSON object")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise AffinityError(f"invalid {WORKER_AFFINITY_ANNOTATION}: unknown field {unknown[0]!r}")
    required = tuple(_term(t, f"required[{i}]") for i, t in enumerate(_list(data, "required")))
    preferred = tuple(_preference(t, f"preferred[{i}]") for i, t in enumerate(_list(data, "preferred")))
    return Affinity(required, preferred)


def _list(data: dict[str, Any], field: str) -> list[Any]:
    value = data.get(field)
    if value is None:
        return []
    if not isinstance(value, list):
        raise AffinityError(f"invalid {WORKER_AFFINITY_ANNOTATION}: {field} must be a list")
    return value


def _term(term: Any, where: str, extra: frozenset[str] = frozenset()) -> LabelSelector:
    if not isinstance(term, dict):
        raise AffinityError(f"invalid {WORKER_AFFINITY_ANNOTATION}: {where} must be an object")
    unknown = sorted(set(term) - _TERM_FIELDS - extra)
    if unknown:
        raise AffinityError(f"invalid {WORKER_AFFINITY_ANNOTATION}: {where} has unknown field {unknown[0]!r}")
    try:
        return label_selector_from_dict({k: v for k, v in term.items() if k in _TERM_FIELDS})
    except SelectorError as exc:
        raise AffinityError(f"invalid {WORKER_AFFINITY_ANNOTATION}: {where}: {exc}") from exc


def _preference(term: Any, where: str) -> Preference:
    selector = _term(term, where, frozenset({"weight"}))
    weight = term.get("weight")
    if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= MAX_WEIGHT:
        raise AffinityError(
            f"invalid {WORKER_AFFINITY_ANNOTATION}: {where}.weight must be a whole number from 1 to {MAX_WEIGHT}"
        )
    return Preference(weight, selector)
