"""``lifecycle.decide`` as table tests: observed state in, actions out. No server, no sleeps; the clock is ``NOW``."""

from __future__ import annotations

import copy
import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from multiqueue.api.types import NORMAL, WARNING, Event
from multiqueue.dispatch.adapters.declared import JOBGROUP, DeclaredAdapter
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.decision import (
    CACHE_WAIT,
    REJECTED_RETRY,
    REJECTED_RETRY_MAX,
    WORKER_BUSY_RETRY,
    Actions,
    Observed,
    Rejection,
    StatusRejection,
    Waiting,
)
from multiqueue.dispatch.generic import GenericJob
from multiqueue.dispatch.lifecycle import decide
from multiqueue.dispatch.mirror import (
    CLUSTER_LABEL,
    CLUSTER_SELECTOR_ANNOTATION,
    ORIGIN_LABEL,
    ORIGIN_UID_ANNOTATION,
    PIN_LABEL,
    PROGRESS_ANNOTATION,
    Identity,
    pending_progress,
)
from multiqueue.dispatch.placement import WaitReason, WorkerView, WorkerViews
from tests.unit.jobfixtures import T0, T1, job

ADAPTER = BatchJobAdapter()
MANAGED_BY = "multiqueue.dev/dispatcher"
US = Identity("multiqueue", MANAGED_BY)
OTHER = Identity("other", "example.com/other")
NOW = 1000.0


def view(name: str, active: bool = True, load: int = 0, **extra: Any) -> WorkerView:
    return WorkerView(name, extra.pop("labels", {}), active, load, **extra)


TWO = [view("worker-1"), view("worker-2", load=1)]  # LeastLoaded picks worker-1


def user_job(**spec: Any) -> dict[str, Any]:
    return job(managedBy=MANAGED_BY, **spec)


def placed(body: dict[str, Any], worker: str, identity: Identity = US) -> dict[str, Any]:
    """``body`` as ``identity`` leaves it once it placed it on ``worker``."""
    result = copy.deepcopy(body)
    result["metadata"].setdefault("labels", {})[CLUSTER_LABEL] = worker
    result["metadata"].setdefault("finalizers", []).append(identity.finalizer)
    return result


def mirror_of(
    user: dict[str, Any], identity: Identity = US, adapter: GenericJob = ADAPTER, **status: Any
) -> dict[str, Any]:
    mirror = adapter.build_mirror(user, identity.origin)
    mirror["metadata"]["uid"] = "mirror-uid"
    mirror["status"] = status
    return mirror


def run(
    user: dict[str, Any] | None,
    mirrors: dict[str, dict[str, Any]] | None = None,
    workers: list[WorkerView] = TWO,
    rejections: dict[str, Rejection] | None = None,
    now: float = NOW,
    adapter: GenericJob = ADAPTER,
) -> Actions:
    return decide(
        adapter,
        US,
        "LeastLoaded",
        Observed(user, mirrors or {}, WorkerViews.of(workers), rejections or {}, now),
    )


def is_suspended_body(body: dict[str, Any]) -> bool:
    return body["spec"].get("suspend") is True


# --- the user's Job gone, and Jobs that are not ours ------------------------------------------------------------


@pytest.mark.parametrize(
    ("workers", "deleted"),
    [
        pytest.param(TWO, ["worker-1", "worker-2"], id="all-active"),
        pytest.param([view("worker-1"), view("worker-2", active=False)], ["worker-1"], id="one-unreachable"),
        pytest.param([view("worker-1"), view("worker-2", active=False, lost=True)], ["worker-1"], id="one-lost"),
        pytest.param([view("worker-1", active=False), view("worker-2", active=False)], [], id="none-active"),
        pytest.param([view("worker-1")], ["worker-1"], id="worker-2-removed"),
    ],
)  # fmt: skip
def test_the_users_job_gone_deletes_its_mirrors_on_active_workers(
    workers: list[WorkerView], deleted: list[str]
) -> None:
    user = placed(user_job(), "worker-1")
    mirrors = {"worker-1": mirror_of(user), "worker-2": mirror_of(user)}
    actions = run(None, mirrors, workers)
    assert actions == Actions(delete_mirrors=[(w, mirrors[w]) for w in deleted])


def _of_another_manager(**spec: Any) -> dict[str, Any]:
    return placed(job(managedBy=OTHER.managed_by, **spec), "worker-1", OTHER)


def _finished(body: dict[str, Any]) -> dict[str, Any]:
    body["status"] = {
        "startTime": T0,
        "completionTime": T1,
        "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True"},
        ],
    }
    return body


