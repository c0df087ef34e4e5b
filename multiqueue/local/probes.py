"""Container probes as the kubelet runs them: a probe's settings, and what a run of it changes.

A probe's result flips only after ``successThreshold`` passes in a row (to success) or ``failureThreshold`` fails
in a row (to failure). A readiness probe starts failed (not ready until it passes), a liveness probe starts passed
(the container lives until it fails enough). The result decides: readiness sets the container's ``ready``,
liveness a failure restarts the container (as its restart policy allows).

Pure: the kubelet runs each probe (an exec probe is the command run beside the container's, in its mount
namespace; its exit code decides, a timeout fails it) and asks :func:`after` what the result is now.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from multiqueue.api.meta import as_dict, as_list
from multiqueue.api.types import Obj

PERIOD: Final = 10.0
TIMEOUT: Final = 1.0
SUCCESS_THRESHOLD: Final = 1
FAILURE_THRESHOLD: Final = 3


@dataclasses.dataclass(frozen=True)
class ProbeSpec:
    """One exec probe's settings, with the API's defaults."""

    command: tuple[str, ...]
    initial_delay: float = 0.0
    period: float = PERIOD
    timeout: float = TIMEOUT
    success_threshold: int = SUCCESS_THRESHOLD
    failure_threshold: int = FAILURE_THRESHOLD

    @classmethod
    def of(cls, probe: Obj) -> ProbeSpec | None:
        """The exec probe ``probe`` describes; None for another kind (the local kubelet runs exec probes)."""
        command = tuple(str(a) for a in as_list(as_dict(probe.get("exec")).get("command")))
        if not command:
            return None

        def number(field: str, default: float, least: float) -> float:
            given = probe.get(field)
            try:
                value = float(given) if given is not None else default
            except (TypeError, ValueError):
                value = default
            return max(value, least)

        return cls(
            command,
            initial_delay=number("initialDelaySeconds", 0.0, 0.0),
            period=number("periodSeconds", PERIOD, 1.0),
            timeout=number("timeoutSeconds", TIMEOUT, 1.0),
            success_threshold=int(number("successThreshold", SUCCESS_THRESHOLD, 1)),
            failure_threshold=int(number("failureThreshold", FAILURE_THRESHOLD, 1)),
        )


def readiness_of(container: Obj) -> ProbeSpec | None:
    return ProbeSpec.of(as_dict(container.get("readinessProbe"))) if container.get("readinessProbe") else None


def liveness_of(container: Obj) -> ProbeSpec | None:
    return ProbeSpec.of(as_dict(container.get("livenessProbe"))) if container.get("livenessProbe") else None


@dataclasses.dataclass(frozen=True)
class ProbeState:
    """A probe's result and the runs in a row that agree with its last run."""

    passing: bool
    successes: int = 0  # passes in a row
    failures: int = 0  # fails in a row

    @classmethod
    def readiness(cls) -> ProbeState:
        return cls(passing=False)

    @classmethod
    def liveness(cls) -> ProbeState:
        return cls(passing=True)


def after(state: ProbeState, passed: bool, spec: ProbeSpec) -> ProbeState:
    """The probe's state once a run ``passed`` (or failed, or timed out)."""
    if passed:
        successes = state.successes + 1
        return ProbeState(state.passing or successes >= spec.success_threshold, successes, 0)
    failures = state.failures + 1
    return ProbeState(state.passing and failures < spec.failure_threshold, 0, failures)


def first_run_in(spec: ProbeSpec, running_for: float) -> float:
    """Seconds until the first run, for a container that has run ``running_for`` seconds (adopted ones too)."""
    return max(spec.initial_delay - running_for, 0.0)
