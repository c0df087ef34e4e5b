"""Discovery documents: how kubectl and clients learn which resources a server has.

Two shapes answer the same question. The legacy one takes a request per group version (/api, /apis,
/api/v1, /apis/{group}/{version}); the aggregated one (apidiscovery.k8s.io) answers /api and /apis with one
document each. kubectl 1.27-1.29 ask for aggregated v2beta1, 1.30 and later for v2 then v2beta1, and all of them
accept the legacy answer: the response's Content-Type tells the client which shape it got.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Iterable
from typing import Final

from multiqueue.api.types import Obj
from multiqueue.api.versions import KUBERNETES_VERSION as RELEASE
from multiqueue.apiserver.resources import ResourceType

# The server presents as the release the upstream control plane pins, whose behaviour it follows (kubectl warns
# when it is more than one minor from its own, as against that release itself).
KUBERNETES_VERSION: Final = tuple(RELEASE.removeprefix("v").split(".")[:2])
# The oldest minor this server's behaviour is compatible with, reported next to the emulated one since 1.33: as
# upstream, the one before.
MIN_COMPATIBILITY_VERSION: Final = (KUBERNETES_VERSION[0], str(int(KUBERNETES_VERSION[1]) - 1))

LEGACY_CONTENT_TYPE: Final = "application/json"
_DISCOVERY_GROUP: Final = "apidiscovery.k8s.io"
_DISCOVERY_KIND: Final = "APIGroupDiscoveryList"
# The versions of aggregated discovery this server answers with, preferred first.
AGGREGATED_VERSIONS: Final = ("v2", "v2beta1")

_SUBRESOURCE_VERBS: Final = {
    "status": ("get", "patch", "update"),
    "log": ("get",),
    "finalize": ("update",),
    "eviction": ("create",),
}
# Subresources whose answers are of another kind than their resource: (group, version, kind).
_SUBRESOURCE_KINDS: Final = {"eviction": ("policy", "v1", "Eviction")}
_MACHINES: Final = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
_VERSION: Final = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?")


def aggregated_content_type(version: str) -> str:
    """The media type that marks an aggregated answer: the client parses the body by it."""
    return f"application/json;g={_DISCOVERY_GROUP};v={version};as={_DISCOVERY_KIND}"


def version_info() -> Obj:
    """GET /version. kubectl compares major and minor for its skew warning; the rest is informative."""
    major, minor = KUBERNETES_VERSION
    machine = platform.machine().lower()
    return {
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "minCompatibilityMajor": MIN_COMPATIBILITY_VERSION[0],
        "minCompatibilityMinor": MIN_COMPATIBILITY_VERSION[1],
        "gitVersion": f"{RELEASE}+multiqueue",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": f"python{platform.python_version()}",
        "compiler": "multiqueue",
        "platform": f"{platform.system().lower()}/{_MACHINES.get(machine, machine)}",
    }


def api_versions(server_address: str = "") -> Obj:
    """GET /api, legacy answer: the core group has one version."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key putting the preferred version first, as upstream orders a CRD's versions.

    GA before beta before alpha, higher numbers first; names that are not Kubernetes versions last, by name.
    """
    match = _VERSION.fullmatch(version)
    if match is None:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), version)


def _group_versions(types: Iterable[ResourceType], core: bool) -> dict[str, list[str]]:
    """group -> its served versions, preferred first: only the core group, or only the named groups."""
    found: dict[str, list[str]] = {}
    for rtype in types:
        if (rtype.group == "") != core:
            continue
        versions = found.setdefault(rtype.group, [])
        if rtype.version not in versions:
            versions.append(rtype.version)
    return {group: sorted(versions, key=version_priority) for group, versions in sorted(found.items())}


# The paths GET / lists besides the API groups: what this server serves of kube-apiserver's non-resource paths.
SERVED_PATHS: Final = (
    "/api",
    "/apis",
    "/apis/",
    "/healthz",
    "/livez",
    "/metrics",
    "/openapi/v2",
    "/openapi/v3",
    "/openapi/v3/",
    "/readyz",
    "/version",
)


def root_paths(types: Iterable[ResourceType]) -> list[str]:
    """GET /: every path served at the top, each group and group version among them, sorted as Go sorts."""
    paths = set(SERVED_PATHS)
    for core in (True, False):
        for group, versions in _group_versions(types, core).items():
            prefix = "/api" if core else f"/apis/{group}"
            paths.add(prefix)
            paths.update(f"{prefix}/{v}" for v in versions)
    return sorted(paths, key=lambda p: p.encode())


def api_group_list(types: Iterable[ResourceType]) -> Obj:
    """GET /apis, legacy answer: every named group with its versions and the one clients should prefer."""
    groups = [_api_group(group, versions) for group, versions in _group_versions(types, core=False).items()]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(types: Iterable[ResourceType], group: str) -> Obj | None:
    """GET /apis/{group}: the group's versions and the preferred one; None when the group is not served."""
    versions = _group_versions(types, core=False).get(group)
    return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(group, versions)} if versions else None


def _api_group(group: str, versions: list[str]) -> Obj:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def subresource_verbs(subresource: str) -> list[str]:
    return list(_SUBRESOURCE_VERBS.get(subresource, ("get",)))


def _served(types: Iterable[ResourceType], group: str, version: str) -> list[ResourceType]:
    return sorted((t for t in types if t.group == group and t.version == version), key=lambda t: t.plural)


