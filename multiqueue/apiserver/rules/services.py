"""Services as kube-apiserver defaults, allocates and validates them, on a single-stack IPv4 cluster.

Three steps, in upstream's order: :func:`default_service` (Go's defaulting, on every body decoded),
:func:`allocate` (cluster IPs from the service CIDR and node ports from their range, given what other Services
hold; errors refuse the write before validation), then :func:`validate_service` / :func:`validate_service_update`.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import re
from collections.abc import Iterable
from typing import Any, Final

from multiqueue.api.errors import (
    FieldError,
    Printed,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)
from multiqueue.api.meta import (
    as_dict,
    as_list,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    qualified_name_errors,
    validate_labels,
    validate_object_meta,
    validate_object_meta_update,
)
from multiqueue.api.types import Obj

CLUSTER_IP: Final = "ClusterIP"
NODE_PORT: Final = "NodePort"
LOAD_BALANCER: Final = "LoadBalancer"
EXTERNAL_NAME: Final = "ExternalName"
TYPES: Final = (CLUSTER_IP, EXTERNAL_NAME, LOAD_BALANCER, NODE_PORT)
NONE: Final = "None"
IPV4: Final = "IPv4"
IPV6: Final = "IPv6"
SINGLE_STACK: Final = "SingleStack"
PREFER_DUAL_STACK: Final = "PreferDualStack"
REQUIRE_DUAL_STACK: Final = "RequireDualStack"
FAMILY_POLICIES: Final = (PREFER_DUAL_STACK, REQUIRE_DUAL_STACK, SINGLE_STACK)
PROTOCOLS: Final = ("SCTP", "TCP", "UDP")
AFFINITIES: Final = ("ClientIP", "None")
TRAFFIC_POLICIES: Final = ("Cluster", "Local")
CLIENT_IP_TIMEOUT_DEFAULT: Final = 10800
CLIENT_IP_TIMEOUT_MAX: Final = 86400
SERVICE_CIDR: Final = ipaddress.IPv4Network("10.0.0.0/24")
_PORT_NAME: Final = re.compile(r"[-a-z0-9]+")
_PORT_RANGE: Final = "must be between 1 and 65535, inclusive"
_IP_FORMAT: Final = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


@dataclasses.dataclass(frozen=True)
class Pools:
    """Where a cluster draws Services' addresses from: kube-apiserver's defaults."""

    cidr: ipaddress.IPv4Network = SERVICE_CIDR
    node_ports: range = range(30000, 32768)

    @property
    def node_port_text(self) -> str:
        return f"{self.node_ports.start}-{self.node_ports.stop - 1}"


def _spec(svc: Obj) -> Obj:
    spec = svc.get("spec")
    if not isinstance(spec, dict):
        spec = svc["spec"] = {}
    return spec


def _ports(spec: Obj) -> list[Obj]:
    return [p for p in as_list(spec.get("ports")) if isinstance(p, dict)]


def externally_accessible(spec: Obj) -> bool:
    kind = spec.get("type")
    return kind in (LOAD_BALANCER, NODE_PORT) or (
        kind == CLUSTER_IP and bool(as_list(spec.get("externalIPs")))
    )


def _needs_health_check(spec: Obj) -> bool:
    return spec.get("type") == LOAD_BALANCER and spec.get("externalTrafficPolicy") == "Local"


def _needs_node_ports(spec: Obj) -> bool:
    kind = spec.get("type")
    return kind == NODE_PORT or (
        kind == LOAD_BALANCER and spec.get("allocateLoadBalancerNodePorts") is not False
    )


def _headless(spec: Obj) -> bool:
    ips = as_list(spec.get("clusterIPs"))
    return bool(ips) and ips[0] == NONE


# --- defaulting -------------------------------------------------------------------------------------------------


def default_service(svc: Obj) -> None:
    """Upstream's SetDefaults_Service, in place; the status struct Go always writes."""
    spec = _spec(svc)
    if not spec.get("sessionAffinity"):
        spec["sessionAffinity"] = "None"
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        client_ip = as_dict(as_dict(spec.get("sessionAffinityConfig")).get("clientIP"))
        if client_ip.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": CLIENT_IP_TIMEOUT_DEFAULT}}
    if not spec.get("type"):
        spec["type"] = CLUSTER_IP
    for port in _ports(spec):
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port", 0)
    if externally_accessible(spec) and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if spec.get("internalTrafficPolicy") is None and spec["type"] in (NODE_PORT, LOAD_BALANCER, CLUSTER_IP):
        spec["internalTrafficPolicy"] = "Cluster"
    if spec["type"] == LOAD_BALANCER and spec.get("allocateLoadBalancerNodePorts") is None:
        spec["allocateLoadBalancerNodePorts"] = True
    status = svc.get("status")
    if not isinstance(status, dict):
        status = svc["status"] = {}
    balancer = status.get("loadBalancer")
    if not isinstance(balancer, dict):
        balancer = status["loadBalancer"] = {}
    if spec["type"] == LOAD_BALANCER:
        for ingress in as_list(balancer.get("ingress")):
            if isinstance(ingress, dict) and ingress.get("ip") and ingress.get("ipMode") is None:
                ingress["ipMode"] = "VIP"


