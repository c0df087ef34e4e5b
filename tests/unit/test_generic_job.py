"""A kind offering only the GenericJob core is dispatched; the extras of the others are found by their type."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from multiqueue.api.meta import as_dict
from multiqueue.api.types import NORMAL, WARNING, Event, Obj, Resource
from multiqueue.dispatch.adapters.declared import JOBGROUP, DeclaredAdapter
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.decision import Actions, Observed, Waiting
from multiqueue.dispatch.generic import (
    Finish,
    GenericJob,
    JobWithPriorityClass,
    JobWithProgress,
    JobWithRerunStatus,
    PodSet,
    finish_of,
    priority_class_of,
    progress_of,
    rerun_status_of,
)
from multiqueue.dispatch.lifecycle import decide
from multiqueue.dispatch.mirror import CLUSTER_LABEL, PROGRESS_ANNOTATION, Identity, strip_for_mirror
from multiqueue.dispatch.placement import WaitReason, WorkerView, WorkerViews
from tests.unit.jobfixtures import T1, cond, job

MANAGED_BY = "multiqueue.dev/dispatcher"
US = Identity("multiqueue", MANAGED_BY)
NOW = datetime(2026, 1, 1, 1, 0, tzinfo=UTC).timestamp()  # an hour after T1


class TaskAdapter:
    """A kind with the core only: no PriorityClass, no progress to go on from, no status of its own for a rerun."""

    resource = Resource("example.multiqueue.dev", "v1", "tasks", "Task")

    def managed_by(self, obj: Obj) -> str | None:
        value = as_dict(obj.get("spec")).get("managedBy")
        return value if isinstance(value, str) else None

    def is_suspended(self, obj: Obj) -> bool:
        return as_dict(obj.get("spec")).get("suspend") is True

    def is_finished(self, obj: Obj) -> bool:
        return self.finish(obj) is not None

    def finish(self, obj: Obj) -> Finish | None:
        return finish_of(as_dict(obj.get("status")).get("conditions"), "Done", "Failed")

    def build_mirror(self, obj: Obj, origin: str) -> Obj:
        mirror = strip_for_mirror(obj, origin)
        spec = as_dict(mirror.get("spec"))
        spec.pop("managedBy", None)
        spec["suspend"] = False
        return mirror

    def suspend_patch(self, suspend: bool) -> Obj:
        return {"spec": {"suspend": suspend}}

    def synced_status(self, user: Obj, mirror: Obj) -> Obj | None:
        status = as_dict(mirror.get("status"))
        return None if status == as_dict(user.get("status")) else dict(status)

    def pod_sets(self, obj: Obj) -> list[PodSet]:
        return [PodSet("main", 1, {"cpu": 1.0})]


TASK: GenericJob = TaskAdapter()  # the core is all a kind needs to be a GenericJob


@pytest.mark.parametrize(
    ("adapter", "priority_class", "progress", "rerun_status"),
    [
        pytest.param(BatchJobAdapter(), True, True, True, id="Job"),
        pytest.param(DeclaredAdapter(JOBGROUP), True, True, True, id="JobGroup"),
        pytest.param(TaskAdapter(), False, False, False, id="core-only"),
    ],
)
def test_extras_are_found_by_type(
    adapter: GenericJob, priority_class: bool, progress: bool, rerun_status: bool
) -> None:
    assert isinstance(adapter, JobWithPriorityClass) == priority_class
    assert isinstance(adapter, JobWithProgress) == progress
    assert isinstance(adapter, JobWithRerunStatus) == rerun_status


def _running_job() -> dict[str, Any]:
    body = job(completions=3)
    body["spec"]["template"]["spec"]["priorityClassName"] = "high"
    body["status"] = {"active": 1, "ready": 1, "succeeded": 2}
    return body


@pytest.mark.parametrize(
    ("adapter", "obj", "expected"),
    [
        pytest.param(BatchJobAdapter(), _running_job(), ("high", {"succeeded": 2}, {"active": 0, "ready": 0, "succeeded": 2}), id="Job-has-them-all"),
        pytest.param(DeclaredAdapter(JOBGROUP), {"spec": {"priorityClassName": "low"}, "status": {"active": 2}}, ("low", None, {"active": 0}), id="JobGroup-starts-over"),
        pytest.param(TaskAdapter(), _running_job(), (None, None, None), id="core-only-gets-the-defaults"),
    ],
)  # fmt: skip
def test_each_extra_or_its_default(
    adapter: GenericJob, obj: dict[str, Any], expected: tuple[str | None, Obj | None, Obj | None]
) -> None:
    assert (
        priority_class_of(adapter, obj),
        progress_of(adapter, obj),
        rerun_status_of(adapter, obj),
    ) == expected


# --- a core-only kind through every stage of the decide step ----------------------------------------------------


def task(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.multiqueue.dev/v1",
        "kind": "Task",
        "metadata": {"name": "t", "namespace": "default", "uid": "uid-t"},
        "spec": {"managedBy": MANAGED_BY, **spec},
    }


def placed(body: dict[str, Any], worker: str, **status: Any) -> dict[str, Any]:
    result = copy.deepcopy(body)
    result["metadata"]["labels"] = {CLUSTER_LABEL: worker}
    result["metadata"]["finalizers"] = [US.finalizer]
    if status:
        result["status"] = status
    return result


def mirror_of(user: dict[str, Any], **status: Any) -> dict[str, Any]:
    mirror = TASK.build_mirror(user, US.origin)
    mirror["status"] = status
    return mirror


def view(name: str, **extra: Any) -> WorkerView:
    return WorkerView(name, {}, extra.pop("active", True), 0, **extra)


def run(
    user: dict[str, Any],
    mirrors: dict[str, dict[str, Any]] | None = None,
    workers: list[WorkerView] | None = None,
) -> Actions:
    seen = Observed(user, mirrors or {}, WorkerViews.of(workers or [view("w1"), view("w2")]), {}, now=NOW)
    return decide(TASK, US, "Ordered", seen)


def test_a_new_task_is_placed_and_its_mirror_made_to_run_at_once() -> None:
    user = task()
    actions = run(user)
    assert actions == Actions(
        hold={"w1": {"cpu": 1.0}},
        place_on="w1",
        create_mirror=("w1", TASK.build_mirror(user, US.origin)),
        events=[Event(NORMAL, "Dispatched", "Job dispatched to worker w1")],
    )
    assert actions.create_mirror is not None
    assert PROGRESS_ANNOTATION not in actions.create_mirror[1]["metadata"]["annotations"]


def test_a_suspended_task_waits_and_its_mirror_follows_the_suspension() -> None:
    assert run(task(suspend=True)).waiting == Waiting(WaitReason.SUSPENDED, "the Job is suspended")
    user = placed(task(suspend=True), "w1")
    assert run(user, {"w1": mirror_of(user)}).suspend_mirror == ("w1", True)


def test_a_placed_tasks_status_follows_its_mirror() -> None:
    user = placed(task(), "w1")
    actions = run(user, {"w1": mirror_of(user, active=1)})
    assert actions == Actions(status={"active": 1})


def test_a_task_on_a_lost_worker_runs_elsewhere_from_the_start_with_its_status_left_as_it_is() -> None:
    user = placed(task(), "w1", active=1)
    actions = run(user, {"w1": mirror_of(user, active=1)}, [view("w1", active=False, lost=True), view("w2")])
    assert actions.redispatch == ("w1", "w2")
    assert actions.status is None, "no rerun status: the next mirror's status replaces it"
    assert actions.create_mirror == ("w2", TASK.build_mirror(user, US.origin)), "no progress: not suspended"
    assert actions.events[0].type == WARNING and actions.events[0].reason == "Redispatched"


def test_a_finished_task_says_how_then_its_mirror_and_finalizer_go() -> None:
    user = placed(task(), "w1", active=1)
    done = {"conditions": [cond("Done", reason="AllDone", time=T1)]}
    synced = run(user, {"w1": mirror_of(user, **done)})
    assert synced.status == done
    assert synced.events == [Event(NORMAL, "Completed", "Task completed on worker w1")]
    finished = placed(task(), "w1", **done)
    assert run(finished, {"w1": mirror_of(finished, **done)}).delete_mirrors == [
        ("w1", mirror_of(finished, **done))
    ]
    assert run(finished) == Actions(remove_finalizer=True)
