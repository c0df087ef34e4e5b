"""The owner index of a local API server's store: which object has a UID, and which objects name a UID in their
ownerReferences, so garbage collection finds dependents without full scans."""

from __future__ import annotations

import collections
from collections.abc import Hashable, Iterable
from typing import Any, Generic, TypeVar

from multiqueue.api.meta import as_list, metadata
from multiqueue.api.types import Obj

R = TypeVar("R", bound=Hashable)  # where the store keeps an object: opaque to the index


class OwnerIndex(Generic[R]):
    """UID -> where that object lives, and owner UID -> where its dependents live."""

    def __init__(self) -> None:
        self._by_uid: dict[str, R] = {}
        self._dependents: dict[str, set[R]] = collections.defaultdict(set)

    def update(self, ref: R, old: Obj | None, new: Obj | None) -> None:
        """The object at ``ref`` changed from ``old`` to ``new`` (None: absent)."""
        if old is not None:
            self._by_uid.pop(str(metadata(old).get("uid") or ""), None)
        if new is not None and metadata(new).get("uid"):
            self._by_uid[str(metadata(new)["uid"])] = ref
        for uid in _owner_uids(old) - _owner_uids(new):
            self._dependents[uid].discard(ref)
            if not self._dependents[uid]:
                del self._dependents[uid]
        for uid in _owner_uids(new):
            self._dependents[uid].add(ref)

    def locate(self, uid: str) -> R | None:
        return self._by_uid.get(uid)

    def dependents(self, owner_uid: str) -> list[R]:
        """Where the objects whose ownerReferences name ``owner_uid`` live."""
        return list(self._dependents.get(owner_uid, ()))


def _owner_uids(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    refs: Iterable[Any] = as_list(metadata(obj).get("ownerReferences"))
    return {str(r["uid"]) for r in refs if isinstance(r, dict) and r.get("uid")}