# --- allocation ---------------------------------------------------------------------------------------------


def _carry_allocated(spec: Obj, old_spec: Obj) -> None:
    """A client that resends what it created (no cluster IP, no node ports) keeps what was allocated."""
    if spec.get("type") != EXTERNAL_NAME and old_spec.get("type") != EXTERNAL_NAME:
        if not spec.get("clusterIP") and old_spec.get("clusterIP"):
            spec["clusterIP"] = old_spec["clusterIP"]
        if not as_list(spec.get("clusterIPs")) and as_list(old_spec.get("clusterIPs")):
            spec["clusterIPs"] = list(as_list(old_spec.get("clusterIPs")))
    if _needs_node_ports(spec) and _needs_node_ports(old_spec):
        in_use = {p.get("nodePort") for p in _ports(old_spec)} & {p.get("nodePort") for p in _ports(spec)}
        by_name = {p.get("name"): p.get("nodePort") for p in _ports(old_spec)}
        for port in _ports(spec):
            previous = by_name.get(port.get("name"))
            if not port.get("nodePort") and previous and previous not in in_use:
                port["nodePort"] = previous
    keep_health = _needs_health_check(spec) and _needs_health_check(old_spec)
    if keep_health and not spec.get("healthCheckNodePort") and old_spec.get("healthCheckNodePort"):
        spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]


def _normalize_cluster_ips(spec: Obj, old_spec: Obj | None) -> None:
    """Keep ``clusterIP`` and ``clusterIPs`` in step for clients that set only the first."""
    ip = spec.get("clusterIP") or ""
    ips = as_list(spec.get("clusterIPs"))
    if old_spec is None:
        if ip and not ips:
            spec["clusterIPs"] = [ip]
        return
    old_ip = old_spec.get("clusterIP") or ""
    old_ips = as_list(old_spec.get("clusterIPs"))
    if old_ips and not ips and old_ip == ip:
        spec["clusterIPs"] = ips = list(old_ips)
    if old_ip != ip:
        if old_ip and not ip:
            if ips == old_ips:
                spec.pop("clusterIPs", None)
        elif ips == old_ips:
            spec["clusterIPs"] = [ip]


def _drop_type_dependent(spec: Obj, old_spec: Obj, status: Obj) -> None:
    """Fields the old type had (perhaps allocated) that the new one does not use, unless the client changed them."""
    if old_spec.get("type") != EXTERNAL_NAME and spec.get("type") == EXTERNAL_NAME:
        if as_list(spec.get("clusterIPs")) == as_list(old_spec.get("clusterIPs")):
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        for field in ("ipFamilies", "ipFamilyPolicy"):
            if spec.get(field) == old_spec.get(field):
                spec.pop(field, None)
    same_node_ports = [p.get("nodePort") for p in _ports(spec)] == [
        p.get("nodePort") for p in _ports(old_spec)
    ]
    if _needs_node_ports(old_spec) and not _needs_node_ports(spec) and same_node_ports:
        for port in _ports(spec):
            port.pop("nodePort", None)
    same_health = spec.get("healthCheckNodePort") == old_spec.get("healthCheckNodePort")
    if _needs_health_check(old_spec) and not _needs_health_check(spec) and same_health:
        spec.pop("healthCheckNodePort", None)
    if old_spec.get("type") == LOAD_BALANCER and spec.get("type") != LOAD_BALANCER:
        if spec.get("allocateLoadBalancerNodePorts") == old_spec.get("allocateLoadBalancerNodePorts"):
            spec.pop("allocateLoadBalancerNodePorts", None)
        if spec.get("loadBalancerClass") == old_spec.get("loadBalancerClass"):
            spec.pop("loadBalancerClass", None)
    same_policy = spec.get("externalTrafficPolicy") == old_spec.get("externalTrafficPolicy")
    if externally_accessible(old_spec) and not externally_accessible(spec) and same_policy:
        spec.pop("externalTrafficPolicy", None)
    if spec.get("type") != LOAD_BALANCER:
        status["loadBalancer"] = {}


