"""The ``default/kubernetes`` Service every cluster has: kube-apiserver makes it at start and keeps its port
pointing at the secure port. Tools look for it first (in-cluster clients' environment, ``kubectl get svc``,
``kubectl cluster-info``), so the embedded server makes it too, with what kube-apiserver 1.37 writes: the first
address of the service range, port 443 named ``https`` whose targetPort is the port the server listens on.

Its Endpoints and EndpointSlice are not made: upstream refuses a loopback address in them, and ``local up
--control-plane upstream`` runs kube-apiserver with no endpoint reconciler for that reason, so neither side has
them.
"""

from __future__ import annotations

from typing import Final, Literal

from multiqueue.api.meta import as_dict, as_list
from multiqueue.api.types import Obj
from multiqueue.apiserver.rules.services import SERVICE_CIDR

NAMESPACE: Final = "default"
NAME: Final = "kubernetes"
LABELS: Final = {"component": "apiserver", "provider": "kubernetes"}
CLUSTER_IP: Final = str(next(SERVICE_CIDR.hosts()))
PORT_NAME: Final = "https"
PORT: Final = 443

Action = tuple[Literal["create", "update"], Obj]


def _ports(secure_port: int) -> list[Obj]:
    return [{"name": PORT_NAME, "port": PORT, "protocol": "TCP", "targetPort": secure_port}]


def wanted(secure_port: int, cluster_ip: str | None = CLUSTER_IP) -> Obj:
    """The Service as created; ``cluster_ip`` None lets the allocator pick (the first address is taken)."""
    spec: Obj = {
        "type": "ClusterIP",
        "sessionAffinity": "None",
        "ipFamilyPolicy": "SingleStack",
        "ports": _ports(secure_port),
    }
    if cluster_ip is not None:
        spec["clusterIP"] = cluster_ip
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(LABELS)},
        "spec": spec,
    }


def decide(existing: Obj | None, secure_port: int) -> Action | None:
    """What to write so the Service exists and names the secure port: nothing when it already does. A Service
    someone changed keeps its other fields; its ports and type are put back, as upstream's reconciler does."""
    if existing is None:
        return "create", wanted(secure_port)
    spec = as_dict(existing.get("spec"))
    if spec.get("type") == "ClusterIP" and _same_ports(as_list(spec.get("ports")), secure_port):
        return None
    updated = {**existing, "spec": {**spec, "type": "ClusterIP", "ports": _ports(secure_port)}}
    return "update", updated


def _same_ports(ports: list[object], secure_port: int) -> bool:
    return [
        {k: as_dict(p).get(k) for k in ("name", "port", "protocol", "targetPort")} for p in ports
    ] == _ports(secure_port)
