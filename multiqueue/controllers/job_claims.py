"""Which pods a Job claims before each sync: the ones it controls whose labels still match its selector, plus the
matching pods no controller owns, which it adopts; controlled pods whose labels stopped matching are released.

kube-controller-manager's Job controller claims pods this way, so a pod whose owner reference a user removed
(kubectl edit, a patch) comes back to its Job instead of being replaced, and a pod relabelled out of the selector
leaves it. The decision is pure; the controller patches the owner references (and the tracking finalizer, which
goes with them) and syncs with the pods it ends up owning.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Final

from multiqueue.api import jobs
from multiqueue.api.errors import SelectorError
from multiqueue.api.labelselectors import LabelSelector, label_selector_from_dict
from multiqueue.api.meta import controller_ref, is_deleting, labels_of, metadata, owner_reference, uid_of
from multiqueue.api.types import Obj

JOB_REFERENCE: Final = {"apiVersion": "batch/v1", "kind": "Job"}


@dataclasses.dataclass(frozen=True)
class Claims:
    """The pods one sync counts as the Job's, and the owner-reference changes to make first."""

    owned: tuple[Obj, ...] = ()  # controlled and matching: the Job's pods as they stand
    adopt: tuple[Obj, ...] = ()  # matching orphans: the Job's pods once adopted
    release: tuple[Obj, ...] = ()  # controlled but no longer matching: let go


def selector_of(job: Obj) -> LabelSelector | None:
    """The Job's pod selector (None if it cannot be read: such a Job claims nothing new and lets nothing go)."""
    try:
        return label_selector_from_dict(jobs.spec_of(job).get("selector"))
    except SelectorError:
        return None


def may_adopt(job: Obj, pod: Obj, selector: LabelSelector | None = None) -> bool:
    """Whether ``job`` adopts ``pod``: an orphan of its namespace, not being deleted, whose labels match the
    selector of a Job that is neither being deleted nor finished nor another controller's."""
    selector = selector if selector is not None else selector_of(job)
    return (
        selector is not None
        and controller_ref(pod) is None
        and not is_deleting(pod)
        and not is_deleting(job)
        and not jobs.is_finished(job)
        and jobs.is_managed_by_builtin_controller(job)
        and metadata(pod).get("namespace") == metadata(job).get("namespace")
        and selector.matches(labels_of(pod))
    )


def claims(job: Obj, candidates: Iterable[Obj]) -> Claims:
    """Sort ``candidates`` (the pods ``job`` controls and the orphans of its namespace) into the pods it owns,
    adopts and releases. A Job being deleted adopts and releases nothing; its controlled pods that no longer
    match are simply not its pods for this sync."""
    selector = selector_of(job)
    owned: list[Obj] = []
    adopt: list[Obj] = []
    release: list[Obj] = []
    seen: set[str] = set()
    for pod in candidates:
        if uid_of(pod) in seen:
            continue
        seen.add(uid_of(pod))
        ref = controller_ref(pod)
        if ref is not None:
            if ref.get("uid") != uid_of(job):
                continue
            if selector is None or selector.matches(labels_of(pod)):
                owned.append(pod)
            elif not is_deleting(job):
                release.append(pod)
        elif may_adopt(job, pod, selector):
            adopt.append(pod)
    return Claims(tuple(owned), tuple(adopt), tuple(release))


def adoption_patch(job: Obj, pod: Obj) -> Obj:
    """The strategic merge patch that makes ``job`` the controller of ``pod`` and tracks it: the pod's UID
    makes it fail on another pod of the same name."""
    return {
        "metadata": {
            "uid": uid_of(pod),
            "ownerReferences": [owner_reference({**job, **JOB_REFERENCE})],
            "finalizers": [jobs.TRACKING_FINALIZER],
        }
    }


def release_patch(job: Obj, pod: Obj) -> Obj:
    """The strategic merge patch that takes ``job``'s owner reference and tracking finalizer off ``pod``."""
    return {
        "metadata": {
            "uid": uid_of(pod),
            "ownerReferences": [{"$patch": "delete", "uid": uid_of(job)}],
            "$deleteFromPrimitiveList/finalizers": [jobs.TRACKING_FINALIZER],
        }
    }
