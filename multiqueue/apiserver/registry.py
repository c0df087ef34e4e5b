"""Which resource types a server serves right now: the built-in ones plus those its CRDs define.

Routing, discovery and OpenAPI all read from here, so a CRD that becomes Established is served everywhere at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from multiqueue.api.meta import as_dict, as_list, condition_is_true, metadata
from multiqueue.apiserver.resources import BUILTIN, ResourceType
from multiqueue.apiserver.strategies import CustomResourceStrategy, Strategy, strategy_for

CRD_KEY = "apiextensions.k8s.io/customresourcedefinitions"


class Registry:
    def __init__(self) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._strategies: dict[str, Strategy] = {}
        self._by_crd: dict[str, list[ResourceType]] = {}
        self.generation = 0  # moves whenever the set of types changes; caches of discovery key on it
        for rtype in BUILTIN:
            self._add(rtype, strategy_for(rtype.resource, rtype.namespaced))

    def _add(self, rtype: ResourceType, strategy: Strategy) -> None:
        self._types[(rtype.group, rtype.version, rtype.plural)] = rtype
        self._strategies[rtype.resource] = strategy
        self.generation += 1

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._types.values()))

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def by_key(self, key: str) -> list[ResourceType]:
        """The types served over the storage ``key``, the one that owns it (core v1 Events) first."""
        return sorted((t for t in self._types.values() if t.key == key), key=lambda t: bool(t.stored_as))

    def storages(self) -> list[ResourceType]:
        """One type per storage key, the one that owns it: what a walk over every stored object visits."""
        owners: dict[str, ResourceType] = {}
        for rtype in self._types.values():
            if not rtype.stored_as:
                owners.setdefault(rtype.key, rtype)
        return list(owners.values())

    def strategy(self, rtype: ResourceType) -> Strategy:
        return self._strategies[rtype.resource]

    # --- CustomResourceDefinitions ---------------------------------------------------------------------------

    def apply_crd(self, crd: dict[str, Any]) -> list[ResourceType]:
        """Serve the versions an Established CRD defines, replacing what an earlier revision defined."""
        name = str(metadata(crd).get("name", ""))
        self.remove_crd(name)
        if not condition_is_true(as_dict(crd.get("status")).get("conditions"), "Established"):
            return []
        added = crd_types(crd)
        schemas = {t.api_version: t.schema for t in added}
        terminating = bool(metadata(crd).get("deletionTimestamp"))
        for rtype in added:
            strategy = CustomResourceStrategy(
                rtype.namespaced, "status" in rtype.subresources, schemas, terminating
            )
            self._add(rtype, strategy)
        self._by_crd[name] = added
        return added

    def remove_crd(self, name: str) -> list[ResourceType]:
        removed = self._by_crd.pop(name, [])
        for rtype in removed:
            self._types.pop((rtype.group, rtype.version, rtype.plural), None)
            self.generation += 1
        return removed


def crd_types(crd: dict[str, Any]) -> list[ResourceType]:
    """One ResourceType per served version of a CRD."""
    spec = as_dict(crd.get("spec"))
    names = as_dict(spec.get("names"))
    group = str(spec.get("group", ""))
    kind = str(names.get("kind", ""))
    plural = str(names.get("plural", ""))
    singular = str(names.get("singular") or kind.lower())
    types = []
    for version in as_list(spec.get("versions")):
        if not isinstance(version, dict) or version.get("served") is False:
            continue
        subresources = as_dict(version.get("subresources"))
        types.append(
            ResourceType(
                group=group,
                version=str(version.get("name", "")),
                kind=kind,
                plural=plural,
                singular=singular,
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(str(s) for s in as_list(names.get("shortNames"))),
                categories=tuple(str(c) for c in as_list(names.get("categories"))),
                subresources=("status",) if "status" in subresources else (),
                schema=as_dict(as_dict(version.get("schema")).get("openAPIV3Schema")) or None,
                printer_columns=tuple(
                    c for c in as_list(version.get("additionalPrinterColumns")) if isinstance(c, dict)
                ),
            )
        )
    return types
