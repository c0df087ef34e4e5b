"""What ``multiqueue explain`` shows of one Job: what it asks, each worker's verdict from each placement filter,
the scores of the workers every filter passed, and the decision. Pure: the same answer from the manager's read
model (in process) and from the clusters (``inspect.explain``), given the same worker states."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from multiqueue.api.meta import annotations_of, labels_of, namespace_of
from multiqueue.api.types import Obj
from multiqueue.dispatch.affinity import WORKER_AFFINITY_ANNOTATION
from multiqueue.dispatch.generic import GenericJob, demand
from multiqueue.dispatch.mirror import CLUSTER_LABEL, CLUSTER_SELECTOR_ANNOTATION, Identity, requested_worker
from multiqueue.dispatch.placement import WorkerView, evaluate
from multiqueue.dispatch.readmodel import ReadModel, WorkerState
from multiqueue.dispatch.split import parts_of


@dataclasses.dataclass(frozen=True)
class FilterVerdict:
    filter: str
    passes: bool
    reason: str = ""  # the code when it does not pass (NoCapacity, Draining, ...)
    message: str = ""  # "has no capacity now (cpu 3.5/4)"


@dataclasses.dataclass(frozen=True)
class WorkerExplained:
    name: str
    active: str  # "True" or the reason it is not
    verdicts: tuple[FilterVerdict, ...]
    affinity_score: int | None = None  # None: some filter stopped it, so it was not scored
    policy_score: float | None = None  # None: not scored, or a higher affinity score won before the policy
    chosen: bool = False

    @property
    def passes(self) -> bool:
        return all(v.passes for v in self.verdicts)


@dataclasses.dataclass(frozen=True)
class Explanation:
    kind: str
    key: str  # namespace/name
    state: str  # Placed, Finished, Suspended or Waiting
    demand: dict[str, float]
    pinned: str | None
    selector: str | None
    affinity: str | None
    policy: str
    worker: str | None  # where it runs (or ran), or where it would go now
    decision: str  # one line: "placed on worker-1", "waiting: 0/2 workers can take this Job: ..."
    reason: str  # the wait reason (NoCapacity, ...), empty when it would be placed
    summary: str
    workers: tuple[WorkerExplained, ...]

    def as_dict(self) -> dict[str, Any]:
        body = dataclasses.asdict(self)
        for worker, shown in zip(body["workers"], self.workers, strict=True):
            worker["passes"] = shown.passes
        return body

    def as_document(self) -> dict[str, Any]:
        """JSON's field names (camelCase): one document for ``explain -o json|yaml`` and the dashboard alike."""
        camel: dict[str, Any] = _camel_deep(self.as_dict())
        return camel


def _camel_deep(value: Any) -> Any:
    """Field names as JSON names them, at every depth."""
    if isinstance(value, dict):
        return {re.sub(r"_(\w)", lambda m: m.group(1).upper(), k): _camel_deep(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_camel_deep(v) for v in value]
    return value


def view_of(state: WorkerState) -> WorkerView:
    """What placement knows of a worker, from what the read model shows of it."""
    jobs = state.capacity.get("jobs")
    quotas = {r: q for r, (_, q) in state.capacity.items() if r != "jobs"}
    return WorkerView(
        state.name,
        dict(state.labels),
        state.active,
        state.running,
        max_jobs=int(jobs[1]) if jobs is not None else None,
        reason=state.reason,
        free={r: q - used for r, (used, q) in state.capacity.items() if r != "jobs"},
        lost=state.lost,
        accepting=not state.draining,
        capacity=quotas,
        missing_kinds=frozenset(state.missing_kinds),
    )


def without(views: Sequence[WorkerView], worker: str | None, asked: Mapping[str, float]) -> list[WorkerView]:
    """``views`` with a Job asking ``asked`` taken off ``worker``: a placed Job is explained as if placed anew,
    not as competing with itself."""
    freed = []
    for view in views:
        if view.name != worker:
            freed.append(view)
            continue
        free = {r: f + asked.get(r, 0.0) for r, f in view.free.items()}
        freed.append(dataclasses.replace(view, load=max(0, view.load - 1), free=free))
    return freed


def explain(
    adapter: GenericJob,
    job: Obj,
    identity: Identity,
    policy: str,
    states: Sequence[WorkerState],
    turn: int = 0,
) -> Explanation:
    """``job`` explained against the workers of ``states``. ``turn``: the round-robin counter (0 out of process)."""
    asked = demand(adapter.pod_sets(job))
    held = identity.holds(job)
    placed = labels_of(job).get(CLUSTER_LABEL) if held or adapter.is_finished(job) else None
    pinned = requested_worker(job, held)
    kind = adapter.resource.kind
    views = without([view_of(s) for s in states], placed if held else None, asked)
    shown = evaluate(job, views, policy, turn, demand=asked, pinned=pinned, kind=kind)
    chosen = shown.placement.worker
    rows = tuple(
        WorkerExplained(
            view.name,
            "True" if view.active else f"False ({view.reason})",
            tuple(
                FilterVerdict(v.filter, v.passes, v.code, f"{v.text} ({v.detail})" if v.detail else v.text)
                for v in shown.verdicts[view.name]
            ),
            shown.affinity.get(view.name),
            shown.policy.get(view.name),
            view.name == chosen,
        )
        for view in views
    )
    state, decision, worker = _decision(adapter, job, placed, chosen, shown.placement.summary)
    parts = parts_of(job) if placed else None
    if parts is not None:
        decision = decision.replace(f"on worker {placed}", f"as parts: {parts.described()}", 1)
    reason = shown.placement.reason.value if shown.placement.reason is not None else ""
    notes = annotations_of(job)
    return Explanation(
        kind,
        f"{namespace_of(job)}/{job.get('metadata', {}).get('name')}",
        state,
        dict(asked),
        pinned,
        notes.get(CLUSTER_SELECTOR_ANNOTATION),
        notes.get(WORKER_AFFINITY_ANNOTATION),
        policy,
        worker,
        decision,
        reason,
        shown.placement.summary,
        rows,
    )


def _decision(
    adapter: GenericJob, job: Obj, placed: str | None, chosen: str | None, summary: str
) -> tuple[str, str, str | None]:
    """(state, the decision's line, the worker it names)."""
    now = f"now it would go to worker {chosen}" if chosen else f"now it could go nowhere: {summary}"
    finish = adapter.finish(job)
    if finish is not None:
        where = f" on worker {placed}" if placed else ""
        return (
            "Finished",
            f"finished{where} ({finish.reason or ('Complete' if finish.succeeded else 'Failed')})",
            placed,
        )
    if placed:
        return "Placed", f"placed on worker {placed}", placed
    if adapter.is_suspended(job):
        return "Suspended", f"suspended: not placed until it is resumed; {now}", chosen
    if chosen:
        return "Waiting", f"not placed yet; {now}", chosen
    return "Waiting", f"waiting: {summary}", None


def explain_in_manager(model: ReadModel, kind: str, key: str) -> Explanation | None:
    """``kind`` Job ``namespace/name`` explained from the running manager's own state; None when the manager has
    no such Job of its own."""
    found = model.job(kind, key)
    if found is None:
        return None
    adapter, job = found
    return explain(adapter, job, model.identity, model.policy, model.workers(), model.turn)
