"""Mirror identity: which manager a mirror and a user's Job belong to, and a mirror built from the user's object.

A manager is known by its name (the ``multiqueue.dev/origin`` label on every mirror it makes, and the name inside
its finalizer) and by the ``spec.managedBy`` value it dispatches. Two managers with different names never touch
each other's Jobs, mirrors or finalizers.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Final

from multiqueue.api import fastjson
from multiqueue.api.compaction import compacted, without_nested_spec
from multiqueue.api.meta import annotations_of, as_dict, as_list, labels_of, metadata, uid_of
from multiqueue.api.types import Obj

ORIGIN_LABEL: Final = "multiqueue.dev/origin"
ORIGIN_UID_ANNOTATION: Final = "multiqueue.dev/origin-uid"
# Written by the manager only, with its finalizer: the worker the Job is placed on. Never a request.
CLUSTER_LABEL: Final = "multiqueue.dev/cluster"
# Written by the user only: the worker the Job must first run on (a pin). The manager never changes it.
PIN_LABEL: Final = "multiqueue.dev/requested-cluster"
CLUSTER_SELECTOR_ANNOTATION: Final = "multiqueue.dev/cluster-selector"
# The older spelling of a pin, read so that Jobs made before the pin had its own label keep it: the cluster label on
# a Job no manager holds yet, and this annotation, where a manager kept that pin while the Job was placed. Placing or
# letting go of such a Job moves the pin to PIN_LABEL.
LEGACY_PIN_ANNOTATION: Final = "multiqueue.dev/requested-cluster"
# On a mirror created to go on from where the user's Job stands: the status it must start from (JSON). The mirror
# stays suspended until its status holds that progress; the annotation goes when it is let run.
PROGRESS_ANNOTATION: Final = "multiqueue.dev/progress"
# Written by the user: run this Indexed Job as parts on several workers when no single one can run it now.
SPLIT_ANNOTATION: Final = "multiqueue.dev/split"
# Written by the manager only, with its finalizer and the cluster label: the parts the Job runs as (JSON), the
# commit point of a split as the cluster label is of a whole placement. Never a request.
PARTS_ANNOTATION: Final = "multiqueue.dev/parts"
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


def requested_worker(user: Obj, held: bool) -> str | None:
    """The worker the user pinned the Job to, in either spelling; ``held``: this manager's finalizer is on it (then
    the cluster label is a placement, not a request)."""
    labels = labels_of(user)
    legacy = annotations_of(user).get(LEGACY_PIN_ANNOTATION) if held else labels.get(CLUSTER_LABEL)
    return labels.get(PIN_LABEL) or legacy or None


def placement_metadata(user: Obj, worker: str, finalizer: str, parts: str | None = None) -> Obj:
    """The metadata patch that places ``user`` on ``worker``: the finalizer and the cluster label (with ``parts``,
    the parts it runs as), and a pin of the older spelling moved to its own label."""
    finalizers = list(dict.fromkeys([*as_list(metadata(user).get("finalizers")), finalizer]))
    labels: dict[str, str | None] = {CLUSTER_LABEL: worker}
    legacy = labels_of(user).get(CLUSTER_LABEL)
    if legacy and PIN_LABEL not in labels_of(user):
        labels[PIN_LABEL] = legacy
    meta: Obj = {"finalizers": finalizers, "labels": labels}
    if parts is not None:
        meta["annotations"] = {PARTS_ANNOTATION: parts}
    return meta


def release_metadata(user: Obj, finalizer: str, unplace: bool) -> Obj:
    """The metadata patch that drops this manager's finalizer and, with ``unplace``, the placement; a pin of the
    older spelling moves to its own label."""
    remaining = [f for f in as_list(metadata(user).get("finalizers")) if f != finalizer]
    meta: Obj = {"finalizers": remaining or None}
    if unplace:
        labels: dict[str, str | None] = {CLUSTER_LABEL: None}
        notes: dict[str, str | None] = {}
        legacy = annotations_of(user).get(LEGACY_PIN_ANNOTATION)
        if legacy is not None:
            labels.setdefault(PIN_LABEL, labels_of(user).get(PIN_LABEL) or legacy)
            notes[LEGACY_PIN_ANNOTATION] = None
        if PARTS_ANNOTATION in annotations_of(user):
            notes[PARTS_ANNOTATION] = None
        if notes:
            meta["annotations"] = notes
        meta["labels"] = labels
    return meta


def strip_for_mirror(obj: Obj, origin: str) -> Obj:
    """The user's object as a fresh object for another cluster: same name and namespace, our origin marks."""
    mirror: Obj = fastjson.copied(obj)
    mirror.pop("status", None)
    meta = as_dict(mirror.get("metadata"))
    kept = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    labels = {k: v for k, v in labels_of(obj).items() if k not in (CLUSTER_LABEL, PIN_LABEL)}
    labels[ORIGIN_LABEL] = origin
    kept["labels"] = labels
    annotations = {
        k: v
        for k, v in annotations_of(obj).items()
        if k
        not in ("kubectl.kubernetes.io/last-applied-configuration", LEGACY_PIN_ANNOTATION, PARTS_ANNOTATION)
    }
    annotations[ORIGIN_UID_ANNOTATION] = str(meta.get("uid", ""))
    kept["annotations"] = annotations
    mirror["metadata"] = kept
    return mirror


def with_progress(body: Obj, progress: Obj) -> Obj:
    """``body`` marked with the progress its status must hold before it may run."""
    marked: Obj = fastjson.copied(body)
    annotations = as_dict(metadata(marked).setdefault("annotations", {}))
    annotations[PROGRESS_ANNOTATION] = json.dumps(progress, sort_keys=True, separators=(",", ":"))
    return marked


def cached_mirror(mirror: Obj, previous: Obj | None = None) -> Obj:
    """What the manager keeps of a mirror: metadata, status and the spec's scalars (``suspend``). The pod template
    and the rest of the spec are the user's Job's, which the manager has anyway."""
    return compacted(without_nested_spec(mirror), previous)


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
