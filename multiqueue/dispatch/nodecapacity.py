"""A worker's capacity as its Nodes tell it: the allocatable of the Nodes pods can go to, minus what the pods
already there (or about to go there) request.

Informers keep one small record per Node and per Pod (:func:`node_record`, :func:`pod_record`), never whole
objects: a worker may run thousands of pods, and all that matters of each is where it runs, whether it is over and
what it requests. :func:`node_capacity` is the pure computation over those records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Final

from multiqueue.api.meta import as_dict, as_list, metadata
from multiqueue.api.quantities import parse_quantity
from multiqueue.api.types import Obj

# Always reported, even with no Node to give them: a worker without schedulable Nodes has room for nothing.
BASE_RESOURCES: Final = ("cpu", "memory", "pods")
FINISHED_PHASES: Final = frozenset({"Succeeded", "Failed"})
# Pods a JobSet makes carry their JobSet's UID: the mirror they belong to, one Job removed.
JOBSET_UID_LABEL: Final = "jobset.sigs.k8s.io/jobset-uid"


@dataclasses.dataclass(frozen=True)
class NodeCapacity:
    """Resource name -> amount (base units): in all on the schedulable Nodes, and what is left of it."""

    total: dict[str, float]
    free: dict[str, float]


def _quantities(values: object) -> dict[str, float]:
    found: dict[str, float] = {}
    for name, value in as_dict(values).items():
        amount = parse_quantity(str(value))
        if amount is not None:
            found[str(name)] = amount
    return found


def _key_metadata(obj: Obj) -> Obj:
    meta = metadata(obj)
    return {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta}


def node_record(node: Obj) -> Obj:
    """What is kept of a Node: its name, whether pods can go there (not cordoned, Ready) and its allocatable."""
    spec = as_dict(node.get("spec"))
    status = as_dict(node.get("status"))
    ready = any(
        as_dict(c).get("type") == "Ready" and as_dict(c).get("status") == "True"
        for c in as_list(status.get("conditions"))
    )
    return {
        "metadata": _key_metadata(node),
        "schedulable": ready and not spec.get("unschedulable"),
        "allocatable": _quantities(status.get("allocatable")),
    }


def _add(total: dict[str, float], more: dict[str, float]) -> dict[str, float]:
    summed = dict(total)
    for name, amount in more.items():
        summed[name] = summed.get(name, 0.0) + amount
    return summed


def _largest(one: dict[str, float], other: dict[str, float]) -> dict[str, float]:
    return {n: max(one.get(n, 0.0), other.get(n, 0.0)) for n in one.keys() | other.keys()}


def pod_requests(spec: Obj) -> dict[str, float]:
    """What a pod takes of its Node, as the scheduler counts it: its containers with their sidecars, or the
    largest init container run before them if that asks more, plus the pod's overhead."""
    sidecars: dict[str, float] = {}
    init_peak: dict[str, float] = {}
    for container in as_list(spec.get("initContainers")):
        asked = _quantities(as_dict(as_dict(container).get("resources")).get("requests"))
        if as_dict(container).get("restartPolicy") == "Always":
            sidecars = _add(sidecars, asked)
        else:
            init_peak = _largest(init_peak, _add(sidecars, asked))
    running = dict(sidecars)
    for container in as_list(spec.get("containers")):
        running = _add(running, _quantities(as_dict(as_dict(container).get("resources")).get("requests")))
    return _add(_largest(running, init_peak), _quantities(spec.get("overhead")))


def pod_record(pod: Obj) -> Obj:
    """What is kept of a Pod: its Node (empty while unbound), phase, requests and the UIDs of what made it."""
    meta = metadata(pod)
    owners = [str(as_dict(r).get("uid", "")) for r in as_list(meta.get("ownerReferences"))]
    jobset = as_dict(meta.get("labels")).get(JOBSET_UID_LABEL)
    if jobset:
        owners.append(str(jobset))
    spec = as_dict(pod.get("spec"))
    return {
        "metadata": _key_metadata(pod),
        "nodeName": str(spec.get("nodeName") or ""),
        "phase": str(as_dict(pod.get("status")).get("phase") or ""),
        "requests": pod_requests(spec),
        "owners": [o for o in owners if o],
    }


def counted(pod: Obj, nodes: frozenset[str]) -> bool:
    """The pod takes capacity of the schedulable ``nodes``: it is not over, and runs on one or is not bound yet."""
    node = str(pod.get("nodeName") or "")
    return pod.get("phase") not in FINISHED_PHASES and (not node or node in nodes)


def node_capacity(nodes: Iterable[Obj], pods: Iterable[Obj], ours: frozenset[str]) -> NodeCapacity:
    """The allocatable of the schedulable ``nodes`` (records), less the requests of the unfinished ``pods``
    (records) on them or not yet bound, each pod also taking one of ``pods``. A pod made for one of ``ours`` (UIDs
    of this manager's mirrors) is left out: its Job's demand is counted where it was placed, from before its pods
    exist."""
    schedulable = [n for n in nodes if n.get("schedulable")]
    total: dict[str, float] = dict.fromkeys(BASE_RESOURCES, 0.0)
    for node in schedulable:
        total = _add(total, as_dict(node.get("allocatable")))
    names = frozenset(str(metadata(n).get("name", "")) for n in schedulable)
    free = dict(total)
    for pod in pods:
        if not counted(pod, names) or ours.intersection(as_list(pod.get("owners"))):
            continue
        free = _add(free, {n: -a for n, a in {**as_dict(pod.get("requests")), "pods": 1.0}.items()})
    return NodeCapacity(total, free)


def combined(
    quota: dict[str, float], used: dict[str, float], nodes: NodeCapacity | None
) -> tuple[dict[str, float], dict[str, float]]:
    """Resource name -> (in all, free) for placement: the configured ``quota`` less what the Jobs placed on the
    worker ask (``used``); with the worker's ``nodes`` read, each resource the smaller of that and what the Nodes
    have, less the same demand (the Nodes' count leaves those Jobs' pods out: they may not exist yet)."""
    capacity = dict(quota)
    free = {r: q - used.get(r, 0.0) for r, q in quota.items()}
    if nodes is not None:
        for resource, total in nodes.total.items():
            left = nodes.free.get(resource, total) - used.get(resource, 0.0)
            capacity[resource] = min(capacity.get(resource, total), total)
            free[resource] = min(free.get(resource, left), left)
    return capacity, free
