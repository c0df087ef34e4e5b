"""The mirrors to create, from the user's Job: whole, or one part of an Indexed Job run on several workers."""

from __future__ import annotations

from multiqueue.api import indexes, jobs
from multiqueue.api.jobparts import seeded_status
from multiqueue.api.meta import as_dict
from multiqueue.api.types import Obj
from multiqueue.dispatch.generic import GenericJob, progress_of
from multiqueue.dispatch.mirror import Identity, with_progress
from multiqueue.dispatch.split import PartPlan


def mirror_body(adapter: GenericJob, identity: Identity, user: Obj) -> Obj:
    """The mirror to create: suspended while the user's Job is, or while it must first be given the progress
    the user's Job records (finished work is then not run again)."""
    body = adapter.build_mirror(user, identity.origin)
    progress = progress_of(adapter, user)
    if progress is not None:
        body = with_progress(body, progress)
    if progress is not None or adapter.is_suspended(user):
        body = with_suspend(body, adapter, True)
    return body


def part_body(adapter: GenericJob, identity: Identity, user: Obj, plan: PartPlan) -> Obj:
    """One part's mirror: the whole Job with the part's share of the parallelism, created suspended with every
    index it does not run to be marked completed before it runs. Its successPolicy stays with the user's Job, which
    the merged indexes satisfy or not: on a part, the indexes marked for it would satisfy it falsely."""
    body = adapter.build_mirror(user, identity.origin)
    spec = as_dict(body.get("spec"))
    spec["parallelism"] = plan.parallelism
    spec.pop("successPolicy", None)
    total = jobs.completions(user) or 0
    progress = seeded_status(total, indexes.parse_indexes(plan.indexes, total))
    if progress:
        body = with_progress(body, progress)
    if progress or adapter.is_suspended(user):
        body = with_suspend(body, adapter, True)
    return body


def with_suspend(body: Obj, adapter: GenericJob, suspend: bool) -> Obj:
    """``body`` with the adapter's suspend patch applied."""
    patch = adapter.suspend_patch(suspend)
    merged = dict(body)
    for key, value in patch.items():
        merged[key] = {**dict(body.get(key) or {}), **value} if isinstance(value, dict) else value
    return merged
