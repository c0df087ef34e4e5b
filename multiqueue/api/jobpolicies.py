"""Create validation of a batch/v1 Job's two policies: which pod failures count (podFailurePolicy) and when
an Indexed Job has succeeded early (successPolicy), with upstream's limits and messages.
"""

from __future__ import annotations

from typing import Any, Final

from multiqueue.api import indexes
from multiqueue.api.errors import (
    OMITTED,
    FieldError,
    duplicate,
    invalid,
    non_negative_integer,
    not_supported,
    required,
    too_long,
)
from multiqueue.api.meta import as_dict, as_int, as_list, qualified_name_errors
from multiqueue.api.types import Obj

# Limits, with upstream's values.
MAX_POD_FAILURE_POLICY_RULES: Final = 20
MAX_EXIT_CODE_VALUES: Final = 255
MAX_POD_CONDITION_PATTERNS: Final = 20
MAX_SUCCESS_POLICY_RULES: Final = 20
MAX_SUCCEEDED_INDEXES_LENGTH: Final = 64 * 1024

_POD_FAILURE_ACTIONS: Final = ["Count", "FailIndex", "FailJob", "Ignore"]
_EXIT_CODE_OPERATORS: Final = ["In", "NotIn"]
_CONDITION_STATUSES: Final = ["False", "True", "Unknown"]


def _too_many(path: str, items: list[Any], limit: int) -> list[FieldError]:
    # Upstream reports field.TooMany ("Too many: ..."); errors.py has no such type, so Invalid carries the message.
    return [invalid(path, len(items), f"must have at most {limit} items")] if len(items) > limit else []


def _go_quoted(values: list[str]) -> str:
    """Go's %q of a []string: ["a" "b"], as upstream prints the valid values of a Required field."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def _container_names(spec: Obj) -> set[str]:
    pod_spec = as_dict(as_dict(spec.get("template")).get("spec"))
    return {
        str(as_dict(container).get("name"))
        for field in ("containers", "initContainers")
        for container in as_list(pod_spec.get(field))
    }


def _validate_on_exit_codes(on_exit: Obj, path: str, names: set[str]) -> list[FieldError]:
    errs: list[FieldError] = []
    operator = on_exit.get("operator")
    if not operator:
        errs.append(required(f"{path}.operator", f"valid values: {_go_quoted(_EXIT_CODE_OPERATORS)}"))
    elif operator not in _EXIT_CODE_OPERATORS:
        errs.append(not_supported(f"{path}.operator", operator, _EXIT_CODE_OPERATORS))
    container = on_exit.get("containerName")
    if container is not None and container not in names:
        detail = "must be one of the container or initContainer names in the pod template"
        errs.append(invalid(f"{path}.containerName", container, detail))
    values = as_list(on_exit.get("values"))
    if not values:
        errs.append(invalid(f"{path}.values", values, "at least one value is required"))
    errs += _too_many(f"{path}.values", values, MAX_EXIT_CODE_VALUES)
    seen: set[int] = set()
    previous: int | None = None
    ordered = True
    for j, raw in enumerate(values):
        code = as_int(raw)
        if code is None:
            errs.append(invalid(f"{path}.values[{j}]", raw, "must be an integer"))
            continue
        if operator == "In" and code == 0:
            errs.append(invalid(f"{path}.values[{j}]", code, "must not be 0 for the In operator"))
        if code in seen:
            errs.append(duplicate(f"{path}.values[{j}]", code))
        seen.add(code)
        ordered = ordered and (previous is None or previous <= code)
        previous = code
    if not ordered:
        errs.append(invalid(f"{path}.values", values, "must be ordered"))
    return errs


def _validate_on_pod_conditions(patterns: list[Any], path: str) -> list[FieldError]:
    errs = _too_many(path, patterns, MAX_POD_CONDITION_PATTERNS)
    for j, raw in enumerate(patterns):
        pattern = as_dict(raw)
        type_ = str(pattern.get("type") or "")
        errs += [invalid(f"{path}[{j}].type", type_, m) for m in qualified_name_errors(type_)]
        status = pattern.get("status")
        if not status:
            errs.append(required(f"{path}[{j}].status", f"valid values: {_go_quoted(_CONDITION_STATUSES)}"))
        elif status not in _CONDITION_STATUSES:
            errs.append(not_supported(f"{path}[{j}].status", status, _CONDITION_STATUSES))
    return errs


def _validate_pod_failure_rule(spec: Obj, rule: Obj, path: str, names: set[str]) -> list[FieldError]:
    errs: list[FieldError] = []
    action = rule.get("action")
    if not action:
        errs.append(required(f"{path}.action", f"valid values: {_go_quoted(_POD_FAILURE_ACTIONS)}"))
    elif action == "FailIndex":
        if spec.get("backoffLimitPerIndex") is None:
            errs.append(invalid(f"{path}.action", action, "requires the backoffLimitPerIndex to be set"))
    elif action not in _POD_FAILURE_ACTIONS:
        errs.append(not_supported(f"{path}.action", action, _POD_FAILURE_ACTIONS))
    on_exit = rule.get("onExitCodes")
    on_conditions = as_list(rule.get("onPodConditions"))
    if on_exit is not None:
        errs += _validate_on_exit_codes(as_dict(on_exit), f"{path}.onExitCodes", names)
    if on_conditions:
        errs += _validate_on_pod_conditions(on_conditions, f"{path}.onPodConditions")
    if on_exit is not None and on_conditions:
        errs.append(
            invalid(path, OMITTED, "specifying both OnExitCodes and OnPodConditions is not supported")
        )
    if on_exit is None and not on_conditions:
        errs.append(invalid(path, OMITTED, "specifying one of OnExitCodes and OnPodConditions is required"))
    return errs


def validate_pod_failure_policy(spec: Obj, path: str) -> list[FieldError]:
    """spec.podFailurePolicy: each rule's action, and exactly one way of matching a failed pod."""
    rules = as_list(as_dict(spec.get("podFailurePolicy")).get("rules"))
    errs = _too_many(f"{path}.rules", rules, MAX_POD_FAILURE_POLICY_RULES)
    names = _container_names(spec)
    for i, rule in enumerate(rules):
        errs += _validate_pod_failure_rule(spec, as_dict(rule), f"{path}.rules[{i}]", names)
    return errs