def _family_of(ip: str) -> str:
    try:
        return IPV6 if ipaddress.ip_address(ip).version == 6 else IPV4
    except ValueError:
        return IPV4


def _init_families(spec: Obj, old_spec: Obj | None) -> list[FieldError]:
    """The IP family policy and families a single-stack IPv4 cluster gives a Service."""
    if spec.get("type") == EXTERNAL_NAME:
        return []
    if spec.get("ipFamilyPolicy") is None:
        if old_spec is not None and old_spec.get("ipFamilyPolicy") is not None:
            spec["ipFamilyPolicy"] = old_spec["ipFamilyPolicy"]
        elif spec.get("clusterIP") == NONE and not as_dict(spec.get("selector")):
            spec["ipFamilyPolicy"] = REQUIRE_DUAL_STACK  # headless without selector: every family
        else:
            spec["ipFamilyPolicy"] = SINGLE_STACK
    errs = _cluster_ips_errors(spec, old_spec)
    if errs:
        return errs
    policy = spec["ipFamilyPolicy"]
    families = [str(f) for f in as_list(spec.get("ipFamilies"))]
    ips = [str(ip) for ip in as_list(spec.get("clusterIPs"))]
    if policy == SINGLE_STACK:
        if len(ips) == 2:
            errs.append(
                invalid(
                    "spec.ipFamilyPolicy",
                    policy,
                    "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
                )
            )
        if len(families) == 2:
            errs.append(
                invalid(
                    "spec.ipFamilyPolicy",
                    policy,
                    "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
                )
            )
    for index, ip in enumerate(ips):
        if ip == NONE:
            break
        if index >= len(families):
            family = _family_of(ip)
            if family != IPV4:
                errs.append(
                    invalid(f"spec.clusterIPs[{index}]", ips, f"{family} is not configured on this cluster")
                )
            else:
                families.append(family)
    if errs:
        return errs
    if spec.get("clusterIP") == NONE and not as_dict(spec.get("selector")):
        families = families or [IPV4]
        if len(families) < 2 and policy != SINGLE_STACK:
            families.append(IPV6 if families[0] == IPV4 else IPV4)
        spec["ipFamilies"] = families
        return []
    if policy == REQUIRE_DUAL_STACK:
        errs.append(
            invalid("spec.ipFamilyPolicy", policy, "this cluster is not configured for dual-stack services")
        )
    errs += [
        invalid(f"spec.ipFamilies[{i}]", family, "not configured on this cluster")
        for i, family in enumerate(families)
        if family != IPV4
    ]
    if not errs:
        spec["ipFamilies"] = families or [IPV4]
    return errs


