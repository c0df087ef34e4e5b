"""Properties of the status rules: every write a correct Job controller makes is accepted, and a write that
breaks a rule is refused, whatever history led there.

The model below plays a Job controller over random pod events: pods are created, become ready, succeed or fail;
finished pods go to ``uncountedTerminatedPods`` first and are counted once their finalizer is gone; Indexed Jobs
grow ``completedIndexes``; the user suspends and resumes (``startTime`` restarts); the Job ends with FailureTarget
then Failed, or SuccessCriteriaMet then Complete, once nothing runs and nothing is left uncounted.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from multiqueue.api import jobs
from multiqueue.api.indexes import format_indexes
from multiqueue.api.jobstatus import validate_job_status_update
from multiqueue.api.jobupdate import validate_job_update
from multiqueue.api.meta import format_time, set_condition
from tests.unit.jobfixtures import job

START = datetime(2026, 1, 1, tzinfo=UTC)
EVENTS = ("create", "ready", "succeed", "fail", "settle", "flush", "suspend", "resume", "nothing")
# Enough events to finish any Job the strategies below build, whatever happened before.
FINISH = ("resume", "create", "ready", "succeed", "settle", "flush") * 12


@dataclasses.dataclass
class Pod:
    uid: str
    index: int | None
    state: str = "running"  # running, ready, terminating, succeeded, failed
    recorded: bool = False  # in uncountedTerminatedPods
    released: bool = False  # finalizer removed: the next sync counts it

    @property
    def active(self) -> bool:
        return self.state in ("running", "ready")

    @property
    def finished(self) -> bool:
        return self.state in ("succeeded", "failed")


class Controller:
    """A small Job controller whose every status write goes through the API server's status validation."""

    def __init__(
        self, indexed: bool, completions: int, parallelism: int, backoff_limit: int, suspend: bool
    ) -> None:
        spec: dict[str, Any] = {
            "completions": completions,
            "parallelism": parallelism,
            "backoffLimit": backoff_limit,
            "suspend": suspend,
        }
        if indexed:
            spec["completionMode"] = "Indexed"
        self.job = job(**spec)
        self.indexed = indexed
        self.pods: list[Pod] = []
        self.clock = START
        self.serial = 0
        self.counted_succeeded = 0
        self.counted_failed = 0
        self.completed: set[int] = set()

    @property
    def status(self) -> dict[str, Any]:
        return jobs.status_of(self.job)

    @property
    def ending(self) -> bool:
        return jobs.has_condition(self.job, jobs.FAILURE_TARGET) or jobs.has_condition(
            self.job, jobs.SUCCESS_CRITERIA_MET
        )

    def step(self, event: str) -> list[str]:
        """What happened to the pods (or the spec), then one sync; the problems the server found."""
        getattr(self, f"_on_{event}")()
        return self._write(self._sync())

    # --- the world ------------------------------------------------------------------------------------------

    def _first(self, *states: str) -> Pod | None:
        return next((p for p in self.pods if p.state in states), None)

    def _on_create(self) -> None:
        if jobs.is_suspended(self.job) or self.ending:
            return
        spec = jobs.spec_of(self.job)
        busy = {p.index for p in self.pods if p.active or p.state == "terminating"}
        if self.indexed:
            wanted = [i for i in range(spec["completions"]) if i not in self.completed and i not in busy]
        else:
            remaining = spec["completions"] - self.counted_succeeded - self._uncounted("succeeded")
            wanted = [None] * max(remaining, 0)
        room = spec["parallelism"] - sum(1 for p in self.pods if p.active)
        for index in wanted[: max(room, 0)]:
            self.serial += 1
            self.pods.append(Pod(f"pod-{self.serial}", index))

    def _on_ready(self) -> None:
        if pod := self._first("running"):
            pod.state = "ready"

    def _on_succeed(self) -> None:
        if pod := self._first("ready", "running"):
            pod.state = "succeeded"

    def _on_fail(self) -> None:
        if pod := self._first("ready", "running"):
            pod.state = "failed"

    def _on_settle(self) -> None:
        """Deleted pods are gone; a pod the controller deleted is not counted (its finalizer was removed)."""
        self.pods = [p for p in self.pods if p.state != "terminating"]

    def _on_flush(self) -> None:
        for pod in self.pods:
            pod.released = pod.released or pod.recorded

    def _on_nothing(self) -> None:
        pass

    def _on_suspend(self) -> None:
        self._set_suspend(True)

    def _on_resume(self) -> None:
        self._set_suspend(False)

    def _set_suspend(self, value: bool) -> None:
        if self.ending or jobs.is_finished(self.job) or jobs.is_suspended(self.job) == value:
            return
        new = copy.deepcopy(self.job)
        new["spec"]["suspend"] = value
        assert validate_job_update(new, self.job) == []
        self.job = new

    # --- the controller -------------------------------------------------------------------------------------

    def _uncounted(self, state: str) -> int:
        return sum(1 for p in self.pods if p.recorded and p.state == state)

    def _sync(self) -> dict[str, Any]:
        self.clock += timedelta(seconds=7)
        now = self.clock
        status = copy.deepcopy(self.status)
        conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
        suspended = jobs.is_suspended(self.job)
        if not suspended and not status.get("startTime"):
            status["startTime"] = format_time(now)
        self._count()
        self._decide_end(conditions, now)
        if not self.ending_in(conditions):
            self._suspend_or_resume(status, conditions, now)
        if suspended or self.ending_in(conditions):
            for pod in self.pods:
                if pod.active:
                    pod.state = "terminating"
        uncounted = {
            kind: [p.uid for p in self.pods if p.recorded and p.state == kind]
            for kind in ("succeeded", "failed")
        }
        status["uncountedTerminatedPods"] = uncounted if any(uncounted.values()) else {}
        status["active"] = sum(1 for p in self.pods if p.active)
        status["ready"] = sum(1 for p in self.pods if p.state == "ready")
        status["terminating"] = sum(1 for p in self.pods if p.state == "terminating")
        status["failed"] = self.counted_failed
        status["succeeded"] = len(self.completed) if self.indexed else self.counted_succeeded
        if self.indexed:
            status["completedIndexes"] = format_indexes(self.completed)
        self._finish(status, conditions, now)
        return status

    def _count(self) -> None:
        """Released pods are counted and forgotten; newly finished ones are recorded as uncounted."""
        for pod in self.pods:
            if pod.released:
                self.counted_succeeded += pod.state == "succeeded"
                self.counted_failed += pod.state == "failed"
            elif pod.finished and not pod.recorded:
                pod.recorded = True
                if pod.state == "succeeded" and pod.index is not None:
                    self.completed.add(pod.index)
        self.pods = [p for p in self.pods if not p.released]

    @staticmethod
    def ending_in(conditions: list[dict[str, Any]]) -> bool:
        return any(c["type"] in (jobs.FAILURE_TARGET, jobs.SUCCESS_CRITERIA_MET) for c in conditions)

    def _decide_end(self, conditions: list[dict[str, Any]], now: datetime) -> None:
        if self.ending_in(conditions):
            return
        spec = jobs.spec_of(self.job)
        if self.counted_failed + self._uncounted("failed") > spec["backoffLimit"]:
            set_condition(
                conditions,
                jobs.FAILURE_TARGET,
                "True",
                jobs.BACKOFF_LIMIT_EXCEEDED,
                "Job has reached the specified backoff limit",
                now,
            )
            return
        done = len(self.completed) if self.indexed else self.counted_succeeded + self._uncounted("succeeded")
        if done >= spec["completions"] and not any(p.active for p in self.pods):
            set_condition(
                conditions,
                jobs.SUCCESS_CRITERIA_MET,
                "True",
                jobs.COMPLETIONS_REACHED,
                "Reached expected number of succeeded pods",
                now,
            )

    def _suspend_or_resume(
        self, status: dict[str, Any], conditions: list[dict[str, Any]], now: datetime
    ) -> None:
        if jobs.is_suspended(self.job):
            set_condition(conditions, jobs.SUSPENDED, "True", jobs.JOB_SUSPENDED, "Job suspended", now)
        elif any(c["type"] == jobs.SUSPENDED and c["status"] == "True" for c in conditions):
            set_condition(conditions, jobs.SUSPENDED, "False", jobs.JOB_RESUMED, "Job resumed", now)
            status["startTime"] = format_time(now)

    def _finish(self, status: dict[str, Any], conditions: list[dict[str, Any]], now: datetime) -> None:
        """The terminal condition, once nothing runs and every finished pod is counted."""
        interim = next(
            (c for c in conditions if c["type"] in (jobs.FAILURE_TARGET, jobs.SUCCESS_CRITERIA_MET)), None
        )
        if interim is None or self.pods:
            return
        final = jobs.COMPLETE if interim["type"] == jobs.SUCCESS_CRITERIA_MET else jobs.FAILED
        set_condition(conditions, final, "True", interim["reason"], interim["message"], now)
        if final == jobs.COMPLETE:
            status["completionTime"] = format_time(now)

    def _write(self, status: dict[str, Any]) -> list[str]:
        new = copy.deepcopy(self.job)
        new["status"] = status
        problems = [str(e) for e in validate_job_status_update(new, self.job)]
        self.job = new
        return problems