def _validate_success_rule(rule: Obj, path: str, total: int) -> list[FieldError]:
    errs: list[FieldError] = []
    count = rule.get("succeededCount")
    listed = rule.get("succeededIndexes")
    if count is None and listed is None:
        errs.append(required(path, "at least one of succeededCount or succeededIndexes must be specified"))
    listed_count = (
        0  # upstream's count when the indexes do not parse, so a succeededCount above it is refused
    )
    if listed is not None:
        text = str(listed)
        if len(text) > MAX_SUCCEEDED_INDEXES_LENGTH:
            errs.append(too_long(f"{path}.succeededIndexes", MAX_SUCCEEDED_INDEXES_LENGTH))
        parsed = indexes.strict_intervals(text, total)
        if isinstance(parsed, str):
            errs.append(
                invalid(f"{path}.succeededIndexes", text, f"error parsing succeededIndexes: {parsed}")
            )
        else:
            listed_count = sum(last - first + 1 for first, last in parsed)
    errs += non_negative_integer(f"{path}.succeededCount", count)
    value = as_int(count)
    if value is not None and value > total:
        detail = f"must be less than or equal to {total} (the number of specified completions)"
        errs.append(invalid(f"{path}.succeededCount", value, detail))
    if value is not None and listed is not None and value > listed_count:
        detail = (
            f"must be less than or equal to {listed_count} (the number of indexes in the specified "
            "succeededIndexes field)"
        )
        errs.append(invalid(f"{path}.succeededCount", value, detail))
    return errs


def validate_success_policy(spec: Obj, path: str) -> list[FieldError]:
    """spec.successPolicy of an Indexed Job: each rule names indexes or a count that completions can reach."""
    rules = as_list(as_dict(spec.get("successPolicy")).get("rules"))
    errs: list[FieldError] = []
    if not rules:
        detail = "at least one rules must be specified when the successPolicy is specified"
        errs.append(required(f"{path}.rules", detail))
    errs += _too_many(f"{path}.rules", rules, MAX_SUCCESS_POLICY_RULES)
    total = as_int(spec.get("completions")) or 0
    for i, rule in enumerate(rules):
        errs += _validate_success_rule(as_dict(rule), f"{path}.rules[{i}]", total)
    return errs
