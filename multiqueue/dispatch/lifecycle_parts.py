"""The decide step of an Indexed Job run as parts on several workers.

A Job asks for it with ``multiqueue.dev/split: "true"``. When no single worker can run all of its parallelism
now, its pending indexes are cut into ranges, one per worker that can run some of its pods (``split``), and the
parts are recorded on the user's Job with the placement (``multiqueue.dev/parts``, beside the cluster label and
the finalizer), so a restarted manager sees the same parts. Each part is a mirror on its worker that starts with
every other index marked completed, so its Job controller runs only the part's own (``mirrorbody``). The user's
status is the merge of the parts' (``api/jobparts``); once it decides the Job's fate, the parts still running are
suspended, and the final condition follows when none runs a pod. A part whose worker is lost gives its unfinished
indexes to other workers; a part that a worker refuses ends the split, and the Job is placed whole.

One request per kind of worker action is made per sync (one create, one seed, one suspend): the watch event of
each brings the next sync.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Final

from multiqueue.api import indexes, jobs
from multiqueue.api.jobparts import PartStatus, divide, merged_status
from multiqueue.api.jobstatus import validate_job_status_rules
from multiqueue.api.meta import as_dict, as_int, labels_of
from multiqueue.api.types import JOBS, NORMAL, WARNING, Event, Obj
from multiqueue.dispatch.decision import CACHE_WAIT, Actions, Observed, Waiting
from multiqueue.dispatch.generic import GenericJob, PodSet, demand
from multiqueue.dispatch.mirror import CLUSTER_LABEL, Identity, holds_progress, pending_progress
from multiqueue.dispatch.mirrorbody import part_body
from multiqueue.dispatch.placement import Evaluation, WaitReason, WorkerView
from multiqueue.dispatch.split import PartPlan, Parts, plan_parts, wants_split

# The filters a part's worker need not pass for the whole Job: whether all of it fits there, now or ever.
ABOUT_ROOM: Final = frozenset({"FitsNow", "CouldEverFit"})
# What a worker without a quota on what the pods ask can run of them.
UNBOUNDED: Final = 1 << 30


def room(worker: WorkerView, per_pod: Mapping[str, float]) -> int:
    """How many more of the Job's pods ``worker`` can run now, by its free capacity (unbounded where it has no
    quota on what a pod asks)."""
    if worker.held or (worker.max_jobs is not None and worker.load >= worker.max_jobs):
        return 0
    counts = [
        math.floor((worker.free[resource] + 1e-9) / amount)
        for resource, amount in per_pod.items()
        if resource in worker.free and amount > 0
    ]
    return max(0, min(counts)) if counts else UNBOUNDED


def _rooms(
    evaluation: Evaluation, workers: Sequence[WorkerView], per_pod: Mapping[str, float]
) -> list[tuple[str, int]]:
    """The workers every filter but the one for room now passed, most room first."""
    passing = [
        w
        for w in workers
        if all(v.passes or v.filter in ABOUT_ROOM for v in evaluation.verdicts.get(w.name, ())) and not w.slow
    ]
    return _by_room(passing, per_pod)


def _by_room(workers: Sequence[WorkerView], per_pod: Mapping[str, float]) -> list[tuple[str, int]]:
    """(worker, pods it can run now), most room first, then by name."""
    return sorted(((w.name, room(w, per_pod)) for w in workers), key=lambda item: (-item[1], item[0]))


def per_pod(adapter: GenericJob, user: Obj) -> dict[str, float]:
    return demand([PodSet(s.name, 1, s.requests) for s in adapter.pod_sets(user)])


def holdings(adapter: GenericJob, user: Obj, plans: Sequence[PartPlan]) -> dict[str, dict[str, float]]:
    """What each part takes of its worker: a pod's requests times the part's parallelism."""
    one = per_pod(adapter, user)
    return {p.worker: {r: a * p.parallelism for r, a in one.items()} for p in plans}


def place_as_parts(
    actions: Actions,
    adapter: GenericJob,
    identity: Identity,
    seen: Observed,
    user: Obj,
    evaluation: Evaluation,
    limit: int,
) -> bool:
    """Place ``user`` as parts when it asked to be split, no worker refused it lately, and two or more workers
    can run some of it now; whether it was."""
    if limit < 2 or adapter.resource != JOBS or not wants_split(user) or seen.rejections:
        return False
    plans = plan_parts(user, _rooms(evaluation, seen.workers, per_pod(adapter, user)), limit)
    if plans is None:
        return False
    actions.hold = holdings(adapter, user, plans)
    actions.place_on = plans[0].worker
    actions.parts = Parts(tuple(plans)).encoded()
    actions.create_mirror = (plans[0].worker, part_body(adapter, identity, user, plans[0]))
    actions.events.append(
        Event(NORMAL, "Dispatched", f"Job split into {len(plans)} parts: {Parts(tuple(plans)).described()}")
    )
    return True


def run_parts(
    actions: Actions,
    adapter: GenericJob,
    identity: Identity,
    seen: Observed,
    user: Obj,
    mirrors: dict[str, Obj],
    parts: Parts,
) -> Actions:
    """Placed as ``parts`` (``mirrors``: ours, by worker): each part's mirror made, given its marked indexes and
    suspended or resumed with the Job; the parts' statuses merged into the user's; a decided Job's parts stopped;
    a lost worker's part planned again on others."""
    planned = {p.worker for p in parts.plans}
    lost = {w for w in planned if (v := seen.workers.get(w)) is not None and v.lost}
    actions.delete_mirrors += [(w, m) for w, m in mirrors.items() if w not in planned]
    if planned & lost:
        return _replan(actions, adapter, identity, seen, user, mirrors, parts, lost)
    for plan in parts.plans:
        refused = seen.rejections.get(plan.worker)
        if plan.worker not in mirrors and refused is not None and refused.existing_origin != identity.origin:
            return _unsplit(actions, mirrors, plan.worker, refused.reason)
    decided = _merge(actions, user, mirrors, parts, seen)
    rescaled = None if decided else _rescaled(adapter, seen, user, parts)
    if rescaled is not None:
        actions.parts = rescaled.encoded()
        actions.hold = holdings(adapter, user, rescaled.plans)
        parts = rescaled
    for plan in parts.plans:
        _advance(actions, adapter, identity, seen, user, mirrors.get(plan.worker), plan, decided)
    return actions