JOBS = st.builds(
    Controller,
    indexed=st.booleans(),
    completions=st.integers(min_value=1, max_value=5),
    parallelism=st.integers(min_value=1, max_value=3),
    backoff_limit=st.integers(min_value=0, max_value=3),
    suspend=st.booleans(),
)
HISTORIES = st.lists(st.sampled_from(EVENTS), max_size=40)


@settings(max_examples=200, deadline=None)
@given(controller=JOBS, events=HISTORIES)
def test_every_write_of_a_correct_controller_is_accepted(controller: Controller, events: list[str]) -> None:
    for event in [*events, *FINISH]:
        if jobs.is_finished(controller.job):
            break
        assert controller.step(event) == [], (event, controller.status)
    assert jobs.is_finished(controller.job), controller.status
    status = controller.status
    assert (status["active"], status["terminating"], status["uncountedTerminatedPods"]) == (0, 0, {})
    if jobs.is_complete(controller.job):
        assert status["completionTime"] > status["startTime"]


# --- rule breakers: each returns the broken status, or None where the rule cannot be broken from here ---------

Status = dict[str, Any]
Breaker = Callable[[Controller, Status], Status | None]


def _conditions(status: Status) -> list[dict[str, Any]]:
    return list(status.get("conditions", []))


def _add_condition(status: Status, type_: str) -> Status:
    return {**status, "conditions": [*_conditions(status), {"type": type_, "status": "True"}]}