def _cluster_ips_errors(spec: Obj, old_spec: Obj | None) -> list[FieldError]:
    """Upstream's ValidateServiceClusterIPsRelatedFields: clusterIP, clusterIPs, families and policy agree."""
    if spec.get("type") == EXTERNAL_NAME:
        return []
    errs: list[FieldError] = []
    ip = spec.get("clusterIP") or ""
    ips = as_list(spec.get("clusterIPs"))
    if ip:
        if not ips:
            errs.append(required("spec.clusterIPs"))
        elif ips[0] != ip:
            errs.append(invalid("spec.clusterIPs", ips, "first value must match `clusterIP`"))
    elif ips:
        errs.append(invalid("spec.clusterIPs", ips, "must be empty when `clusterIP` is not specified"))
    seen: set[Any] = set()
    for index, family in enumerate(as_list(spec.get("ipFamilies"))):
        if family not in (IPV4, IPV6):
            errs.append(not_supported(f"spec.ipFamilies[{index}]", family, [IPV4, IPV6]))
        if family in seen:
            errs.append(duplicate(f"spec.ipFamilies[{index}]", family))
        seen.add(family)
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in FAMILY_POLICIES:
        errs.append(not_supported("spec.ipFamilyPolicy", policy, list(FAMILY_POLICIES)))
    old_ips = as_list(as_dict(old_spec).get("clusterIPs"))
    bad_ips = False
    for index, value in enumerate(ips):
        if index == 0 and value == NONE:
            if len(ips) > 1:
                bad_ips = True
                errs.append(invalid("spec.clusterIPs", ips, "'None' must be the first and only value"))
            continue
        if value not in old_ips and not _is_ip(value):
            bad_ips = True
            errs.append(invalid(f"spec.clusterIPs[{index}]", value, _IP_FORMAT))
    if len(ips) > 2:
        errs.append(invalid("spec.clusterIPs", ips, "may only hold up to 2 values"))
    if bad_ips:
        return errs
    if len(ips) > 1 and len({_family_of(str(v)) for v in ips}) != len(ips):
        errs.append(invalid("spec.clusterIPs", ips, "may specify no more than one IP for each IP family"))
    families = as_list(spec.get("ipFamilies"))
    if not _headless(spec):
        for index, value in enumerate(ips[: len(families)]):
            family = _family_of(str(value))
            if families[index] == IPV4 and family == IPV6:
                errs.append(
                    invalid(
                        f"spec.clusterIPs[{index}]",
                        value,
                        f"expected an IPv4 value as indicated by `ipFamilies[{index}]`",
                    )
                )
            if families[index] == IPV6 and family != IPV6:
                errs.append(
                    invalid(
                        f"spec.clusterIPs[{index}]",
                        value,
                        f"expected an IPv6 value as indicated by `ipFamilies[{index}]`",
                    )
                )
    return errs


def _is_ip(value: Any) -> bool:
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return False
    return True


def _taken(peers: Iterable[Obj], old: Obj | None) -> tuple[set[str], set[int]]:
    """Cluster IPs and node ports other Services hold (the object being written is not one of them)."""
    own = as_dict(old).get("metadata") if old is not None else None
    ips: set[str] = set()
    ports: set[int] = set()
    for peer in peers:
        if own is not None and as_dict(peer.get("metadata")).get("uid") == as_dict(own).get("uid"):
            continue
        spec = as_dict(peer.get("spec"))
        ips.update(str(ip) for ip in as_list(spec.get("clusterIPs")) if ip != NONE)
        ports.update(int(p["nodePort"]) for p in _ports(spec) if isinstance(p.get("nodePort"), int))
        if isinstance(spec.get("healthCheckNodePort"), int):
            ports.add(int(spec["healthCheckNodePort"]))
    return ips, ports