def _rescaled(adapter: GenericJob, seen: Observed, user: Obj, parts: Parts) -> Parts | None:
    """The parts with the user's changed parallelism divided again: a lower one in proportion to each part's
    share, a higher one a pod at a time to the parts whose worker has room for it; None when it is unchanged."""
    wanted = jobs.parallelism(user)
    shares = [p.parallelism for p in parts.plans]
    if wanted == sum(shares) or not shares:
        return None
    if wanted < sum(shares):
        runs = divide(list(range(wanted)), shares)
        new = [len(run) for run in runs]
    else:
        one = per_pod(adapter, user)
        free = {w.name: room(w, one) for w in seen.workers if w.active and not w.lost}
        new, left = list(shares), wanted - sum(shares)
        while left > 0:
            grown = False
            for i, plan in enumerate(parts.plans):
                if left > 0 and free.get(plan.worker, 0) > new[i] - shares[i]:
                    new[i] += 1
                    left -= 1
                    grown = True
            if not grown:
                break
    if new == shares:
        return None
    plans = tuple(dataclasses.replace(p, parallelism=n) for p, n in zip(parts.plans, new, strict=True))
    return Parts(plans, parts.carried_failed)


def _advance(
    actions: Actions,
    adapter: GenericJob,
    identity: Identity,
    seen: Observed,
    user: Obj,
    mirror: Obj | None,
    plan: PartPlan,
    decided: bool,
) -> None:
    """The next step of one part, when no other part took that kind of step in this sync."""
    if not seen.workers.answers(plan.worker):
        return  # asked nothing until it answers again; its return syncs the Job
    if mirror is None:
        made = seen.rejections.get(plan.worker)
        if made is not None and made.existing_origin == identity.origin and seen.now < made.retry_at():
            # Ours after all (made by an earlier sync): look again once the cache has it.
            actions.requeue_after = min(CACHE_WAIT, made.retry_at() - seen.now)
        elif actions.create_mirror is None and not decided:
            actions.create_mirror = (plan.worker, part_body(adapter, identity, user, plan))
        return
    progress = pending_progress(mirror)
    if progress is not None and not holds_progress(mirror, progress):
        if actions.seed_progress is None:
            actions.seed_progress = (
                plan.worker,
                {**mirror, "status": {**as_dict(mirror.get("status")), **progress}},
            )
        return
    stop = adapter.is_suspended(user) or (decided and not adapter.is_finished(mirror))
    if adapter.is_suspended(mirror) != stop and actions.suspend_mirror is None:
        actions.suspend_mirror = (plan.worker, stop)
    if jobs.parallelism(mirror) != plan.parallelism and actions.scale_mirror is None and not decided:
        actions.scale_mirror = (plan.worker, plan.parallelism)