def _deleted(body: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["deletionTimestamp"] = T1
    return body


@pytest.mark.parametrize(
    "user",
    [
        pytest.param(job(managedBy=OTHER.managed_by), id="other-managed-by"),
        pytest.param(job(), id="no-managed-by"),
        pytest.param(job(managedBy="kubernetes.io/job-controller"), id="job-controller"),
        pytest.param(_of_another_manager(), id="placed-by-another-manager"),
        pytest.param(_finished(_of_another_manager()), id="finished-placed-by-another-manager"),
        pytest.param(_deleted(_of_another_manager()), id="deleted-placed-by-another-manager"),
        pytest.param(_of_another_manager(suspend=True), id="suspended-placed-by-another-manager"),
    ],
)
def test_jobs_that_are_not_ours_are_never_touched(user: dict[str, Any]) -> None:
    theirs = mirror_of(user, OTHER)
    assert run(user, {"worker-1": theirs}) == Actions()
    assert run(user) == Actions()


def test_a_job_with_our_managed_by_is_ours_whatever_finalizer_it_carries() -> None:
    user = user_job()
    user["metadata"]["finalizers"] = [OTHER.finalizer]
    actions = run(user)
    assert actions.place_on == "worker-1"
    assert actions.create_mirror is not None and actions.create_mirror[0] == "worker-1"
    assert actions.create_mirror[1]["metadata"]["labels"][ORIGIN_LABEL] == US.origin


def test_another_managers_finalizer_is_never_removed() -> None:
    user = _finished(user_job())
    user["metadata"]["finalizers"] = [OTHER.finalizer]
    assert run(user) == Actions(), "not ours to remove: only our own finalizer is"
    mine = placed(user, "worker-1")
    assert run(mine) == Actions(remove_finalizer=True)


def test_a_job_carrying_our_finalizer_stays_ours_whatever_its_managed_by() -> None:
    user = _finished(placed(job(managedBy=OTHER.managed_by), "worker-1"))
    mirror = mirror_of(user)
    assert run(user, {"worker-1": mirror}) == Actions(delete_mirrors=[("worker-1", mirror)])
    assert run(user) == Actions(remove_finalizer=True)


# --- why a Job waits --------------------------------------------------------------------------------------------


def _labelled(**labels: str) -> dict[str, Any]:
    body = user_job()
    body["metadata"]["labels"].update(labels)
    return body


def _selecting(selector: str) -> dict[str, Any]:
    body = user_job()
    body["metadata"]["annotations"] = {CLUSTER_SELECTOR_ANNOTATION: selector}
    return body


EU_US = [view("worker-1", labels={"region": "eu"}), view("worker-2", labels={"region": "us"})]
FULL = [
    view("worker-1", load=2, max_jobs=2),
    view("worker-2", load=1, max_jobs=1),
    view("worker-3", active=False),
]


PENDING = (NORMAL, "Pending")


def _warning(reason: WaitReason) -> tuple[str, str]:
    return (WARNING, reason.value)


@pytest.mark.parametrize(
    ("user", "workers", "reason", "candidates", "event"),
    [
        pytest.param(user_job(suspend=True), TWO, WaitReason.SUSPENDED, set(), None, id="suspended"),
        pytest.param(user_job(), [], WaitReason.NO_WORKER, set(), _warning(WaitReason.NO_WORKER), id="no-worker"),
        pytest.param(_labelled(**{PIN_LABEL: "nowhere"}), TWO, WaitReason.NO_WORKER, set(), _warning(WaitReason.NO_WORKER), id="pinned-to-unknown-worker"),
        pytest.param(_selecting("region=asia"), EU_US, WaitReason.NO_MATCHING_WORKER, set(), _warning(WaitReason.NO_MATCHING_WORKER), id="selector-matches-nothing"),
        pytest.param(_selecting("region in (eu"), EU_US, WaitReason.INVALID_SELECTOR, set(), _warning(WaitReason.INVALID_SELECTOR), id="invalid-selector"),
        pytest.param(user_job(), [view("worker-1", active=False), view("worker-2", active=False)], WaitReason.NO_ACTIVE_WORKER, set(), PENDING, id="no-active-worker"),
        pytest.param(_selecting("region=us"), [*EU_US[:1], view("worker-2", False, labels={"region": "us"})], WaitReason.NO_ACTIVE_WORKER, set(), PENDING, id="no-active-matching-worker"),
        pytest.param(user_job(), FULL, WaitReason.NO_CAPACITY, {"worker-1", "worker-2"}, PENDING, id="no-capacity"),
        pytest.param(user_job(), [view("worker-1", free={"cpu": 0.5})], WaitReason.NO_CAPACITY, {"worker-1"}, PENDING, id="no-cpu"),
        pytest.param(user_job(), [view("worker-1", free={"cpu": 0.5}, capacity={"cpu": 0.5})], WaitReason.NEVER_FITS, set(), _warning(WaitReason.NEVER_FITS), id="never-fits-the-only-worker"),
        pytest.param(user_job(), [view("worker-1", free={"cpu": 0}, capacity={"cpu": 0.5}), view("worker-2", active=False, free={"cpu": 4}, capacity={"cpu": 4})], WaitReason.NO_CAPACITY, {"worker-1"}, PENDING, id="fits-only-an-unreachable-worker"),
        pytest.param(user_job(), [view("worker-1", max_jobs=0), view("worker-2", capacity={"cpu": 0.25}, free={"cpu": 0.25})], WaitReason.NEVER_FITS, set(), _warning(WaitReason.NEVER_FITS), id="never-fits-any-worker"),
        pytest.param(_selecting("region=eu"), [view("worker-1", labels={"region": "eu"}, capacity={"cpu": 0.5}, free={"cpu": 0.5}), view("worker-2", labels={"region": "us"})], WaitReason.NEVER_FITS, set(), _warning(WaitReason.NEVER_FITS), id="never-fits-the-matching-worker"),
        pytest.param(_labelled(**{CLUSTER_LABEL: "worker-1"}), [view("worker-1", accepting=False), view("worker-2")], WaitReason.WORKER_DRAINING, set(), PENDING, id="pinned-the-older-way-worker-draining"),
        pytest.param(user_job(), [view("worker-1", accepting=False)], WaitReason.NO_WORKER, set(), _warning(WaitReason.NO_WORKER), id="only-worker-draining"),
    ],
)  # fmt: skip
def test_why_a_job_waits(
    user: dict[str, Any],
    workers: list[WorkerView],
    reason: WaitReason,
    candidates: set[str],
    event: tuple[str, str] | None,
) -> None:
    """Waiting for what passes by itself is a Pending Event; waiting until someone changes something, a Warning
    named for the reason."""
    user["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    actions = run(user, workers=workers)
    assert actions.waiting is not None
    assert actions.waiting.reason == reason
    assert actions.waiting.candidates == frozenset(candidates)
    expected_events = [] if event is None else [Event(*event, actions.waiting.message)]
    assert actions.events == expected_events
    assert actions == Actions(waiting=actions.waiting, events=expected_events), "nothing is placed or created"


def test_a_job_placed_on_an_unreachable_worker_waits_for_it_and_creates_nothing() -> None:
    user = placed(user_job(), "worker-2")
    workers = [view("worker-1"), view("worker-2", active=False, reason="ClientConnectionFailed")]
    actions = run(user, workers=workers)
    assert actions == Actions(waiting=Waiting(WaitReason.WORKER_INACTIVE, "worker worker-2 is not active"))


# --- slow and held workers ----------------------------------------------------------------------------------------


def _slow(worker: str, workers: list[WorkerView] = TWO) -> list[WorkerView]:
    return [dataclasses.replace(w, slow=w.name == worker) for w in workers]


def _all_slow(workers: list[WorkerView] = TWO) -> list[WorkerView]:
    return [dataclasses.replace(w, slow=w.active) for w in workers]


_PLACED_1 = placed(user_job(), "worker-1")
_PROGRESS_USER = placed(user_job(completionMode="Indexed", completions=4, parallelism=2), "worker-1")
_PROGRESS_USER["status"] = {"startTime": T0, "succeeded": 1, "completedIndexes": "0"}
_SEEDING = mirror_of(_PROGRESS_USER)
_SEEDING["metadata"]["annotations"][PROGRESS_ANNOTATION] = '{"completedIndexes":"0","succeeded":1}'
_SEEDING["spec"]["suspend"] = True
_SEEDED = {**_SEEDING, "status": {"succeeded": 1, "completedIndexes": "0"}}
_STALE = mirror_of(_PLACED_1)
_STALE["metadata"]["annotations"][ORIGIN_UID_ANNOTATION] = "old-uid"


@pytest.mark.parametrize(
    ("user", "mirrors", "workers"),
    [
        pytest.param(user_job(), {}, _all_slow(), id="create-on-placement"),
        pytest.param(_PLACED_1, {}, _slow("worker-1"), id="create-when-placed"),
        pytest.param(None, {"worker-2": mirror_of(_PLACED_1)}, _slow("worker-2"), id="delete-user-gone"),
        pytest.param(_PLACED_1, {"worker-1": mirror_of(_PLACED_1), "worker-2": mirror_of(_PLACED_1)}, _slow("worker-2"), id="delete-stale-placement"),
        pytest.param(_PLACED_1, {"worker-1": mirror_of(_PLACED_1), "worker-2": _STALE}, _slow("worker-2"), id="delete-earlier-job"),
        pytest.param(_finished(copy.deepcopy(_PLACED_1)), {"worker-1": mirror_of(_PLACED_1)}, _slow("worker-1"), id="delete-finished"),
        pytest.param(placed(user_job(suspend=True), "worker-1"), {"worker-1": mirror_of(_PLACED_1)}, _slow("worker-1"), id="suspend"),
        pytest.param(_PROGRESS_USER, {"worker-1": _SEEDING}, _slow("worker-1"), id="seed-progress"),
        pytest.param(_PROGRESS_USER, {"worker-1": _SEEDED}, _slow("worker-1"), id="resume-seeded"),
        pytest.param(placed(user_job(), "worker-3"), {}, _all_slow([*TWO, view("worker-3", False, lost=True)]), id="redispatch"),
    ],
)  # fmt: skip
def test_a_slow_worker_touched_means_look_again_later_and_nothing_else(
    user: dict[str, Any] | None, mirrors: dict[str, dict[str, Any]], workers: list[WorkerView]
) -> None:
    slow = {w.name for w in workers if w.slow}
    calm = run(user, mirrors, [dataclasses.replace(w, slow=False) for w in workers])
    touched = {w for w, _ in calm.delete_mirrors}
    touched |= {t[0] for t in (calm.create_mirror, calm.seed_progress, calm.suspend_mirror) if t is not None}
    assert touched & slow, "the same sync with a responsive worker does ask something of it"
    assert run(user, mirrors, workers) == Actions(requeue_after=WORKER_BUSY_RETRY)


_SUSPENDED_MIRROR = mirror_of(_PLACED_1)
_SUSPENDED_MIRROR["spec"]["suspend"] = True


def _unreachable(worker: str) -> list[WorkerView]:
    return [
        dataclasses.replace(w, active=False, reason="ClientConnectionFailed") if w.name == worker else w
        for w in TWO
    ]


@pytest.mark.parametrize(
    ("user", "mirrors"),
    [
        pytest.param(placed(user_job(suspend=True), "worker-1"), {"worker-1": mirror_of(_PLACED_1)}, id="suspend"),
        pytest.param(_PLACED_1, {"worker-1": _SUSPENDED_MIRROR}, id="resume"),
        pytest.param(_PROGRESS_USER, {"worker-1": _SEEDING}, id="seed-progress"),
        pytest.param(_PROGRESS_USER, {"worker-1": _SEEDED}, id="resume-seeded"),
    ],
)  # fmt: skip
def test_nothing_is_asked_of_an_unreachable_worker(
    user: dict[str, Any], mirrors: dict[str, dict[str, Any]]
) -> None:
    calm = run(user, mirrors)
    assert "worker-1" in {t[0] for t in (calm.seed_progress, calm.suspend_mirror) if t is not None}, (
        "the same sync with worker-1 answering does ask something of it"
    )
    # Not even a retry: worker-1's return syncs every Job placed there.
    assert run(user, mirrors, _unreachable("worker-1")) == Actions()


def test_a_slow_worker_not_touched_does_not_hold_a_sync() -> None:
    user = _PLACED_1
    mirror = mirror_of(user, startTime=T0, active=1)
    actions = run(user, {"worker-1": mirror}, _slow("worker-1"))
    assert actions == Actions(status={"startTime": T0, "active": 1}), "status is read from the cache"
    assert run(user_job(), workers=_slow("worker-2")).place_on == "worker-1"


@pytest.mark.parametrize(
    ("workers", "placed_on", "candidates"),
    [
        pytest.param([view("worker-1", held=True), view("worker-2", load=1)], "worker-2", set(), id="other-worker-free"),
        pytest.param([view("worker-1", held=True)], None, {"worker-1"}, id="only-worker-held"),
        pytest.param([view("worker-1", held=True), view("worker-2", load=1, max_jobs=1)], None, {"worker-1", "worker-2"}, id="other-worker-full"),
        pytest.param([view("worker-1", held=True), view("worker-2", active=False)], None, {"worker-1"}, id="other-worker-inactive"),
    ],
)  # fmt: skip
def test_a_held_worker_is_kept_for_jobs_ranked_before(
    workers: list[WorkerView], placed_on: str | None, candidates: set[str]
) -> None:
    actions = run(user_job(), workers=workers)
    assert actions.place_on == placed_on
    if placed_on is None:
        assert actions.waiting is not None
        assert actions.waiting.reason == WaitReason.NO_CAPACITY
        assert actions.waiting.candidates == frozenset(candidates)
        assert actions.hold is None and actions.create_mirror is None
    else:
        assert actions.hold == {placed_on: {}}
        assert actions.waiting is None


# --- progress: a mirror that goes on from where the user's Job stands, at every crash point ---------------------

PROGRESS = {"succeeded": 1, "completedIndexes": "0"}
LOST_1 = [view("worker-1", False, 1, lost=True, reason="ClientConnectionFailed"), view("worker-2")]


def _progressed(worker: str, suspend: bool = False) -> dict[str, Any]:
    user = placed(user_job(completionMode="Indexed", completions=4, parallelism=2, suspend=suspend), worker)
    user["status"] = {"startTime": T0, "active": 2, "ready": 1, **PROGRESS}
    return user


def _assert_mirror_waits_for_progress(body: dict[str, Any]) -> None:
    assert is_suspended_body(body), "it may not run before it holds the progress"
    assert json.loads(body["metadata"]["annotations"][PROGRESS_ANNOTATION]) == PROGRESS
    assert pending_progress(body) == PROGRESS
    assert "status" not in body


def test_redispatch_creates_a_suspended_mirror_carrying_the_progress() -> None:
    user = _progressed("worker-1")
    actions = run(user, {"worker-1": mirror_of(user, active=2)}, LOST_1)
    assert actions.redispatch == ("worker-1", "worker-2")
    assert actions.hold == {"worker-2": {}}
    assert actions.create_mirror is not None and actions.create_mirror[0] == "worker-2"
    _assert_mirror_waits_for_progress(actions.create_mirror[1])
    assert actions.status == {"startTime": T0, "active": 0, "ready": 0, **PROGRESS}
    assert actions.delete_mirrors == []
    assert [(e.type, e.reason) for e in actions.events] == [(WARNING, "Redispatched")]


def test_label_moved_but_no_mirror_yet_creates_the_suspended_mirror_with_progress() -> None:
    user = _progressed("worker-2")  # crashed after moving the label, before creating the mirror
    actions = run(user, {}, LOST_1)
    assert actions.redispatch is None and actions.place_on is None
    assert actions.create_mirror is not None and actions.create_mirror[0] == "worker-2"
    _assert_mirror_waits_for_progress(actions.create_mirror[1])


def _created(user: dict[str, Any], **status: Any) -> dict[str, Any]:
    """The mirror the redispatch created, as its worker shows it (spec.suspend true, progress annotation)."""
    body = run(user, {}, LOST_1).create_mirror
    assert body is not None
    mirror = copy.deepcopy(body[1])
    mirror["metadata"]["uid"] = "mirror-uid"
    mirror["status"] = status
    return mirror


@pytest.mark.parametrize(
    "status",
    [
        pytest.param({}, id="empty"),
        pytest.param({"succeeded": 1}, id="partly"),
        pytest.param({"succeeded": 0, "completedIndexes": "0"}, id="wrong-count"),
        pytest.param({"conditions": [{"type": "Suspended", "status": "True"}]}, id="worker-wrote-suspended"),
    ],
)
@pytest.mark.parametrize("suspend", [False, True], ids=["running", "user-suspended"])
def test_a_mirror_lacking_its_progress_is_only_seeded(status: dict[str, Any], suspend: bool) -> None:
    user = _progressed("worker-2", suspend)
    mirror = _created(user, **status)
    actions = run(user, {"worker-2": mirror}, LOST_1)
    assert actions == Actions(seed_progress=("worker-2", {**mirror, "status": {**status, **PROGRESS}}))


def test_a_seeded_mirror_is_let_run_and_its_status_is_not_synced_yet() -> None:
    user = _progressed("worker-2")
    mirror = _created(user, startTime=T1, **PROGRESS)
    actions = run(user, {"worker-2": mirror}, LOST_1)
    assert actions == Actions(suspend_mirror=("worker-2", False))


def test_a_seeded_mirror_stays_suspended_while_the_user_suspends_the_job() -> None:
    user = _progressed("worker-2", suspend=True)
    mirror = _created(user, **PROGRESS)
    actions = run(user, {"worker-2": mirror}, LOST_1)
    assert actions == Actions(), "no resume, and no status while the annotation is there"


def test_once_let_run_its_status_follows_again() -> None:
    user = _progressed("worker-2")
    mirror = _created(user, startTime=T1, active=2, **PROGRESS)
    del mirror["metadata"]["annotations"][PROGRESS_ANNOTATION]
    mirror["spec"]["suspend"] = False
    actions = run(user, {"worker-2": mirror}, LOST_1)
    assert actions == Actions(status={"startTime": T0, "active": 2, **PROGRESS})


@pytest.mark.parametrize(
    ("adapter", "user"),
    [
        pytest.param(ADAPTER, placed(user_job(), "worker-1"), id="job-without-progress"),
        pytest.param(DeclaredAdapter(JOBGROUP), None, id="jobgroup"),
    ],
)
def test_a_mirror_with_nothing_to_go_on_from_runs_at_once(
    adapter: GenericJob, user: dict[str, Any] | None
) -> None:
    if user is None:
        user = placed(_jobgroup(), "worker-1")
        user["status"] = {"active": 2}
    actions = run(user, {}, LOST_1, adapter=adapter)
    assert actions.create_mirror is not None and actions.create_mirror[0] == "worker-2"
    body = actions.create_mirror[1]
    assert not is_suspended_body(body) and PROGRESS_ANNOTATION not in body["metadata"]["annotations"]


# --- a worker refusing the mirror -------------------------------------------------------------------------------


def _rejection(
    worker: str = "worker-1",
    reason: str = "Forbidden",
    message: str = "exceeded quota: compute",
    at: float = NOW - 1,
    **extra: Any,
) -> Rejection:
    return Rejection(worker, reason, message, at, **extra)


@pytest.mark.parametrize(
    ("rejection", "event_reason", "in_message"),
    [
        pytest.param(_rejection(), "MirrorRejected", "exceeded quota: compute", id="forbidden"),
        pytest.param(_rejection(reason="Invalid", message="spec.x: Invalid value"), "MirrorRejected", "spec.x: Invalid value", id="invalid"),
        pytest.param(_rejection(at=NOW - REJECTED_RETRY + 0.5), "MirrorRejected", "exceeded quota", id="last-moment-of-back-off"),
        pytest.param(_rejection(at=NOW - 2 * REJECTED_RETRY + 1, attempts=2), "MirrorRejected", "exceeded quota", id="doubled-back-off"),
        pytest.param(_rejection(reason="AlreadyExists", existing_origin=""), "MirrorConflict", "did not create", id="exists-not-a-mirror"),
        pytest.param(_rejection(reason="AlreadyExists", existing_origin="other"), "MirrorConflict", "another manager (other)", id="exists-of-another-manager"),
    ],
)  # fmt: skip
def test_a_refused_mirror_lets_the_placement_go(
    rejection: Rejection, event_reason: str, in_message: str
) -> None:
    actions = run(placed(user_job(), "worker-1"), rejections={"worker-1": rejection})
    assert actions.waiting is not None
    message = actions.waiting.message
    assert in_message in message and "worker-1" in message
    assert actions == Actions(
        unplace=True,
        events=[Event(WARNING, event_reason, message)],
        waiting=Waiting(WaitReason(event_reason), message),
    )


def test_a_mirror_of_ours_already_there_means_the_cache_is_behind() -> None:
    rejection = _rejection(reason="AlreadyExists", existing_origin=US.origin)
    actions = run(placed(user_job(), "worker-1"), rejections={"worker-1": rejection})
    assert actions == Actions(requeue_after=min(CACHE_WAIT, rejection.retry_at() - NOW))


def test_a_new_job_goes_to_a_responsive_worker_rather_than_a_slow_one() -> None:
    assert run(user_job(), workers=_slow("worker-1")).place_on == "worker-2"
    assert run(user_job(), workers=_slow("worker-2")).place_on == "worker-1"


def test_an_old_already_exists_of_ours_does_not_stop_the_mirror_being_created() -> None:
    rejection = _rejection(
        reason="AlreadyExists", existing_origin=US.origin, at=NOW - 10 * REJECTED_RETRY_MAX
    )
    actions = run(placed(user_job(), "worker-1"), rejections={"worker-1": rejection})
    assert actions.create_mirror is not None and actions.create_mirror[0] == "worker-1"


def test_after_its_back_off_the_placed_worker_is_asked_again() -> None:
    rejection = _rejection(at=NOW - REJECTED_RETRY)
    actions = run(placed(user_job(), "worker-1"), rejections={"worker-1": rejection})
    assert actions.unplace is False
    assert actions.create_mirror is not None and actions.create_mirror[0] == "worker-1"


def test_an_unplaced_job_goes_to_a_worker_that_did_not_refuse_it() -> None:
    actions = run(user_job(), rejections={"worker-1": _rejection()})
    assert actions.place_on == "worker-2" and actions.hold == {"worker-2": {}}
    assert actions.create_mirror is not None and actions.create_mirror[0] == "worker-2"
    assert actions.waiting is None and actions.requeue_after is None


# worker-1 may be asked again at NOW + 5, worker-2 at NOW + 18 (its second refusal: twice the back-off).
EVERY_WORKER_REFUSED = {
    "worker-1": _rejection("worker-1", at=NOW - 5),
    "worker-2": _rejection("worker-2", message="webhook said no", at=NOW - 2, attempts=2),
}


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        pytest.param(NOW, None, id="both-in-back-off"),
        pytest.param(NOW + 4.5, None, id="just-before-retry"),
        pytest.param(NOW + 5, "worker-1", id="at-retry"),
        pytest.param(NOW + 17, "worker-1", id="one-back"),
        pytest.param(NOW + 18, "worker-1", id="both-back"),
    ],
)
def test_a_job_every_worker_refused_waits_until_the_earliest_retry(now: float, expected: str | None) -> None:
    actions = run(user_job(), rejections=EVERY_WORKER_REFUSED, now=now)
    assert actions.place_on == expected
    if expected is not None:
        assert actions.waiting is None and actions.requeue_after is None
        return
    assert actions.waiting is not None and actions.waiting.reason == WaitReason.MIRROR_REJECTED
    assert "webhook said no" in actions.waiting.message, "the latest refusal is the one told"
    assert actions.requeue_after == pytest.approx(NOW + 5 - now)
    assert actions.events == [Event(WARNING, "MirrorRejected", actions.waiting.message)]
    assert actions.hold is None and actions.create_mirror is None