def _next_ip(pools: Pools, taken: set[str]) -> str | None:
    """The first free address of the upper band, then of the lower one, as upstream prefers dynamic addresses
    there (the lower band is kept for addresses clients ask for; the first one is the API server's own)."""
    hosts = list(pools.cidr.hosts())[1:]
    band = min(max(16, pools.cidr.num_addresses // 16), 256)
    for address in hosts[band:] + hosts[:band]:
        if str(address) not in taken:
            return str(address)
    return None


def _allocate_cluster_ips(spec: Obj, old_spec: Obj | None, pools: Pools, taken: set[str]) -> list[FieldError]:
    if spec.get("type") == EXTERNAL_NAME or _headless(spec):
        return []
    ips = [str(ip) for ip in as_list(spec.get("clusterIPs"))]
    old_ips = [str(ip) for ip in as_list(as_dict(old_spec).get("clusterIPs"))]
    if old_spec is not None and old_spec.get("type") != EXTERNAL_NAME and ips == old_ips and ips:
        return []
    if not ips:
        address = _next_ip(pools, taken)
        if address is None:
            return [invalid("spec.clusterIPs", ips, "failed to allocate IP: range is full")]
        spec["clusterIP"] = address
        spec["clusterIPs"] = [address]
        return []
    requested = ips[0]
    if ipaddress.ip_address(requested) not in pools.cidr:
        problem = "the provided network does not match the current range"
        return [invalid("spec.clusterIPs", ips, f"failed to allocate IP {requested}: {problem}")]
    if requested in taken:
        return [
            invalid(
                "spec.clusterIPs", ips, f"failed to allocate IP {requested}: provided IP is already allocated"
            )
        ]
    return []


def _allocate_node_ports(spec: Obj, pools: Pools, taken: set[int]) -> list[FieldError]:
    """A node port for each service port that needs one; the same port number shares one across protocols."""
    allocate_new = _needs_node_ports(spec)
    held = set(taken)
    by_port: dict[Any, int] = {}
    for index, port in enumerate(_ports(spec)):
        wanted = port.get("nodePort")
        if not wanted and not allocate_new:
            continue
        if wanted:
            if by_port.get(port.get("port")) == wanted:
                continue
            problem = _node_port_problem(wanted, pools, held)
            if problem:
                return [invalid(f"spec.ports[{index}].nodePort", wanted, problem)]
            held.add(int(wanted))
            by_port[port.get("port")] = int(wanted)
        elif port.get("port") in by_port:
            port["nodePort"] = by_port[port.get("port")]
        else:
            free = next((p for p in pools.node_ports if p not in held), None)
            if free is None:
                return [invalid(f"spec.ports[{index}].nodePort", 0, "range is full")]
            port["nodePort"] = free
            held.add(free)
            by_port[port.get("port")] = free
    if _needs_health_check(spec) and not spec.get("healthCheckNodePort"):
        free = next((p for p in pools.node_ports if p not in held), None)
        if free is not None:
            spec["healthCheckNodePort"] = free
    return []


def _node_port_problem(port: Any, pools: Pools, held: set[int]) -> str:
    if not isinstance(port, int) or port not in pools.node_ports:
        return f"provided port is not in the valid range. The range of valid ports is {pools.node_port_text}"
    if port in held:
        return "provided port is already allocated"
    return ""


def allocate(svc: Obj, old: Obj | None, peers: Iterable[Obj], pools: Pools = Pools()) -> list[FieldError]:
    """Upstream's BeginCreate/BeginUpdate for Services: settle cluster IPs and families, then draw addresses and
    node ports the Service needs from what ``peers`` (every stored Service) leave free. Errors refuse the write."""
    spec = _spec(svc)
    old_spec = as_dict(old.get("spec")) if old is not None else None
    if old_spec is not None:
        _carry_allocated(spec, old_spec)
        _drop_type_dependent(spec, old_spec, as_dict(svc.get("status")))
    _normalize_cluster_ips(spec, old_spec)
    errs = _init_families(spec, old_spec)
    if errs:
        return errs
    taken_ips, taken_ports = _taken(peers, old)
    errs = _allocate_cluster_ips(spec, old_spec, pools, taken_ips)
    return errs or _allocate_node_ports(spec, pools, taken_ports)


# --- validation ---------------------------------------------------------------------------------------------


def _port_name_errors(value: str) -> list[str]:
    """Upstream's IsValidPortName: what a named target port may be."""
    errs = ["must be no more than 15 characters"] if len(value) > 15 else []
    if not _PORT_NAME.fullmatch(value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not any("a" <= c <= "z" for c in value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value and (value[0] == "-" or value[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _valid_port(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _validate_port(port: Obj, require_name: bool, names: set[str], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    name = port.get("name") or ""
    if require_name and not name:
        errs.append(required(f"{path}.name"))
    elif name:
        errs += [invalid(f"{path}.name", name, m) for m in dns1123_label_errors(str(name))]
        if name in names:
            errs.append(duplicate(f"{path}.name", name))
        names.add(str(name))
    if not _valid_port(port.get("port")):
        errs.append(invalid(f"{path}.port", port.get("port", 0), _PORT_RANGE))
    protocol = port.get("protocol")
    if not protocol:
        errs.append(required(f"{path}.protocol"))
    elif protocol not in PROTOCOLS:
        errs.append(not_supported(f"{path}.protocol", protocol, list(PROTOCOLS)))
    target = port.get("targetPort", 0)
    if isinstance(target, str):
        errs += [invalid(f"{path}.targetPort", target, m) for m in _port_name_errors(target)]
    elif not _valid_port(target):
        errs.append(invalid(f"{path}.targetPort", target, _PORT_RANGE))
    app_protocol = port.get("appProtocol")
    if app_protocol is not None:
        errs += [
            invalid(f"{path}.appProtocol", app_protocol, m) for m in qualified_name_errors(str(app_protocol))
        ]
    return errs


def _validate_spec(svc: Obj) -> list[FieldError]:
    """Upstream's validateService, for what this cluster serves (no topology annotations or source ranges)."""
    spec = as_dict(svc.get("spec"))
    kind = spec.get("type")
    ports = _ports(spec)
    errs: list[FieldError] = []
    if not ports and not _headless(spec) and kind != EXTERNAL_NAME:
        errs.append(required("spec.ports"))
    if kind in (LOAD_BALANCER, NODE_PORT) and _headless(spec):
        errs.append(invalid("spec.clusterIPs[0]", NONE, f"may not be set to 'None' for {kind} services"))
    elif kind == EXTERNAL_NAME:
        for field in ("clusterIPs", "ipFamilies"):
            if as_list(spec.get(field)):
                errs.append(forbidden(f"spec.{field}", "may not be set for ExternalName services"))
        if spec.get("ipFamilyPolicy") is not None:
            errs.append(forbidden("spec.ipFamilyPolicy", "may not be set for ExternalName services"))
        cname = str(spec.get("externalName") or "").removesuffix(".")
        if cname:
            errs += [invalid("spec.externalName", cname, m) for m in dns1123_subdomain_errors(cname)]
        else:
            errs.append(required("spec.externalName"))
    names: set[str] = set()
    for index, port in enumerate(ports):
        errs += _validate_port(port, len(ports) > 1, names, f"spec.ports[{index}]")
    if spec.get("selector") is not None:
        errs += validate_labels(spec.get("selector"), "spec.selector")
    errs += _validate_affinity(spec)
    errs += _cluster_ips_errors(spec, None)
    for index, address in enumerate(as_list(spec.get("externalIPs"))):
        if not _is_ip(address):
            errs.append(invalid(f"spec.externalIPs[{index}]", address, _IP_FORMAT))
    if not kind:
        errs.append(required("spec.type"))
    elif kind not in TYPES:
        errs.append(not_supported("spec.type", kind, list(TYPES)))
    if kind == CLUSTER_IP:
        errs += [
            forbidden(f"spec.ports[{i}].nodePort", "may not be used when `type` is 'ClusterIP'")
            for i, port in enumerate(ports)
            if port.get("nodePort")
        ]
    errs += _duplicate_ports(ports)
    if spec.get("allocateLoadBalancerNodePorts") is not None and kind != LOAD_BALANCER:
        errs.append(
            forbidden("spec.allocateLoadBalancerNodePorts", "may only be used when `type` is 'LoadBalancer'")
        )
    if kind == LOAD_BALANCER and spec.get("allocateLoadBalancerNodePorts") is None:
        errs.append(required("allocateLoadBalancerNodePorts"))
    errs += _validate_traffic_policies(spec)
    return errs


def _validate_affinity(spec: Obj) -> list[FieldError]:
    affinity = spec.get("sessionAffinity")
    if not affinity:
        return [required("spec.sessionAffinity")]
    if affinity not in AFFINITIES:
        return [not_supported("spec.sessionAffinity", affinity, list(AFFINITIES))]
    config = spec.get("sessionAffinityConfig")
    path = "spec.sessionAffinityConfig"
    if affinity == "None":
        return (
            [forbidden(path, "must not be set when session affinity is None")] if config is not None else []
        )
    when = "when session affinity type is ClientIP"
    if not isinstance(config, dict):
        return [required(path, when)]
    client_ip = config.get("clientIP")
    if not isinstance(client_ip, dict):
        return [required(f"{path}.clientIP", when)]
    timeout = client_ip.get("timeoutSeconds")
    if timeout is None:
        return [required(f"{path}.clientIP.timeoutSeconds", when)]
    if not isinstance(timeout, int) or not 0 < timeout <= CLIENT_IP_TIMEOUT_MAX:
        detail = f"must be greater than 0 and less than {CLIENT_IP_TIMEOUT_MAX}"
        return [invalid(f"{path}.clientIP.timeoutSeconds", timeout, detail)]
    return []


def _duplicate_ports(ports: list[Obj]) -> list[FieldError]:
    errs: list[FieldError] = []
    node_ports: set[tuple[Any, Any]] = set()
    for index, port in enumerate(ports):
        if port.get("nodePort"):
            key = (port.get("protocol"), port.get("nodePort"))
            if key in node_ports:
                errs.append(duplicate(f"spec.ports[{index}].nodePort", port.get("nodePort")))
            node_ports.add(key)
    seen: set[tuple[Any, Any]] = set()
    for index, port in enumerate(ports):
        key = (port.get("protocol"), port.get("port"))
        if key in seen:
            # Upstream prints the (protocol, port) key as the Go struct it is, other fields zero.
            printed = json.dumps(
                {
                    "Name": "",
                    "Protocol": key[0],
                    "AppProtocol": None,
                    "Port": key[1],
                    "TargetPort": 0,
                    "NodePort": 0,
                },
                separators=(",", ":"),
            )
            errs.append(duplicate(f"spec.ports[{index}]", Printed(printed)))
        seen.add(key)
    return errs


def _validate_traffic_policies(spec: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    external = spec.get("externalTrafficPolicy") or ""
    if not externally_accessible(spec):
        if external:
            errs.append(
                invalid(
                    "spec.externalTrafficPolicy",
                    external,
                    "may only be set for externally-accessible services",
                )
            )
    elif not external:
        errs.append(required("spec.externalTrafficPolicy"))
    elif external not in TRAFFIC_POLICIES:
        errs.append(not_supported("spec.externalTrafficPolicy", external, list(TRAFFIC_POLICIES)))
    health = spec.get("healthCheckNodePort") or 0
    if not _needs_health_check(spec):
        if health:
            detail = "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"
            errs.append(invalid("spec.healthCheckNodePort", health, detail))
    elif not health:
        errs.append(required("spec.healthCheckNodePort"))
    elif not _valid_port(health):
        errs.append(invalid("spec.healthCheckNodePort", health, _PORT_RANGE))
    internal = spec.get("internalTrafficPolicy")
    if internal is None:
        if spec.get("type") in (NODE_PORT, LOAD_BALANCER, CLUSTER_IP):
            errs.append(required("spec.internalTrafficPolicy"))
    elif internal not in TRAFFIC_POLICIES:
        errs.append(not_supported("spec.internalTrafficPolicy", internal, list(TRAFFIC_POLICIES)))
    return errs


def validate_service(svc: Obj) -> list[FieldError]:
    """On create: names are DNS-1123 labels (they become DNS names), then the spec."""
    errs = validate_object_meta(svc.get("metadata"), namespaced=True, name_errors=dns1123_label_errors)
    return errs + _validate_spec(svc)


def validate_service_update(new: Obj, old: Obj) -> list[FieldError]:
    errs = validate_object_meta_update(new.get("metadata"), old.get("metadata"))
    spec, old_spec = as_dict(new.get("spec")), as_dict(old.get("spec"))
    if EXTERNAL_NAME not in (spec.get("type"), old_spec.get("type")):
        errs += _changed_once_set(spec, old_spec)
    health_changed = spec.get("healthCheckNodePort") != old_spec.get("healthCheckNodePort")
    if _needs_health_check(old_spec) and _needs_health_check(spec) and health_changed:
        errs.append(forbidden("spec.healthCheckNodePort", "field is immutable"))
    return errs + _validate_spec(new)


def _changed_once_set(spec: Obj, old_spec: Obj) -> list[FieldError]:
    """Cluster IPs and the primary family stay as allocated (a single-stack cluster offers no upgrade)."""
    errs: list[FieldError] = []
    ips, old_ips = as_list(spec.get("clusterIPs")), as_list(old_spec.get("clusterIPs"))
    if not (_headless(spec) and _headless(old_spec)):
        if len(ips) == len(old_ips):
            errs += [
                invalid(f"spec.clusterIPs[{i}]", ips, "may not change once set")
                for i, ip in enumerate(old_ips)
                if ip != ips[i]
            ]
        elif len(old_ips) > len(ips) and not ips:
            errs.append(invalid("spec.clusterIPs[0]", ips, "primary clusterIP can not be unset"))
        elif old_ips and ips and ips[0] != old_ips[0]:
            errs.append(invalid("spec.clusterIPs[0]", ips, "may not change once set"))
    families, old_families = as_list(spec.get("ipFamilies")), as_list(old_spec.get("ipFamilies"))
    if _headless(spec) == _headless(old_spec) and not _headless(spec) and len(families) == len(old_families):
        errs += [
            invalid("spec.ipFamilies[0]", families, "may not change once set")
            for i, family in enumerate(old_families)
            if family != families[i]
        ]
    return errs
