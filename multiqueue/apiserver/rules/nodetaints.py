"""What kube-controller-manager's node lifecycle controller does to a cordoned Node: ``spec.unschedulable``
true gets the ``node.kubernetes.io/unschedulable:NoSchedule`` taint (with the time it was added), false loses
it. Schedulers and the local kubelet read ``spec.unschedulable`` itself; tools and users read the taint.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from multiqueue.api.meta import as_dict, as_list, format_time
from multiqueue.api.types import Obj

UNSCHEDULABLE_TAINT: Final = "node.kubernetes.io/unschedulable"
NO_SCHEDULE: Final = "NoSchedule"


def _is_ours(taint: Any) -> bool:
    return (
        isinstance(taint, dict)
        and taint.get("key") == UNSCHEDULABLE_TAINT
        and taint.get("effect") == NO_SCHEDULE
    )


def wanted_taints(node: Obj, now: datetime) -> list[Any] | None:
    """The Node's taints as they should be, or None when they already are."""
    spec = as_dict(node.get("spec"))
    taints = as_list(spec.get("taints"))
    has = any(_is_ours(t) for t in taints)
    if spec.get("unschedulable") is True:
        if has:
            return None
        return [*taints, {"key": UNSCHEDULABLE_TAINT, "effect": NO_SCHEDULE, "timeAdded": format_time(now)}]
    if not has:
        return None
    return [t for t in taints if not _is_ours(t)]
