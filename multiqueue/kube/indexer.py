"""An informer's cache: objects by key plus secondary indexes, as client-go separates its Indexer from the
reflector that fills it. It does no I/O and calls no handlers, so what it holds is always exactly what was put in.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from multiqueue.api.meta import namespace_of
from multiqueue.api.types import Obj

IndexFunc = Callable[[Obj], Iterable[str]]

NAMESPACE_INDEX: Final = "namespace"


class Indexer:
    """Objects by key, and by every value each index function gives them."""

    def __init__(self) -> None:
        self._items: dict[str, Obj] = {}
        # The object under a key, or None: the dict's own lookup, since every sync reads a cache of each worker.
        self.get: Callable[[str], Obj | None] = self._items.get
        self._indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: lambda o: [namespace_of(o)]}
        self._indexes: dict[str, dict[str, set[str]]] = collections.defaultdict(
            lambda: collections.defaultdict(set)
        )

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def objects(self) -> list[Obj]:
        return list(self._items.values())

    def keys(self) -> list[str]:
        return list(self._items)

    def by_index(self, index: str, value: str) -> list[Obj]:
        return [self._items[k] for k in self._indexes[index].get(value, ()) if k in self._items]

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Add a custom index; existing objects are indexed at once."""
        self._indexers[name] = func
        for key, obj in self._items.items():
            for value in func(obj):
                self._indexes[name][value].add(key)

    def put(self, key: str, obj: Obj) -> Obj | None:
        """Store ``obj`` under ``key`` and return what it replaced."""
        old = self._items.get(key)
        self._unindex(key, old)
        self._items[key] = obj
        for name, func in self._indexers.items():
            for value in func(obj):
                self._indexes[name][value].add(key)
        return old

    def pop(self, key: str) -> Obj | None:
        """Remove ``key`` and return what it held, if anything."""
        old = self._items.pop(key, None)
        self._unindex(key, old)
        return old

    def _unindex(self, key: str, obj: Obj | None) -> None:
        if obj is None:
            return
        for name, func in self._indexers.items():
            for value in func(obj):
                members = self._indexes[name].get(value)
                if members is not None:
                    members.discard(key)
                    if not members:
                        del self._indexes[name][value]
