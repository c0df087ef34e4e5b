"""Services: upstream's defaults, address allocation on a single-stack IPv4 cluster, and validation."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from multiqueue.api.types import Obj
from multiqueue.apiserver.rules import services

PORT = [{"port": 80}]


def _svc(name: str = "s", uid: str = "u1", **spec: Any) -> Obj:
    """A fresh Service: defaulting and allocation change what they are given."""
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid}, "spec": copy.deepcopy(spec)}


def _created(peers: list[Obj] | None = None, **spec: Any) -> tuple[Obj, list[str]]:
    svc = _svc(**spec)
    services.default_service(svc)
    errors = services.allocate(svc, None, peers or [])
    return svc, [e.message() for e in errors]


def test_defaults() -> None:
    svc, errors = _created(selector={"a": "b"}, ports=[{"port": 80}, {"port": 81, "targetPort": "http"}])
    assert errors == []
    assert svc["spec"] == {
        "selector": {"a": "b"},
        "ports": [
            {"port": 80, "protocol": "TCP", "targetPort": 80},
            {"port": 81, "protocol": "TCP", "targetPort": "http"},
        ],
        "sessionAffinity": "None",
        "type": "ClusterIP",
        "internalTrafficPolicy": "Cluster",
        "ipFamilyPolicy": "SingleStack",
        "ipFamilies": ["IPv4"],
        "clusterIP": "10.0.0.18",
        "clusterIPs": ["10.0.0.18"],
    }
    assert svc["status"] == {"loadBalancer": {}}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"clusterIP": "None", "selector": {"a": "b"}, "ports": PORT},
            {"clusterIPs": ["None"], "ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4"]},
            id="headless",
        ),
        pytest.param(
            {"clusterIP": "None"},
            {"clusterIPs": ["None"], "ipFamilyPolicy": "RequireDualStack", "ipFamilies": ["IPv4", "IPv6"]},
            id="headless-without-selector-takes-every-family",
        ),
        pytest.param(
            {"type": "NodePort", "ports": PORT},
            {"externalTrafficPolicy": "Cluster", "clusterIPs": ["10.0.0.18"]},
            id="node-port",
        ),
        pytest.param(
            {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": PORT},
            {"allocateLoadBalancerNodePorts": True, "healthCheckNodePort": 30001},
            id="load-balancer",
        ),
        pytest.param(
            {"type": "ExternalName", "externalName": "example.com"},
            {"sessionAffinity": "None"},
            id="external-name-gets-no-address",
        ),
        pytest.param(
            {"sessionAffinity": "ClientIP", "ports": PORT},
            {"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}}},
            id="client-ip-affinity",
        ),
    ],
)
def test_defaults_and_allocation(spec: Obj, expected: Obj) -> None:
    svc, errors = _created(**spec)
    assert errors == []
    assert {k: svc["spec"].get(k) for k in expected} == expected
    if spec.get("type") == "ExternalName":
        assert "clusterIP" not in svc["spec"] and "ipFamilies" not in svc["spec"]
    if spec.get("type") in ("NodePort", "LoadBalancer"):
        assert svc["spec"]["ports"][0]["nodePort"] == 30000


def test_allocation_skips_what_others_hold() -> None:
    first, _ = _created()
    second, _ = _created(peers=[first])
    assert second["spec"]["clusterIP"] == "10.0.0.19"
    _, errors = _created(peers=[first], clusterIP="10.0.0.18", ports=PORT)
    assert errors == [
        'spec.clusterIPs: Invalid value: ["10.0.0.18"]: failed to allocate IP 10.0.0.18: provided IP is already '
        "allocated"
    ]
    _, errors = _created(clusterIP="10.9.0.1", ports=PORT)
    assert errors == [
        'spec.clusterIPs: Invalid value: ["10.9.0.1"]: failed to allocate IP 10.9.0.1: the provided network does '
        "not match the current range"
    ]
    holder, _ = _created(type="NodePort", ports=[{"port": 80, "nodePort": 30080}])
    _, errors = _created(peers=[holder], type="NodePort", ports=[{"port": 80, "nodePort": 30080}])
    assert errors == ["spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"]


@pytest.mark.parametrize(
    ("spec", "errors"),
    [
        pytest.param(
            {"ipFamilyPolicy": "RequireDualStack", "ports": PORT},
            [
                'spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not configured for dual-stack '
                "services"
            ],
            id="dual-stack",
        ),
        pytest.param(
            {"ipFamilies": ["IPv6"], "ports": PORT},
            ['spec.ipFamilies[0]: Invalid value: "IPv6": not configured on this cluster'],
            id="ipv6",
        ),
        pytest.param(
            {"clusterIP": "banana", "ports": PORT},
            [
                'spec.clusterIPs[0]: Invalid value: "banana": must be a valid IP address, (e.g. 10.9.8.7 or '
                "2001:db8::ffff)"
            ],
            id="not-an-ip",
        ),
    ],
)
def test_allocation_errors(spec: Obj, errors: list[str]) -> None:
    assert _created(**spec)[1] == errors


def test_resent_service_keeps_its_address_and_node_ports() -> None:
    old, _ = _created(type="NodePort", ports=[{"name": "a", "port": 80}])
    new = _svc(type="NodePort", ports=[{"name": "a", "port": 80}])
    services.default_service(new)
    assert services.allocate(new, old, [old]) == []
    assert new["spec"]["clusterIP"] == old["spec"]["clusterIP"]
    assert new["spec"]["ports"][0]["nodePort"] == old["spec"]["ports"][0]["nodePort"]
    assert services.validate_service_update(new, old) == []


def test_changing_the_address_is_refused() -> None:
    old, _ = _created(ports=PORT)
    new = copy.deepcopy(old)
    new["spec"]["clusterIP"] = new["spec"]["clusterIPs"][0] = "10.0.0.99"
    assert [e.message() for e in services.validate_service_update(new, old)] == [
        'spec.clusterIPs[0]: Invalid value: ["10.0.0.99"]: may not change once set'
    ]


LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


@pytest.mark.parametrize(
    ("name", "spec", "errors"),
    [
        pytest.param(
            "s",
            {"ports": [{"name": "http", "port": 0}]},
            [
                "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                "spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive",
            ],
            id="port-zero",
        ),
        pytest.param(
            "Not_A_Name",
            {"ports": PORT},
            [f'metadata.name: Invalid value: "Not_A_Name": {LABEL_MSG}'],
            id="name-is-a-label",
        ),
        pytest.param("s", {"selector": {"a": "b"}}, ["spec.ports: Required value"], id="ports-required"),
        pytest.param(
            "s",
            {
                "ports": [
                    {"port": 80, "protocol": "XTP", "targetPort": "Bad--Name"},
                    {"port": 80, "protocol": "XTP"},
                ]
            },
            [
                "spec.ports[0].name: Required value",
                'spec.ports[0].protocol: Unsupported value: "XTP": supported values: "SCTP", "TCP", "UDP"',
                'spec.ports[0].targetPort: Invalid value: "Bad--Name": must contain only alpha-numeric characters '
                "(a-z, 0-9), and hyphens (-)",
                'spec.ports[0].targetPort: Invalid value: "Bad--Name": must not contain consecutive hyphens',
                "spec.ports[1].name: Required value",
                'spec.ports[1].protocol: Unsupported value: "XTP": supported values: "SCTP", "TCP", "UDP"',
                'spec.ports[1]: Duplicate value: {"Name":"","Protocol":"XTP","AppProtocol":null,"Port":80,'
                '"TargetPort":0,"NodePort":0}',
            ],
            id="ports",
        ),
        pytest.param(
            "s",
            {"type": "ClusterIP", "ports": [{"port": 80, "nodePort": 30000}]},
            ["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"],
            id="node-port-on-cluster-ip",
        ),
    ],
)
def test_validate_service(name: str, spec: Obj, errors: list[str]) -> None:
    svc = _svc(name, **spec)
    services.default_service(svc)
    found = services.allocate(svc, None, []) or services.validate_service(svc)
    assert [e.message() for e in found] == errors
