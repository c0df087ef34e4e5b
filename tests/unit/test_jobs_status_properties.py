"""Property tests: every step a correct Job controller takes is accepted; breaking a rule is refused."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from multiqueue.api.indexes import format_indexes
from multiqueue.api.jobs import validate_job_status_update
from multiqueue.api.meta import format_time
from tests.unit.jobfixtures import job

START = datetime(2026, 1, 1, tzinfo=UTC)


class Controller:
    """A tiny model of the Job controller's status writes, driven by random pod outcomes."""

    def __init__(self, indexed: bool, completions: int, backoff_limit: int) -> None:
        spec: dict[str, Any] = {"completions": completions, "parallelism": 2, "backoffLimit": backoff_limit}
        if indexed:
            spec["completionMode"] = "Indexed"
        self.job = job(**spec)
        self.indexed = indexed
        self.completions = completions
        self.backoff_limit = backoff_limit
        self.clock = START
        self.done: set[int] = set()
        self.failed = 0
        self.uncounted: list[tuple[str, bool]] = []
        self.serial = 0

    @property
    def status(self) -> dict[str, Any]:
        return self.job.setdefault("status", {})

    def tick(self) -> str:
        self.clock += timedelta(seconds=7)
        return format_time(self.clock)

    def write(self, status: dict[str, Any]) -> list[str]:
        new = copy.deepcopy(self.job)
        new["status"] = status
        errors = validate_job_status_update(new, self.job)
        self.job = new
        return [str(e) for e in errors]

    def finished(self) -> bool:
        return any(c["type"] in ("Complete", "Failed") for c in self.status.get("conditions", []))

    def step(self, outcome: str) -> list[str]:
        """One status write; ``outcome`` picks what happened to pods since the last one."""
        status = copy.deepcopy(self.status)
        now = self.tick()
        status.setdefault("startTime", now)
        conditions = status.setdefault("conditions", [])
        if any(c["type"] in ("FailureTarget", "SuccessCriteriaMet") for c in conditions):
            # Interim condition set: pods are gone, flush the uncounted ones, then the terminal condition.
            self._count(status)
            status["active"] = 0
            status["ready"] = 0
            status["terminating"] = 0
            target = next(c for c in conditions if c["type"] in ("FailureTarget", "SuccessCriteriaMet"))
            final = "Failed" if target["type"] == "FailureTarget" else "Complete"
            conditions.append(
                {"type": final, "status": "True", "reason": target["reason"], "lastTransitionTime": now}
            )
            if final == "Complete":
                status["completionTime"] = now
            return self.write(status)
        if outcome == "flush":
            self._count(status)
        elif outcome in ("succeed", "fail"):
            self.serial += 1
            self.uncounted.append((f"pod-{self.serial}", outcome == "succeed"))
        if outcome == "succeed" and self.indexed:
            free = [i for i in range(self.completions) if i not in self.done]
            if free:
                self.done.add(free[0])
        active = 0 if self._target(status) else min(2, self.completions - len(self.done))
        status["active"] = max(active, 0)
        status["ready"] = (
            status["active"] if outcome == "ready" else min(status.get("ready", 0), status["active"])
        )
        status["uncountedTerminatedPods"] = {
            "succeeded": [uid for uid, ok in self.uncounted if ok],
            "failed": [uid for uid, ok in self.uncounted if not ok],
        }
        if self.indexed:
            status["completedIndexes"] = format_indexes(self.done)
        target = self._target(status)
        if target is not None:
            conditions.append(
                {"type": target[0], "status": "True", "reason": target[1], "lastTransitionTime": now}
            )
            status["active"] = 0
            status["ready"] = 0
        return self.write(status)

    def _count(self, status: dict[str, Any]) -> None:
        succeeded = sum(1 for _, ok in self.uncounted if ok)
        self.failed += sum(1 for _, ok in self.uncounted if not ok)
        status["succeeded"] = len(self.done) if self.indexed else status.get("succeeded", 0) + succeeded
        status["failed"] = self.failed
        self.uncounted = []
        status["uncountedTerminatedPods"] = {}

    def _target(self, status: dict[str, Any]) -> tuple[str, str] | None:
        failures = self.failed + sum(1 for _, ok in self.uncounted if not ok)
        if failures > self.backoff_limit:
            return ("FailureTarget", "BackoffLimitExceeded")
        if self.indexed and len(self.done) >= self.completions:
            return ("SuccessCriteriaMet", "CompletionsReached")
        if (
            not self.indexed
            and status.get("succeeded", 0) + sum(1 for _, ok in self.uncounted if ok) >= self.completions
        ):
            return ("SuccessCriteriaMet", "CompletionsReached")
        return None


OUTCOMES = st.sampled_from(["succeed", "fail", "flush", "ready", "nothing"])


@settings(max_examples=200, deadline=None)
@given(
    indexed=st.booleans(),
    completions=st.integers(min_value=1, max_value=5),
    backoff_limit=st.integers(min_value=0, max_value=3),
    outcomes=st.lists(OUTCOMES, min_size=1, max_size=40),
)
def test_a_correct_controller_is_never_refused(
    indexed: bool, completions: int, backoff_limit: int, outcomes: list[str]
) -> None:
    controller = Controller(indexed, completions, backoff_limit)
    for outcome in [*outcomes, "flush", "flush"]:
        if controller.finished():
            break
        errors = controller.step(outcome)
        assert errors == [], (outcome, controller.status, errors)


BREAKERS = {
    "succeeded-decreased": lambda s: (
        s.update(succeeded=max(0, s.get("succeeded", 0) - 1)) if s.get("succeeded") else None
    ),
    "failed-decreased": lambda s: s.update(failed=s["failed"] - 1) if s.get("failed") else None,
    "terminal-condition-dropped": lambda s: s.update(
        conditions=[c for c in s.get("conditions", []) if c["type"] not in ("Complete", "Failed")]
    ),
    "active-on-finished": lambda s: s.update(active=1),
}


@settings(max_examples=100, deadline=None)
@given(
    completions=st.integers(min_value=1, max_value=4),
    outcomes=st.lists(st.sampled_from(["succeed", "fail", "flush"]), min_size=1, max_size=20),
    breaker=st.sampled_from(sorted(BREAKERS)),
)
def test_breaking_a_rule_after_the_job_finished_is_refused(
    completions: int, outcomes: list[str], breaker: str
) -> None:
    controller = Controller(False, completions, backoff_limit=1)
    for outcome in [*outcomes, *["succeed", "flush"] * (completions + 2)]:
        if controller.finished():
            break
        assert controller.step(outcome) == []
    if not controller.finished():
        return
    broken = copy.deepcopy(controller.status)
    if BREAKERS[breaker](broken) is None and broken == controller.status:
        return  # nothing to break in this history (e.g. no failures to decrease)
    assert controller.write(broken) != []
