"""The unschedulable taint follows spec.unschedulable, as kube-controller-manager's node lifecycle controller
keeps it: added with the time, removed on uncordon, other taints untouched."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from multiqueue.apiserver.rules.nodetaints import wanted_taints

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
OURS = {
    "key": "node.kubernetes.io/unschedulable",
    "effect": "NoSchedule",
    "timeAdded": "2026-01-01T00:00:00Z",
}
NEW = {**OURS, "timeAdded": "2026-01-02T03:04:05Z"}
OTHER = {"key": "gpu", "value": "a100", "effect": "NoSchedule"}
SAME_KEY_OTHER_EFFECT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoExecute"}


def _node(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "n"}, "spec": spec}


CASES: dict[str, tuple[dict[str, Any], list[Any] | None]] = {
    "schedulable": (_node(), None),
    "schedulable-with-other-taints": (_node(taints=[OTHER]), None),
    "cordoned": (_node(unschedulable=True), [NEW]),
    "cordoned-keeps-other-taints": (_node(unschedulable=True, taints=[OTHER]), [OTHER, NEW]),
    "cordoned-already-tainted": (_node(unschedulable=True, taints=[OTHER, OURS]), None),
    "cordoned-other-effect-is-not-ours": (
        _node(unschedulable=True, taints=[SAME_KEY_OTHER_EFFECT]),
        [SAME_KEY_OTHER_EFFECT, NEW],
    ),
    "uncordoned": (_node(unschedulable=False, taints=[OURS]), []),
    "uncordoned-keeps-other-taints": (_node(taints=[OTHER, OURS]), [OTHER]),
    "no-spec": ({"metadata": {"name": "n"}}, None),
}


@pytest.mark.parametrize(("node", "taints"), [pytest.param(*c, id=n) for n, c in CASES.items()])
def test_wanted_taints(node: dict[str, Any], taints: list[Any] | None) -> None:
    assert wanted_taints(node, NOW) == taints