def test_a_pinned_job_refused_by_its_worker_waits_with_that_reason() -> None:
    user = _labelled(**{PIN_LABEL: "worker-2"})
    actions = run(user, rejections={"worker-2": _rejection("worker-2")})
    assert actions.waiting is not None and actions.waiting.reason == WaitReason.MIRROR_REJECTED
    assert actions.requeue_after == pytest.approx(REJECTED_RETRY - 1)


def test_a_redispatch_avoids_a_worker_that_just_refused_the_mirror() -> None:
    workers = [*LOST_1, view("worker-3", load=5)]
    actions = run(_progressed("worker-1"), {}, workers, rejections={"worker-2": _rejection("worker-2")})
    assert actions.redispatch == ("worker-1", "worker-3")


@pytest.mark.parametrize(
    ("attempts", "backoff"),
    [
        pytest.param(1, REJECTED_RETRY, id="1"),
        pytest.param(2, 2 * REJECTED_RETRY, id="2"),
        pytest.param(3, 4 * REJECTED_RETRY, id="3"),
        pytest.param(5, 16 * REJECTED_RETRY, id="5"),
        pytest.param(6, REJECTED_RETRY_MAX, id="6-capped"),
        pytest.param(40, REJECTED_RETRY_MAX, id="40-capped"),
    ],
)
def test_a_rejections_back_off_doubles_up_to_a_limit(attempts: int, backoff: float) -> None:
    assert Rejection("worker-1", "Forbidden", "no", at=NOW, attempts=attempts).retry_at() == NOW + backoff


