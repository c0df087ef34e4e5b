"""Pods as the kubelet tests write them, and what they read back."""

from __future__ import annotations

from multiqueue.api.types import Obj


def pod_body(name: str, argv: list[str], *, node: str | None = None, policy: str = "Never") -> Obj:
    """A one-container pod running ``argv``; bound to ``node`` when given (no scheduler binds it then)."""
    spec: Obj = {
        "restartPolicy": policy,
        "terminationGracePeriodSeconds": 2,
        "containers": [{"name": "main", "image": "busybox", "command": argv}],
    }
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def phase(pod: Obj | None) -> str | None:
    return None if pod is None else (pod.get("status") or {}).get("phase")