def _part_statuses(mirrors: dict[str, Obj], parts: Parts, total: int) -> list[PartStatus]:
    """What the merge reads of each part whose mirror runs from its marked indexes (one still waiting for them
    has done nothing yet)."""
    found = []
    for plan in parts.plans:
        mirror = mirrors.get(plan.worker)
        if mirror is None or pending_progress(mirror) is not None:
            continue
        own = frozenset(indexes.parse_indexes(plan.indexes, total))
        found.append(PartStatus(own, as_dict(mirror.get("status"))))
    return found


def _merge(actions: Actions, user: Obj, mirrors: dict[str, Obj], parts: Parts, seen: Observed) -> bool:
    """The user's status from its parts, when it changed and the Job status rules allow it; whether the Job's
    fate is decided (its parts are to stop)."""
    total = jobs.completions(user) or 0
    now = datetime.fromtimestamp(seen.now, tz=UTC)
    merged = merged_status(user, _part_statuses(mirrors, parts, total), parts.carried_failed, now)
    current = {k: v for k, v in jobs.status_of(user).items() if k != "uncountedTerminatedPods"}
    if merged.status == current:
        return merged.decided
    problems = validate_job_status_rules({**user, "status": merged.status}, user)
    if problems:
        detail = "; ".join(str(p) for p in problems)
        actions.status_refused = True
        actions.events.append(
            Event(WARNING, "StatusSyncRejected", f"merged status of the parts not applied: {detail}")
        )
        return merged.decided
    actions.status = merged.status
    workers = ", ".join(p.worker for p in parts.plans)
    if jobs.is_complete({"status": merged.status}) and not jobs.is_complete(user):
        actions.events.append(Event(NORMAL, "Completed", f"Job completed on workers {workers}"))
    elif jobs.is_failed({"status": merged.status}) and not jobs.is_failed(user):
        failed = next(c for c in merged.status["conditions"] if c["type"] == jobs.FAILED)
        actions.events.append(
            Event(WARNING, str(failed["reason"]), f"{failed['message']} (on workers {workers})")
        )
    return merged.decided


def _replan(
    actions: Actions,
    adapter: GenericJob,
    identity: Identity,
    seen: Observed,
    user: Obj,
    mirrors: dict[str, Obj],
    parts: Parts,
    lost: set[str],
) -> Actions:
    """A part's worker is lost: its indexes not yet completed go to other workers, its failures are carried."""
    total = jobs.completions(user) or 0
    kept = [p for p in parts.plans if p.worker not in lost]
    gone = [p for p in parts.plans if p.worker in lost]
    taken = {i for p in kept for i in indexes.parse_indexes(p.indexes, total)}
    wanted = sum(p.parallelism for p in gone)
    keeping = {p.worker for p in kept}
    others = [w for w in seen.workers if w.active and w.accepting and not w.lost and w.name not in keeping]
    free = _by_room(others, per_pod(adapter, user))
    plans = plan_parts(user, free, len(gone) or 1, frozenset(taken), wanted)
    names = ", ".join(sorted(p.worker for p in gone))
    if plans is None:
        message = f"worker {names} is lost; no other worker has room for its indexes now"
        candidates = frozenset(w.name for w in seen.workers if w.accepting and not w.lost)
        actions.waiting = Waiting(WaitReason.NO_CAPACITY, message, candidates)
        actions.events.append(Event(NORMAL, "Pending", message))
        return actions
    failures = sum(as_int(as_dict(mirrors.get(p.worker, {}).get("status")).get("failed")) or 0 for p in gone)
    replanned = Parts((*kept, *plans), parts.carried_failed + failures)
    actions.hold = holdings(adapter, user, replanned.plans)
    actions.parts = replanned.encoded()
    labelled = labels_of(user).get(CLUSTER_LABEL, "")
    if labelled != replanned.plans[0].worker:
        actions.redispatch = (labelled, replanned.plans[0].worker)
    actions.create_mirror = (plans[0].worker, part_body(adapter, identity, user, plans[0]))
    actions.events.append(
        Event(
            WARNING,
            "Redispatched",
            f"worker {names} was unreachable for longer than the worker-lost timeout; "
            f"{Parts(tuple(plans)).described()} now",
        )
    )
    return actions


def _unsplit(actions: Actions, mirrors: dict[str, Obj], worker: str, reason: str) -> Actions:
    """A worker refused its part: every part goes and the Job is placed again, whole."""
    actions.delete_mirrors += list(mirrors.items())
    actions.unplace = True
    actions.events.append(
        Event(
            WARNING, "SplitAbandoned", f"worker {worker} refused a part ({reason}); the Job is placed whole"
        )
    )
    return actions