# --- JobGroup: the same decisions for another kind ----------------------------------------------------------------


def _jobgroup(cpu: str = "500m") -> dict[str, Any]:
    return {
        "apiVersion": "example.multiqueue.dev/v1",
        "kind": "JobGroup",
        "metadata": {"name": "trainer", "namespace": "default", "uid": "uid-g"},
        "spec": {
            "managedBy": MANAGED_BY,
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "template": {
                                "spec": {
                                    "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}]
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


@pytest.mark.parametrize(
    ("free", "placed_on"),
    [
        pytest.param(2.0, "worker-1", id="fits"),
        pytest.param(1.5, None, id="four-pods-of-half-a-cpu-do-not-fit-in-one-and-a-half"),
    ],
)
def test_a_jobgroup_counts_against_cpu_quotas(free: float, placed_on: str | None) -> None:
    actions = run(
        _jobgroup(), workers=[view("worker-1", free={"cpu": free})], adapter=DeclaredAdapter(JOBGROUP)
    )
    assert actions.place_on == placed_on
    if placed_on is not None:
        assert actions.hold == {"worker-1": {"cpu": 2.0}}
    else:
        assert actions.waiting == Waiting(
            WaitReason.NO_CAPACITY,
            "0/1 workers can take this Job: 1 has no capacity now (worker-1: cpu 0/1.5)",
            frozenset({"worker-1"}),
        )


# --- a finished Job: its mirror kept for reading logs, then removed; how it ended told in an Event -------------

FINISHED_AT = datetime(2026, 1, 1, 0, 5, tzinfo=UTC).timestamp()  # T1: the finish condition's time
KEEP = 3600.0


def _ended(body: dict[str, Any], type_: str, reason: str, message: str = "") -> dict[str, Any]:
    when = datetime.fromtimestamp(FINISHED_AT, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": when,
    }
    target = {**condition, "type": "FailureTarget" if type_ == "Failed" else "SuccessCriteriaMet"}
    body["status"] = {"startTime": T0, "conditions": [target, condition]}
    if type_ == "Complete":
        body["status"] |= {"completionTime": when, "succeeded": 1}
    else:
        body["status"]["failed"] = 1
    return body


_DONE = _ended(placed(user_job(), "worker-1"), "Complete", "CompletionsReached")


DRAINING_1 = [view("worker-1", accepting=False), view("worker-2")]


@pytest.mark.parametrize(
    ("user", "now", "mirrors", "expected", "workers"),
    [
        pytest.param(_DONE, FINISHED_AT + 1, {"worker-1": mirror_of(_DONE)}, Actions(requeue_after=KEEP - 1), TWO, id="kept-until-its-ttl"),
        pytest.param(_DONE, FINISHED_AT + KEEP, {"worker-1": mirror_of(_DONE)}, Actions(delete_mirrors=[("worker-1", mirror_of(_DONE))]), TWO, id="removed-at-its-ttl"),
        pytest.param(_DONE, FINISHED_AT + KEEP + 1, {}, Actions(remove_finalizer=True), TWO, id="gone-then-the-finalizer-goes"),
        pytest.param(_DONE, FINISHED_AT + 1, {}, Actions(remove_finalizer=True), TWO, id="no-mirror-nothing-to-keep"),
        pytest.param(_deleted(copy.deepcopy(_DONE)), FINISHED_AT + 1, {"worker-1": mirror_of(_DONE)}, Actions(delete_mirrors=[("worker-1", mirror_of(_DONE))]), TWO, id="deleting-the-job-takes-it-sooner"),
        pytest.param(_DONE, FINISHED_AT + 1, {"worker-1": mirror_of(_DONE), "worker-2": mirror_of(_DONE)}, Actions(delete_mirrors=[("worker-2", mirror_of(_DONE))], requeue_after=KEEP - 1), TWO, id="a-stale-copy-elsewhere-goes-at-once"),
        pytest.param(_DONE, FINISHED_AT + 1, {"worker-1": mirror_of(_DONE)}, Actions(delete_mirrors=[("worker-1", mirror_of(_DONE))]), DRAINING_1, id="its-worker-draining-removed-at-once"),
        pytest.param(_finished(placed(user_job(), "worker-1")), FINISHED_AT + 1, {"worker-1": mirror_of(_DONE)}, Actions(delete_mirrors=[("worker-1", mirror_of(_DONE))]), TWO, id="no-finish-time-removed-at-once"),
    ],
)  # fmt: skip
def test_a_finished_jobs_mirror_stays_for_its_ttl(
    user: dict[str, Any],
    now: float,
    mirrors: dict[str, dict[str, Any]],
    expected: Actions,
    workers: list[WorkerView],
) -> None:
    actions = decide(
        ADAPTER,
        US,
        "LeastLoaded",
        Observed(user, mirrors, WorkerViews.of(workers), {}, now),
        keep_finished=KEEP,
    )
    assert actions == expected


@pytest.mark.parametrize(
    ("mirror_status", "event"),
    [
        pytest.param(("Complete", "CompletionsReached", ""), Event(NORMAL, "Completed", "Job completed on worker worker-1"), id="complete"),
        pytest.param(("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"), Event(WARNING, "BackoffLimitExceeded", "Job has reached the specified backoff limit (on worker worker-1)"), id="backoff-limit"),
        pytest.param(("Failed", "DeadlineExceeded", ""), Event(WARNING, "DeadlineExceeded", "Job failed on worker worker-1"), id="no-message"),
    ],
)  # fmt: skip
def test_the_status_that_finishes_the_job_comes_with_an_event_saying_how(
    mirror_status: tuple[str, str, str], event: Event
) -> None:
    user = placed(user_job(), "worker-1")
    user["status"] = {"startTime": T0, "active": 1}
    mirror = _ended(mirror_of(user), *mirror_status)
    actions = run(user, {"worker-1": mirror})
    assert actions.status is not None and actions.status["conditions"] == mirror["status"]["conditions"], (
        actions
    )
    assert actions.events == [event]
    later = run({**user, "status": actions.status}, {"worker-1": mirror})
    assert later.events == [], "told once, when it finishes"


def test_a_job_asking_more_than_any_worker_has_says_so_and_what_each_lacks() -> None:
    user = user_job()
    user["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "64"}}
    workers = [view("worker-1", capacity={"cpu": 8.0}, free={"cpu": 8.0}), view("worker-2", max_jobs=0)]
    actions = run(user, workers=workers)
    assert actions.waiting == Waiting(
        WaitReason.NEVER_FITS,
        "0/2 workers can take this Job: 1 asks more cpu than it has in all (worker-1: cpu 8), "
        "1 takes no Jobs (worker-2: maxJobs 0)",
    )


def test_a_pinned_job_with_a_conflict_on_its_worker_keeps_waiting_with_the_conflict_as_a_warning() -> None:
    user = _labelled(**{PIN_LABEL: "worker-1"})
    conflict = _rejection("worker-1", reason="AlreadyExists", existing_origin="")
    actions = run(user, rejections={"worker-1": conflict})
    assert actions.waiting is not None and actions.waiting.reason == WaitReason.MIRROR_CONFLICT
    assert actions.events == [Event(WARNING, "MirrorConflict", actions.waiting.message)]
    assert actions.place_on is None and actions.create_mirror is None, "not run elsewhere"


# --- a status the management cluster refuses ---------------------------------------------------------------------


def _refused(status: dict[str, Any], at: float = NOW - 1, attempts: int = 1) -> StatusRejection:
    return StatusRejection(status, "Invalid", "status.active: Invalid value: 2: must be <= 1", at, attempts)


RUNNING = {"startTime": T0, "active": 2}
NOT_APPLIED = (
    "status from worker worker-1 not applied: the management cluster refused it (Invalid): "
    "status.active: Invalid value: 2: must be <= 1"
)


@pytest.mark.parametrize(
    ("rejection", "written", "requeue_after"),
    [
        (None, RUNNING, None),  # nothing refused: written
        (_refused(RUNNING), None, REJECTED_RETRY - 1),  # that status refused a second ago: not again yet
        (_refused(RUNNING, attempts=3), None, 4 * REJECTED_RETRY - 1),  # its back-off doubles
        (_refused(RUNNING, attempts=30), None, REJECTED_RETRY_MAX - 1),  # up to the longest
        (_refused(RUNNING, at=NOW - REJECTED_RETRY), RUNNING, None),  # back-off over: written again
        (_refused({**RUNNING, "active": 3}), RUNNING, None),  # another status than the refused one: written
    ],
    ids=["none", "refused", "doubling", "at-most", "back-off-over", "other-status"],
)
def test_a_status_the_management_cluster_refused_waits_its_back_off_with_a_warning(
    rejection: StatusRejection | None, written: dict[str, Any] | None, requeue_after: float | None
) -> None:
    user = placed(user_job(parallelism=2), "worker-1")
    mirror = mirror_of(user, **RUNNING)
    seen = Observed(user, {"worker-1": mirror}, WorkerViews.of(TWO), {}, NOW, status_rejection=rejection)
    actions = decide(ADAPTER, US, "LeastLoaded", seen)
    assert actions.status == written
    assert actions.requeue_after == requeue_after
    warned = [Event(WARNING, "StatusSyncRejected", NOT_APPLIED)] if written is None else []
    assert actions.events == warned
