"""Discovery documents: what kubectl and clients read to learn which resources a server has.

We answer the legacy (non-aggregated) form; kubectl asks for aggregated discovery first and accepts it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from multiqueue.local.apiserver.resources import ResourceType

Obj = dict[str, Any]
KUBERNETES_VERSION: Final = ("1", "33")
_SUBRESOURCE_VERBS: Final = {"status": ["get", "patch", "update"], "log": ["get"]}


def version_info() -> Obj:
    major, minor = KUBERNETES_VERSION
    return {
        "major": major,
        "minor": minor,
        "gitVersion": f"v{major}.{minor}.0+multiqueue",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "python",
        "compiler": "multiqueue",
        "platform": "linux/amd64",
    }


def api_versions() -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    }


def api_group_list(types: Iterable[ResourceType]) -> Obj:
    groups: dict[str, list[str]] = {}
    for rtype in types:
        if rtype.group and rtype.version not in groups.setdefault(rtype.group, []):
            groups[rtype.group].append(rtype.version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {
                "name": group,
                "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
                "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]},
            }
            for group, versions in sorted(groups.items())
        ],
    }


def api_resource_list(types: Iterable[ResourceType], group: str, version: str) -> Obj | None:
    """The APIResourceList of one group version, subresources included; None when it is not served."""
    selected = [t for t in types if t.group == group and t.version == version]
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
        for sub in rtype.subresources:
            resources.append(
                {
                    "name": f"{rtype.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rtype.namespaced,
                    "kind": rtype.kind,
                    "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"]),
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }
