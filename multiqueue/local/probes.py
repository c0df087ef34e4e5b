"""Container probes as the kubelet runs them: a probe's settings, and what a run of it changes.

A probe's result flips only after ``successThreshold`` passes in a row (to success) or ``failureThreshold`` fails
in a row (to failure). A readiness probe starts failed (not ready until it passes), a liveness probe starts passed
(the container lives until it fails enough), a startup probe starts failed and runs until it passes, before the
others run. The result decides: readiness sets the container's ``ready``, startup its ``started``; a liveness
failure, or a startup probe that fails enough before it passed, stops the container (its restart policy then
decides).

Pure: the kubelet runs each probe (an exec probe is the command run beside the container's, in its mount
namespace, and passes when it exits 0; tcpSocket passes when a connection is made, httpGet on a status from 200 to
399; a timeout fails any) and asks :func:`after` what the result is now.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from typing import Final

from multiqueue.api.meta import as_dict, as_list
from multiqueue.api.types import Obj

LOOPBACK: Final = "127.0.0.1"  # the pod's IP on this node
PERIOD: Final = 10.0
TIMEOUT: Final = 1.0
SUCCESS_THRESHOLD: Final = 1
FAILURE_THRESHOLD: Final = 3


@dataclasses.dataclass(frozen=True)
class ProbeSpec:
    """One probe's settings, with the API's defaults: an exec probe's ``command``, or a ``tcp`` or ``http`` probe
    of ``host``:``port`` (the pod's IP, 127.0.0.1 here, unless the probe names a host)."""

    command: tuple[str, ...] = ()
    initial_delay: float = 0.0
    period: float = PERIOD
    timeout: float = TIMEOUT
    success_threshold: int = SUCCESS_THRESHOLD
    failure_threshold: int = FAILURE_THRESHOLD
    action: str = "exec"  # exec, tcp or http
    host: str = LOOPBACK
    port: int = 0
    path: str = "/"
    scheme: str = "HTTP"
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, probe: Obj, ports: Mapping[str, int] | None = None) -> ProbeSpec | None:
        """The probe ``probe`` describes (named ports looked up in ``ports``); None for one the local kubelet does
        not run (gRPC, or a port it cannot resolve)."""

        def number(field: str, default: float, least: float) -> float:
            given = probe.get(field)
            try:
                value = float(given) if given is not None else default
            except (TypeError, ValueError):
                value = default
            return max(value, least)

        base = cls(
            initial_delay=number("initialDelaySeconds", 0.0, 0.0),
            period=number("periodSeconds", PERIOD, 1.0),
            timeout=number("timeoutSeconds", TIMEOUT, 1.0),
            success_threshold=int(number("successThreshold", SUCCESS_THRESHOLD, 1)),
            failure_threshold=int(number("failureThreshold", FAILURE_THRESHOLD, 1)),
        )
        command = tuple(str(a) for a in as_list(as_dict(probe.get("exec")).get("command")))
        if command:
            return dataclasses.replace(base, command=command)
        for field, action in (("tcpSocket", "tcp"), ("httpGet", "http")):
            if not probe.get(field):
                continue
            target = as_dict(probe[field])
            port = _port(target.get("port"), ports or {})
            if port is None:
                return None
            headers = tuple(
                (str(as_dict(h).get("name", "")), str(as_dict(h).get("value", "")))
                for h in as_list(target.get("httpHeaders"))
            )
            return dataclasses.replace(
                base,
                action=action,
                host=str(target.get("host") or LOOPBACK),
                port=port,
                path=str(target.get("path") or "/"),
                scheme=str(target.get("scheme") or "HTTP").upper(),
                headers=headers,
            )
        return None


def _port(given: object, ports: Mapping[str, int]) -> int | None:
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(given, int) and not isinstance(given, bool):
        return given if 0 < given < 65536 else None
    text = str(given or "")
    if text.isdigit():
        return _port(int(text), ports)
    return ports.get(text)


def _ports(container: Obj) -> dict[str, int]:
    found = {}
    for item in (as_dict(p) for p in as_list(container.get("ports"))):
        with contextlib.suppress(TypeError, ValueError):
            if item.get("name"):
                found[str(item["name"])] = int(item.get("containerPort") or 0)
    return found


def readiness_of(container: Obj) -> ProbeSpec | None:
    return _probe(container, "readinessProbe")


def liveness_of(container: Obj) -> ProbeSpec | None:
    return _probe(container, "livenessProbe")


def startup_of(container: Obj) -> ProbeSpec | None:
    return _probe(container, "startupProbe")


def _probe(container: Obj, field: str) -> ProbeSpec | None:
    probe = container.get(field)
    return ProbeSpec.of(as_dict(probe), _ports(container)) if probe else None


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


def started_failed(state: ProbeState, spec: ProbeSpec) -> bool:
    """A startup probe that failed ``failureThreshold`` times in a row before passing: the container is stopped."""
    return not state.passing and state.failures >= spec.failure_threshold


def first_run_in(spec: ProbeSpec, running_for: float) -> float:
    """Seconds until the first run, for a container that has run ``running_for`` seconds (adopted ones too)."""
    return max(spec.initial_delay - running_for, 0.0)