def api_resource_list(types: Iterable[ResourceType], group: str, version: str) -> Obj | None:
    """GET /api/v1 or /apis/{group}/{version}: resources and their subresources; None when not served."""
    selected = _served(types, group, version)
    if not selected:
        return None
    resources: list[Obj] = []
    for rtype in selected:
        entry: Obj = {
            "name": rtype.plural,
            "singularName": rtype.singular,
            "namespaced": rtype.namespaced,
            "kind": rtype.kind,
            "verbs": list(rtype.verbs),
        }
        if rtype.short_names:
            entry["shortNames"] = list(rtype.short_names)
        if rtype.categories:
            entry["categories"] = list(rtype.categories)
        resources.append(entry)
        resources.extend(_subresource_entry(rtype, sub) for sub in rtype.subresources)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": selected[0].api_version,
        "resources": resources,
    }


def _subresource_entry(rtype: ResourceType, sub: str) -> Obj:
    entry: Obj = {"name": f"{rtype.plural}/{sub}", "singularName": "", "namespaced": rtype.namespaced}
    if sub in _SUBRESOURCE_KINDS:
        group, version, kind = _SUBRESOURCE_KINDS[sub]
        entry.update(group=group, version=version, kind=kind)
    else:
        entry["kind"] = rtype.kind
    entry["verbs"] = subresource_verbs(sub)
    return entry


def _subresource_kind(rtype: ResourceType, sub: str) -> Obj:
    if sub in _SUBRESOURCE_KINDS:
        group, version, kind = _SUBRESOURCE_KINDS[sub]
        return {"group": group, "version": version, "kind": kind}
    return {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}


def _resource_discovery(rtype: ResourceType) -> Obj:
    kind = {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
    entry: Obj = {
        "resource": rtype.plural,
        "responseKind": kind,
        "scope": "Namespaced" if rtype.namespaced else "Cluster",
        "singularResource": rtype.singular,
        "verbs": list(rtype.verbs),
    }
    if rtype.short_names:
        entry["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        entry["categories"] = list(rtype.categories)
    if rtype.subresources:
        entry["subresources"] = [
            {
                "subresource": sub,
                "responseKind": _subresource_kind(rtype, sub),
                "verbs": subresource_verbs(sub),
            }
            for sub in rtype.subresources
        ]
    return entry


def aggregated_discovery(types: Iterable[ResourceType], legacy_core: bool, version: str = "v2") -> Obj:
    """The APIGroupDiscoveryList for /api (``legacy_core``) or /apis, in aggregated ``version`` v2 or v2beta1.

    Both versions have the same shape; only ``apiVersion`` differs, and clients check it.
    """
    if version not in AGGREGATED_VERSIONS:
        raise ValueError(f"aggregated discovery has no version {version!r}")
    listed = list(types)
    items = [
        {
            "metadata": {"name": group} if group else {},
            "versions": [
                {
                    "version": v,
                    "resources": [_resource_discovery(t) for t in _served(listed, group, v)],
                    "freshness": "Current",
                }
                for v in versions
            ],
        }
        for group, versions in _group_versions(listed, core=legacy_core).items()
    ]
    return {
        "kind": _DISCOVERY_KIND,
        "apiVersion": f"{_DISCOVERY_GROUP}/{version}",
        "metadata": {},
        "items": items,
    }


def media_ranges(accept: str) -> list[tuple[str, dict[str, str]]]:
    """The Accept header's media ranges, most wanted first: by ``q``, then in the order given."""
    ranges: list[tuple[float, int, str, dict[str, str]]] = []
    for position, clause in enumerate(accept.split(",")):
        media, *raw_params = (part.strip() for part in clause.split(";"))
        if not media:
            continue
        params = {}
        for raw in raw_params:
            key, _, value = raw.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        try:
            quality = float(params.pop("q", "1"))
        except ValueError:
            quality = 1.0
        if quality > 0:
            ranges.append((-quality, position, media.lower(), params))
    return [(media, params) for _, _, media, params in sorted(ranges)]


def negotiate_discovery(accept_header: str) -> str:
    """The Content-Type to answer /api or /apis with: aggregated v2, aggregated v2beta1, or legacy JSON.

    The client's order of preference decides. A JSON range without ``as=`` (or ``*/*``) asks for the legacy
    answer; ranges this server cannot produce (protobuf, other kinds) are skipped; when nothing is usable, the
    legacy answer is the one every client understands.
    """
    for media, params in media_ranges(accept_header):
        if media not in ("application/json", "application/*", "*/*"):
            continue
        wanted = params.get("as")
        if wanted is None:
            return LEGACY_CONTENT_TYPE
        if (
            wanted == _DISCOVERY_KIND
            and params.get("g") == _DISCOVERY_GROUP
            and params.get("v") in AGGREGATED_VERSIONS
        ):
            return aggregated_content_type(params["v"])
    return LEGACY_CONTENT_TYPE


def discovery_root(types: Iterable[ResourceType], legacy_core: bool, accept_header: str) -> tuple[str, Obj]:
    """(Content-Type, body) for GET /api (``legacy_core``) or /apis, in the shape the client asked for.

    The answer depends on Accept, so serve it with ``Vary: Accept``.
    """
    content_type = negotiate_discovery(accept_header)
    if content_type == LEGACY_CONTENT_TYPE:
        return content_type, api_versions() if legacy_core else api_group_list(types)
    version = content_type.split(";v=", 1)[1].split(";", 1)[0]
    return content_type, aggregated_discovery(types, legacy_core, version)
