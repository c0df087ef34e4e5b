"""The Eviction API (``POST pods/NAME/eviction``) as kube-apiserver answers it, for what the embedded server
serves: no PodDisruptionBudgets, so every eviction that names an existing pod goes through.

An eviction first marks the pod with the ``DisruptionTarget`` condition (so a Job's podFailurePolicy can tell a
drained pod from a failed one), then deletes it gracefully with the eviction's deleteOptions. Pure functions: the
server reads the pod and performs the writes.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any, Final

from multiqueue.api.meta import as_dict, as_list, set_condition
from multiqueue.api.types import Obj

KIND: Final = "Eviction"
GROUP: Final = "policy"
# policy/v1beta1 is no longer in discovery, but kube-apiserver 1.37 still decodes an Eviction sent in it.
API_VERSIONS: Final = ("policy/v1", "policy/v1beta1")
DISRUPTION_TARGET: Final = "DisruptionTarget"
REASON: Final = "EvictionByEvictionAPI"
MESSAGE: Final = "Eviction API: evicting"
NAME_MISMATCH: Final = "name in URL does not match name in Eviction object"
NAMESPACE_MISMATCH: Final = (
    "the namespace of the provided object does not match the namespace sent on the request"
)
SUCCESS: Final[Obj] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def body_problem(body: Any, name: str, namespace: str) -> str | None:
    """Why kube-apiserver answers 400 to this Eviction body, or None. Missing apiVersion and kind are taken as
    the Eviction the path implies, as upstream's decoder does."""
    if not isinstance(body, dict):
        return f"the object provided is unrecognized (must be of type {KIND})"
    api_version = str(body.get("apiVersion") or API_VERSIONS[0])
    kind = str(body.get("kind") or KIND)
    if api_version not in API_VERSIONS or kind != KIND:
        version = api_version.rpartition("/")[2]
        return (
            f'{kind} in version "{version}" cannot be handled as a {KIND}: no kind "{kind}" is registered for '
            f'version "{api_version}" in scheme "pkg/runtime/scheme.go:111"'
        )
    meta = as_dict(body.get("metadata"))
    given_namespace = meta.get("namespace")
    if given_namespace and given_namespace != namespace:
        return NAMESPACE_MISMATCH
    if meta.get("name") != name:
        return NAME_MISMATCH
    return None


def delete_options(body: Obj, dry_run: bool) -> Obj:
    """The DeleteOptions the pod is deleted with: the eviction's own, with the request's dryRun carried in."""
    options = dict(as_dict(body.get("deleteOptions")))
    if dry_run:
        options["dryRun"] = ["All"]
    return options


def is_dry_run(options: Obj) -> bool:
    return "All" in as_list(options.get("dryRun"))


def marked(pod: Obj, now: datetime) -> Obj | None:
    """The pod with ``DisruptionTarget`` True (reason EvictionByEvictionAPI), or None when it already says so."""
    result = copy.deepcopy(pod)
    status = result.setdefault("status", {})
    if not isinstance(status, dict):
        return None
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    changed = set_condition(conditions, DISRUPTION_TARGET, "True", REASON, MESSAGE, now)
    if not changed:
        return None
    for condition in conditions:
        if isinstance(condition, dict) and condition.get("type") == DISRUPTION_TARGET:
            condition.pop("lastProbeTime", None)  # upstream leaves it null on this condition
    return result
