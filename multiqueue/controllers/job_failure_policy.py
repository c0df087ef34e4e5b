"""The pod failure policy: which rule of ``spec.podFailurePolicy`` a failed pod matches, and what it says.

A rule matches on a container's non-zero exit code (``onExitCodes``) or on a pod condition
(``onPodConditions``); the first rule that matches decides: FailJob, FailIndex, Ignore or Count.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from multiqueue.api import jobs, pods
from multiqueue.api.meta import as_dict, as_list, metadata
from multiqueue.api.types import Obj

FAIL_JOB: Final = "FailJob"
FAIL_INDEX: Final = "FailIndex"
IGNORE: Final = "Ignore"
COUNT: Final = "Count"


class PolicyMatch(NamedTuple):
    """The action of the matched rule, and the message upstream writes about the match."""

    action: str
    message: str


def _exit_code_match(rule: Obj, pod: Obj) -> tuple[str, int] | None:
    """(container, exit code) of the first container whose non-zero exit code the rule's onExitCodes selects."""
    on_exit = rule.get("onExitCodes")
    if not isinstance(on_exit, dict):
        return None
    container = on_exit.get("containerName")
    values = set(as_list(on_exit.get("values")))
    for name, code in pods.exit_codes(pod):
        if code == 0 or (container is not None and container != name):
            continue
        if (on_exit.get("operator") == "In") == (code in values):
            return name, code
    return None


def _condition_match(rule: Obj, pod: Obj) -> str | None:
    """The type of the first pod condition one of the rule's onPodConditions patterns selects."""
    for raw in as_list(rule.get("onPodConditions")):
        pattern = as_dict(raw)
        for cond in as_list(as_dict(pod.get("status")).get("conditions")):
            cond = as_dict(cond)
            if cond.get("type") == pattern.get("type") and cond.get("status") == pattern.get(
                "status", "True"
            ):
                return str(cond.get("type"))
    return None


def match_failure_policy(job: Obj, pod: Obj) -> PolicyMatch | None:
    """The first podFailurePolicy rule of ``job`` the failed ``pod`` matches, or None."""
    rules = as_list(as_dict(jobs.spec_of(job).get("podFailurePolicy")).get("rules"))
    key = f"{metadata(pod).get('namespace')}/{metadata(pod).get('name')}"
    for i, raw in enumerate(rules):
        rule = as_dict(raw)
        action = str(rule.get("action", ""))
        if (exited := _exit_code_match(rule, pod)) is not None:
            name, code = exited
            return PolicyMatch(
                action,
                f"Container {name} for pod {key} failed with exit code {code} matching {action} rule at index {i}",
            )
        if (condition := _condition_match(rule, pod)) is not None:
            return PolicyMatch(
                action, f"Pod {key} has condition {condition} matching {action} rule at index {i}"
            )
    return None