def _later(stamp: str) -> str:
    return format_time(datetime.fromisoformat(stamp.replace("Z", "+00:00")) + timedelta(minutes=1))


def _decrease(field: str) -> Breaker:
    return lambda c, s: {**s, field: s[field] - 1} if s.get(field) else None


BREAKERS: dict[str, Breaker] = {
    "negative-active": lambda c, s: {**s, "active": -1},
    "uid-counted-twice": lambda c, s: {**s, "uncountedTerminatedPods": {"succeeded": ["p"], "failed": ["p"]}},
    "succeeded-decreased": lambda c, s: None if c.indexed else _decrease("succeeded")(c, s),
    "failed-decreased": _decrease("failed"),
    "terminal-condition-dropped": lambda c, s: (
        {**s, "conditions": [x for x in _conditions(s) if x["type"] not in ("Complete", "Failed")]}
        if jobs.is_finished(c.job)
        else None
    ),
    "interim-condition-dropped": lambda c, s: (
        {
            **s,
            "conditions": [
                x for x in _conditions(s) if x["type"] not in ("FailureTarget", "SuccessCriteriaMet")
            ],
        }
        if c.ending
        else None
    ),
    "active-on-finished": lambda c, s: {**s, "active": 1} if jobs.is_finished(c.job) else None,
    "more-ready-than-active": lambda c, s: {**s, "ready": s.get("active", 0) + 1},
    "completion-time-moved": lambda c, s: (
        {**s, "completionTime": _later(s["completionTime"])} if jobs.is_complete(c.job) else None
    ),
    "index-beyond-completions": lambda c, s: (
        {**s, "completedIndexes": ",".join(filter(None, [s.get("completedIndexes"), "5"]))}
        if c.indexed
        else None
    ),
    "completed-indexes-on-non-indexed": lambda c, s: None if c.indexed else {**s, "completedIndexes": "0"},
    "start-time-moved-while-running": lambda c, s: (
        {**s, "startTime": _later(s["startTime"])}
        if s.get("startTime") and not jobs.is_suspended(c.job)
        else None
    ),
    "complete-without-success-criteria": lambda c, s: (
        {**_add_condition(s, "Complete"), "completionTime": _later(s["startTime"])}
        if s.get("startTime") and not jobs.is_finished(c.job) and not c.ending
        else None
    ),
    "failed-without-failure-target": lambda c, s: (
        _add_condition(s, "Failed") if not jobs.is_finished(c.job) and not c.ending else None
    ),
}


@settings(max_examples=200, deadline=None)
@given(controller=JOBS, events=HISTORIES, stop=st.integers(min_value=0, max_value=120))
def test_a_write_that_breaks_a_rule_is_refused(controller: Controller, events: list[str], stop: int) -> None:
    for event in [*events, *FINISH][:stop]:
        if jobs.is_finished(controller.job):
            break
        assert controller.step(event) == []
    applied = 0
    for name, breaker in BREAKERS.items():
        broken = breaker(controller, copy.deepcopy(controller.status))
        if broken is None:
            continue
        applied += 1
        new = {**controller.job, "status": broken}
        assert validate_job_status_update(new, controller.job), (name, controller.status, broken)
    assert applied >= 3  # the unconditional breakers always apply
