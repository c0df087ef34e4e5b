"""Mirror identity: which manager a mirror and a user's Job belong to, and a mirror built from the user's object.

A manager is known by its name (the ``multiqueue.dev/origin`` label on every mirror it makes, and the name inside
its finalizer) and by the ``spec.managedBy`` value it dispatches. Two managers with different names never touch
each other's Jobs, mirrors or finalizers.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Final

from multiqueue.api.meta import annotations_of, as_dict, as_list, labels_of, metadata, uid_of
from multiqueue.api.types import Obj

ORIGIN_LABEL: Final = "multiqueue.dev/origin"
ORIGIN_UID_ANNOTATION: Final = "multiqueue.dev/origin-uid"
CLUSTER_LABEL: Final = "multiqueue.dev/cluster"
CLUSTER_SELECTOR_ANNOTATION: Final = "multiqueue.dev/cluster-selector"
# On the user's Job while it is placed: the worker the user pinned it to, if any (the cluster label then says where
# it runs). Letting a placement go puts the pin back rather than removing it.
REQUESTED_CLUSTER_ANNOTATION: Final = "multiqueue.dev/requested-cluster"
# On a mirror created to go on from where the user's Job stands: the status it must start from (JSON). The mirror
# stays suspended until its status holds that progress; the annotation goes when it is let run.
PROGRESS_ANNOTATION: Final = "multiqueue.dev/progress"
FINALIZER_PREFIX: Final = "dispatch.multiqueue.dev/"


@dataclasses.dataclass(frozen=True)
class Identity:
    """Who a manager is: its name and the managedBy value of the Jobs it dispatches."""

    origin: str
    managed_by: str

    @property
    def finalizer(self) -> str:
        """On the user's Job while a mirror of it may exist: names this manager, so no other one acts on it."""
        return FINALIZER_PREFIX + self.origin

    def holds(self, user: Obj) -> bool:
        return self.finalizer in as_list(metadata(user).get("finalizers"))

    def owns_mirror(self, mirror: Obj, user: Obj) -> bool:
        return mirror_identity(mirror) == (self.origin, uid_of(user))


def mirror_identity(mirror: Obj) -> tuple[str, str]:
    """(origin manager, origin UID) a mirror carries; empty strings when it is not a mirror."""
    return labels_of(mirror).get(ORIGIN_LABEL, ""), annotations_of(mirror).get(ORIGIN_UID_ANNOTATION, "")


def strip_for_mirror(obj: Obj, origin: str) -> Obj:
    """The user's object as a fresh object for another cluster: same name and namespace, our origin marks."""
    mirror = copy.deepcopy(obj)
    mirror.pop("status", None)
    meta = as_dict(mirror.get("metadata"))
    kept = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    labels = {k: v for k, v in labels_of(obj).items() if k != CLUSTER_LABEL}
    labels[ORIGIN_LABEL] = origin
    kept["labels"] = labels
    annotations = {
        k: v
        for k, v in annotations_of(obj).items()
        if k not in ("kubectl.kubernetes.io/last-applied-configuration", REQUESTED_CLUSTER_ANNOTATION)
    }
    annotations[ORIGIN_UID_ANNOTATION] = str(meta.get("uid", ""))
    kept["annotations"] = annotations
    mirror["metadata"] = kept
    return mirror


def with_progress(body: Obj, progress: Obj) -> Obj:
    """``body`` marked with the progress its status must hold before it may run."""
    marked = copy.deepcopy(body)
    annotations = as_dict(metadata(marked).setdefault("annotations", {}))
    annotations[PROGRESS_ANNOTATION] = json.dumps(progress, sort_keys=True, separators=(",", ":"))
    return marked


def pending_progress(mirror: Obj) -> Obj | None:
    """The progress a mirror still has to be given before it runs, or None (none asked, or unreadable)."""
    text = annotations_of(mirror).get(PROGRESS_ANNOTATION)
    if text is None:
        return None
    try:
        progress = json.loads(text)
    except ValueError:
        return None
    return progress if isinstance(progress, dict) else None


def holds_progress(mirror: Obj, progress: Obj) -> bool:
    """The mirror's status already carries every field of ``progress`` (so letting it run loses nothing)."""
    status = as_dict(mirror.get("status"))
    return all(status.get(k) == v for k, v in progress.items())
