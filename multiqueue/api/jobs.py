"""batch/v1 Job rules, as the upstream API server applies them (Kubernetes 1.33/1.34, default feature gates).

Entry points other programs call:

- ``default_job(job) -> dict``: create-time defaulting, including the generated selector and pod labels when
  ``metadata.uid`` is set and ``spec.manualSelector`` is not true. Returns a new dict; the input is not mutated.
- ``validate_job(job) -> list[FieldError]``: create validation of a defaulted Job.
- ``validate_job_update(new, old) -> list[FieldError]``: an update through the main resource: the create rules
  on the new Job plus immutability.
- ``stored_status_times(job) -> dict``: status times in the form kube-apiserver stores them (UTC, seconds).
- ``validate_job_status_update(new, old) -> list[FieldError]``: a write to the status subresource, with the
  KEP-4368 rules that protect API consumers (the CronJob controller, kubectl, the dispatcher) from a faulty
  controller. Most rules run only when the fields they look at changed, so a Job whose stored status already
  breaks a rule can still be updated.

Everything here reads plain dicts and never raises on malformed input: a value of the wrong type is reported
when it is a number upstream would refuse to decode, and otherwise counts as absent.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from datetime import UTC, datetime
from typing import Any, Final

from multiqueue.api import indexes, pods
from multiqueue.api.errors import (
    OMITTED,
    FieldError,
    duplicate,
    forbidden,
    immutable,
    invalid,
    non_negative,
    not_supported,
    required,
    too_long,
)
from multiqueue.api.meta import (
    as_dict,
    as_list,
    condition_is_true,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    find_condition,
    label_value_errors,
    metadata,
    parse_time,
    qualified_name_errors,
    validate_labels,
    validate_object_meta,
    validate_object_meta_update,
)
from multiqueue.api.selectors import SelectorError, label_selector_from_dict
from multiqueue.api.types import Obj

# Condition types.
COMPLETE: Final = "Complete"
FAILED: Final = "Failed"
SUSPENDED: Final = "Suspended"
FAILURE_TARGET: Final = "FailureTarget"
SUCCESS_CRITERIA_MET: Final = "SuccessCriteriaMet"

# Condition reasons.
BACKOFF_LIMIT_EXCEEDED: Final = "BackoffLimitExceeded"
DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
POD_FAILURE_POLICY: Final = "PodFailurePolicy"
MAX_FAILED_INDEXES_EXCEEDED: Final = "MaxFailedIndexesExceeded"
FAILED_INDEXES: Final = "FailedIndexes"
COMPLETIONS_REACHED: Final = "CompletionsReached"
SUCCESS_POLICY: Final = "SuccessPolicy"
JOB_SUSPENDED: Final = "JobSuspended"
JOB_RESUMED: Final = "JobResumed"

# Completion modes and pod replacement policies.
NON_INDEXED: Final = "NonIndexed"
INDEXED: Final = "Indexed"
TERMINATING_OR_FAILED: Final = "TerminatingOrFailed"
FAILED_ONLY: Final = "Failed"

# Well-known labels, annotations and the pod finalizer.
BUILTIN_CONTROLLER: Final = "kubernetes.io/job-controller"
COMPLETION_INDEX: Final = pods.COMPLETION_INDEX
INDEX_FAILURE_COUNT: Final = "batch.kubernetes.io/job-index-failure-count"
TRACKING_FINALIZER: Final = "batch.kubernetes.io/job-tracking"
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL: Final = "job-name"
LEGACY_CONTROLLER_UID_LABEL: Final = "controller-uid"

# Limits, with upstream's values.
MAX_INT32: Final = 2**31 - 1
MAX_MANAGED_BY_LENGTH: Final = 63
MAX_PARALLELISM_INDEXED: Final = 100_000
MAX_FAILED_INDEXES_INDEXED: Final = 100_000
COMPLETIONS_SOFT_LIMIT: Final = 100_000
PARALLELISM_LIMIT_HIGH_COMPLETIONS: Final = 10_000
MAX_FAILED_INDEXES_HIGH_COMPLETIONS: Final = 10_000
MAX_POD_FAILURE_POLICY_RULES: Final = 20
MAX_EXIT_CODE_VALUES: Final = 255
MAX_POD_CONDITION_PATTERNS: Final = 20
MAX_SUCCESS_POLICY_RULES: Final = 20
MAX_SUCCEEDED_INDEXES_LENGTH: Final = 64 * 1024

_HTTP_PATH_FMT: Final = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"
_HTTP_PATH: Final = re.compile(_HTTP_PATH_FMT)
_POD_FAILURE_ACTIONS: Final = ["Count", "FailIndex", "FailJob", "Ignore"]
_EXIT_CODE_OPERATORS: Final = ["In", "NotIn"]
_CONDITION_STATUSES: Final = ["False", "True", "Unknown"]
_SPEC_INTEGERS: Final = (
    "parallelism",
    "completions",
    "activeDeadlineSeconds",
    "backoffLimit",
    "ttlSecondsAfterFinished",
    "backoffLimitPerIndex",
    "maxFailedIndexes",
)
_STATUS_COUNTERS: Final = ("active", "succeeded", "failed", "ready", "terminating")


# --- reading a Job ------------------------------------------------------------------------------------------


def _int(value: Any) -> int | None:
    """An integer field, or None when absent or not an integer (JSON booleans are not integers)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def spec_of(job: Any) -> Obj:
    return as_dict(as_dict(job).get("spec"))


def status_of(job: Any) -> Obj:
    return as_dict(as_dict(job).get("status"))


def conditions_of(job: Any) -> list[Any]:
    return as_list(status_of(job).get("conditions"))


def _template_labels(spec: Obj) -> Obj:
    return as_dict(as_dict(as_dict(spec.get("template")).get("metadata")).get("labels"))


def completion_mode(job: Any) -> str:
    """The mode as written (unknown modes included, so the controller can report them), NonIndexed if unset."""
    return str(spec_of(job).get("completionMode") or NON_INDEXED)


def is_indexed(job: Any) -> bool:
    return completion_mode(job) == INDEXED


def completions(job: Any) -> int | None:
    """None means a work-queue Job: it succeeds once any pod succeeds and the rest have ended."""
    return _int(spec_of(job).get("completions"))


def parallelism(job: Any) -> int:
    value = _int(spec_of(job).get("parallelism"))
    return 1 if value is None else value


def is_suspended(job: Any) -> bool:
    return spec_of(job).get("suspend") is True


def managed_by(job: Any) -> str | None:
    value = spec_of(job).get("managedBy")
    return value if isinstance(value, str) and value else None


def is_managed_by_builtin_controller(job: Any) -> bool:
    """Whether a Job controller (kube-controller-manager's or our embedded one) should sync the Job."""
    return managed_by(job) in (None, BUILTIN_CONTROLLER)


def has_condition(job: Any, type_: str) -> bool:
    """Conditions count only with status "True", as everywhere upstream."""
    return condition_is_true(conditions_of(job), type_)


def is_complete(job: Any) -> bool:
    return has_condition(job, COMPLETE)


def is_failed(job: Any) -> bool:
    return has_condition(job, FAILED)


def is_finished(job: Any) -> bool:
    """Complete or Failed is True; completionTime alone does not count (KEP-4368)."""
    return is_complete(job) or is_failed(job)


def finished_condition(job: Any) -> tuple[str, datetime | None] | None:
    """("Complete" | "Failed", when it became True) once finished, else None; TTL and history count from it."""
    for type_ in (COMPLETE, FAILED):
        cond = find_condition(conditions_of(job), type_)
        if cond is not None and cond.get("status") == "True":
            return type_, parse_time(cond.get("lastTransitionTime"))
    return None


# --- defaulting ---------------------------------------------------------------------------------------------


def _child(parent: Obj, key: str) -> Obj | None:
    """``parent[key]``, created empty when absent or null; None when it holds something that is not an object."""
    if parent.get(key) is None:
        parent[key] = {}
    value = parent[key]
    return value if isinstance(value, dict) else None


def default_job_spec(spec: Obj) -> Obj:
    """Upstream's SetDefaults_Job on the spec alone."""
    result = copy.deepcopy(as_dict(spec))
    if result.get("parallelism") is None and result.get("completions") is None:
        result["completions"] = 1
    if result.get("parallelism") is None:
        result["parallelism"] = 1
    if result.get("backoffLimit") is None:
        result["backoffLimit"] = MAX_INT32 if result.get("backoffLimitPerIndex") is not None else 6
    for field, value in (("completionMode", NON_INDEXED), ("suspend", False), ("manualSelector", False)):
        if result.get(field) is None:
            result[field] = value
    for rule in as_list(as_dict(result.get("podFailurePolicy")).get("rules")):
        for pattern in as_list(as_dict(rule).get("onPodConditions")):
            if isinstance(pattern, dict) and not pattern.get("status"):
                pattern["status"] = "True"
    if result.get("podReplacementPolicy") is None:
        has_policy = result.get("podFailurePolicy") is not None
        result["podReplacementPolicy"] = FAILED_ONLY if has_policy else TERMINATING_OR_FAILED
    template = _child(result, "template")
    if template is not None:
        template["spec"] = pods.default_pod_spec(as_dict(template.get("spec")))
    return result


def _generate_selector(spec: Obj, name: str, uid: str) -> None:
    """Upstream's generateSelector: labels the user already set are kept, and validation judges them."""
    template_meta = _child(as_dict(spec.get("template")), "metadata")
    labels = None if template_meta is None else _child(template_meta, "labels")
    if labels is not None:
        for key, value in (
            (LEGACY_JOB_NAME_LABEL, name),
            (JOB_NAME_LABEL, name),
            (LEGACY_CONTROLLER_UID_LABEL, uid),
            (CONTROLLER_UID_LABEL, uid),
        ):
            labels.setdefault(key, value)
    selector = _child(spec, "selector")
    match_labels = None if selector is None else _child(selector, "matchLabels")
    if match_labels is not None:
        match_labels.setdefault(CONTROLLER_UID_LABEL, uid)


def default_job(job: Obj) -> Obj:
    """Create-time defaulting; status is dropped (a created Job starts with none) and generation is the server's."""
    result = copy.deepcopy(as_dict(job))
    result.pop("status", None)
    spec = result["spec"] = default_job_spec(as_dict(result.get("spec")))
    meta = _child(result, "metadata")
    if meta is None:
        return result
    uid = meta.get("uid")
    if uid and spec.get("manualSelector") is not True:
        _generate_selector(spec, str(meta.get("name") or ""), str(uid))
    # Upstream copies the template labels while defaulting and generates the selector labels into the same map
    # afterwards (and defaults again on every read), so a Job created without labels shows the generated ones
    # too: `kubectl describe job` lists batch.kubernetes.io/controller-uid under Labels. We copy the final set.
    template_labels = _template_labels(spec)
    if not meta.get("labels") and template_labels:
        meta["labels"] = dict(template_labels)
    return result


# --- spec validation ----------------------------------------------------------------------------------------


def _validate_integer(value: Any, path: str) -> list[FieldError]:
    """A non-negative integer when set; upstream cannot even decode another JSON type into an int32."""
    if value is None:
        return []
    if _int(value) is None:
        return [invalid(path, value, "must be an integer")]
    return non_negative(path, value)


def _too_many(path: str, items: list[Any], limit: int) -> list[FieldError]:
    # Upstream reports field.TooMany ("Too many: ..."); errors.py has no such type, so Invalid carries the message.
    return [invalid(path, len(items), f"must have at most {limit} items")] if len(items) > limit else []


def _go_quoted(values: list[str]) -> str:
    """Go's %q of a []string: ["a" "b"], as upstream prints the valid values of a Required field."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def _validate_managed_by(value: Any, path: str) -> list[FieldError]:
    """A domain-prefixed path (upstream's IsDomainPrefixedPath) of at most 63 characters."""
    if not isinstance(value, str) or not value:
        return [required(path)]
    host, slash, rest = value.partition("/")
    if not slash or not host or not rest:
        errs = [invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    else:
        errs = [invalid(path, host, m) for m in dns1123_subdomain_errors(host)]
        if not _HTTP_PATH.fullmatch(rest):
            errs.append(
                invalid(path, rest, f"Invalid path (regex used for validation is '{_HTTP_PATH_FMT}')")
            )
    if len(value) > MAX_MANAGED_BY_LENGTH:
        errs.append(too_long(path, MAX_MANAGED_BY_LENGTH))
    return errs


def _validate_label_selector(selector: Any, path: str) -> list[FieldError]:
    """Upstream's ValidateLabelSelector on a metav1.LabelSelector."""
    data = as_dict(selector)
    errs = validate_labels(data.get("matchLabels"), f"{path}.matchLabels")
    for i, raw in enumerate(as_list(data.get("matchExpressions"))):
        expression = as_dict(raw)
        where = f"{path}.matchExpressions[{i}]"
        operator = expression.get("operator")
        values = as_list(expression.get("values"))
        if operator in ("In", "NotIn"):
            if not values:
                errs.append(
                    required(f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'")
                )
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                detail = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                errs.append(forbidden(f"{where}.values", detail))
        else:
            errs.append(invalid(f"{where}.operator", operator, "not a valid selector operator"))
        key = str(expression.get("key") or "")
        errs += [invalid(f"{where}.key", key, m) for m in qualified_name_errors(key)]
        for j, value in enumerate(values):
            errs += [invalid(f"{where}.values[{j}]", value, m) for m in label_value_errors(str(value))]
    return errs


def _selector_matches(selector: Any, labels: Obj) -> bool | None:
    """Whether a metav1.LabelSelector selects ``labels`` (nil selects nothing); None when it cannot be read."""
    try:
        return label_selector_from_dict(selector).matches({str(k): str(v) for k, v in labels.items()})
    except SelectorError:
        return None


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
        code = _int(raw)
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


def _validate_pod_failure_policy(spec: Obj, path: str) -> list[FieldError]:
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
    errs += _validate_integer(count, f"{path}.succeededCount")
    value = _int(count)
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


def _validate_success_policy(spec: Obj, path: str) -> list[FieldError]:
    rules = as_list(as_dict(spec.get("successPolicy")).get("rules"))
    errs: list[FieldError] = []
    if not rules:
        detail = "at least one rules must be specified when the successPolicy is specified"
        errs.append(required(f"{path}.rules", detail))
    errs += _too_many(f"{path}.rules", rules, MAX_SUCCESS_POLICY_RULES)
    total = _int(spec.get("completions")) or 0
    for i, rule in enumerate(rules):
        errs += _validate_success_rule(as_dict(rule), f"{path}.rules[{i}]", total)
    return errs


def _validate_high_completions(spec: Obj, path: str) -> list[FieldError]:
    """More than 100000 completions with a per-index limit needs tighter bounds on what runs and fails."""
    width = _int(spec.get("parallelism"))
    max_failed = _int(spec.get("maxFailedIndexes"))
    suffix = f"when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
    errs: list[FieldError] = []
    if spec.get("maxFailedIndexes") is None:
        detail = f"must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"
        errs.append(required(f"{path}.maxFailedIndexes", detail))
    if width is not None and width > PARALLELISM_LIMIT_HIGH_COMPLETIONS:
        detail = f"must be less than or equal to {PARALLELISM_LIMIT_HIGH_COMPLETIONS} {suffix}"
        errs.append(invalid(f"{path}.parallelism", width, detail))
    if max_failed is not None and max_failed > MAX_FAILED_INDEXES_HIGH_COMPLETIONS:
        detail = f"must be less than or equal to {MAX_FAILED_INDEXES_HIGH_COMPLETIONS} {suffix}"
        errs.append(invalid(f"{path}.maxFailedIndexes", max_failed, detail))
    return errs


def _validate_indexed(spec: Obj, path: str) -> list[FieldError]:
    """Indexed Jobs need completions, and bounded parallelism and failed indexes (status strings stay short)."""
    total = _int(spec.get("completions"))
    width = _int(spec.get("parallelism"))
    max_failed = _int(spec.get("maxFailedIndexes"))
    errs: list[FieldError] = []
    if spec.get("completions") is None:
        errs.append(required(f"{path}.completions", f"when completion mode is {INDEXED}"))
    if width is not None and width > MAX_PARALLELISM_INDEXED:
        detail = f"must be less than or equal to {MAX_PARALLELISM_INDEXED} when completion mode is {INDEXED}"
        errs.append(invalid(f"{path}.parallelism", width, detail))
    if total is not None and max_failed is not None and max_failed > total:
        errs.append(
            invalid(f"{path}.maxFailedIndexes", max_failed, "must be less than or equal to completions")
        )
    if max_failed is not None and max_failed > MAX_FAILED_INDEXES_INDEXED:
        detail = f"must be less than or equal to {MAX_FAILED_INDEXES_INDEXED}"
        errs.append(invalid(f"{path}.maxFailedIndexes", max_failed, detail))
    if total is not None and total > COMPLETIONS_SOFT_LIMIT and spec.get("backoffLimitPerIndex") is not None:
        errs += _validate_high_completions(spec, path)
    return errs


def _validate_completion_mode(spec: Obj, path: str) -> list[FieldError]:
    mode = spec.get("completionMode")
    if mode == INDEXED:
        return _validate_indexed(spec, path)
    if mode is not None and mode != NON_INDEXED:
        return [not_supported(f"{path}.completionMode", mode, [NON_INDEXED, INDEXED])]
    return [
        invalid(f"{path}.{field}", spec.get(field), "requires indexed completion mode")
        for field in ("backoffLimitPerIndex", "maxFailedIndexes")
        if spec.get(field) is not None
    ]


def _validate_pod_replacement_policy(spec: Obj, path: str) -> list[FieldError]:
    policy = spec.get("podReplacementPolicy")
    if policy is None:
        return []
    if spec.get("podFailurePolicy") is not None:
        supported = [FAILED_ONLY]
    else:
        supported = [FAILED_ONLY, TERMINATING_OR_FAILED]
    return [] if policy in supported else [not_supported(path, policy, supported)]


def _validate_restart_policy(spec: Obj, path: str) -> list[FieldError]:
    """Pods of a Job must end; an unset policy is defaulted to Always, hence "Required" for both."""
    policy = as_dict(as_dict(spec.get("template")).get("spec")).get("restartPolicy")
    if policy in (None, "", "Always"):
        return [required(path, 'valid values: "OnFailure", "Never"')]
    if policy not in ("OnFailure", "Never"):
        return [not_supported(path, policy, ["OnFailure", "Never"])]
    if spec.get("podFailurePolicy") is not None and policy != "Never":
        return [invalid(path, policy, 'only "Never" is supported when podFailurePolicy is specified')]
    return []


def _validate_spec_fields(spec: Obj, path: str) -> list[FieldError]:
    """Upstream's validateJobSpec: every rule but the selector's, shared with CronJob job templates."""
    errs = [e for field in _SPEC_INTEGERS for e in _validate_integer(spec.get(field), f"{path}.{field}")]
    if spec.get("maxFailedIndexes") is not None and spec.get("backoffLimitPerIndex") is None:
        errs.append(required(f"{path}.backoffLimitPerIndex", "when maxFailedIndexes is specified"))
    if spec.get("managedBy") is not None:
        errs += _validate_managed_by(spec.get("managedBy"), f"{path}.managedBy")
    errs += _validate_completion_mode(spec, path)
    if spec.get("podFailurePolicy") is not None:
        errs += _validate_pod_failure_policy(spec, f"{path}.podFailurePolicy")
    if spec.get("successPolicy") is not None and spec.get("completionMode") != INDEXED:
        errs.append(
            invalid(f"{path}.successPolicy", spec["successPolicy"], "requires indexed completion mode")
        )
    elif spec.get("successPolicy") is not None:
        errs += _validate_success_policy(spec, f"{path}.successPolicy")
    errs += _validate_pod_replacement_policy(spec, f"{path}.podReplacementPolicy")
    errs += pods.validate_pod_template(spec.get("template"), f"{path}.template")
    return errs + _validate_restart_policy(spec, f"{path}.template.spec.restartPolicy")


def _validate_spec(spec: Obj, path: str) -> list[FieldError]:
    """Upstream's ValidateJobSpec: the fields, and a selector that selects the pods the template makes."""
    errs = _validate_spec_fields(spec, path)
    selector = spec.get("selector")
    if selector is None:
        errs.append(required(f"{path}.selector"))
    else:
        errs += _validate_label_selector(selector, f"{path}.selector")
    labels = _template_labels(spec)
    # A nil selector selects nothing, so upstream reports the mismatch too.
    if _selector_matches(selector, labels) is False:
        detail = "`selector` does not match template `labels`"
        written = as_dict(as_dict(spec.get("template")).get("metadata")).get("labels")  # null when absent
        errs.append(invalid(f"{path}.template.metadata.labels", written, detail))
    return errs


def _has_label(labels: Obj, key: str, expected: str) -> list[FieldError]:
    """Upstream's ValidateHasLabel."""
    path = f"spec.template.metadata.labels[{key}]"
    if key not in labels:
        return [required(path, f"must be '{expected}'")]
    if labels[key] != expected:
        return [invalid(path, labels, f"must be '{expected}'")]
    return []


def _validate_generated_selector(job: Obj, require_prefixed_labels: bool) -> list[FieldError]:
    """A generated selector and its pod labels must name this Job, so no other controller's pods match."""
    spec = spec_of(job)
    if spec.get("manualSelector") is True or spec.get("selector") is None:
        return []
    meta = metadata(job)
    uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
    errs = [] if uid else [required("metadata.uid")]
    expected = {LEGACY_CONTROLLER_UID_LABEL: uid, LEGACY_JOB_NAME_LABEL: name}
    if require_prefixed_labels:
        expected |= {CONTROLLER_UID_LABEL: uid, JOB_NAME_LABEL: name}
    labels = _template_labels(spec)
    for key, value in expected.items():
        errs += _has_label(labels, key, value)
    if _selector_matches(spec.get("selector"), expected) is False:
        errs.append(invalid("spec.selector", spec.get("selector"), "`selector` not auto-generated"))
    return errs


def _validate_indexed_hostname(job: Obj) -> list[FieldError]:
    """Indexed pods get "<job>-<index>" as hostname, which must stay a DNS label up to the last index."""
    spec = spec_of(job)
    total = _int(spec.get("completions"))
    if spec.get("completionMode") != INDEXED or total is None or total <= 0:
        return []
    name = metadata(job).get("name")
    hostname = f"{name or ''}-{total - 1}"
    if not dns1123_label_errors(hostname):
        return []
    return [invalid("metadata.name", name, f"will not able to create pod with invalid DNS label: {hostname}")]


def _validate_job_body(job: Obj, require_prefixed_labels: bool) -> list[FieldError]:
    """Upstream's ValidateJob without the object metadata."""
    errs = _validate_generated_selector(job, require_prefixed_labels)
    errs += _validate_spec(spec_of(job), "spec")
    return errs + _validate_indexed_hostname(job)


def validate_job(job: Obj) -> list[FieldError]:
    """Create validation of a defaulted Job."""
    errs = validate_object_meta(as_dict(job).get("metadata"), namespaced=True)
    return errs + _validate_job_body(as_dict(job), require_prefixed_labels=True)


def validate_job_template_spec(template: Obj, path: str) -> list[FieldError]:
    """A CronJob's jobTemplate at ``path``: the spec rules, with the selector left for each Job to generate."""
    spec = as_dict(as_dict(template).get("spec"))
    errs = _validate_spec_fields(spec, f"{path}.spec")
    if spec.get("selector") is not None:
        errs.append(invalid(f"{path}.spec.selector", spec["selector"], "`selector` will be auto-generated"))
    if spec.get("manualSelector") is True:
        errs.append(not_supported(f"{path}.spec.manualSelector", True, ["nil", "false"]))
    return errs


# --- update validation --------------------------------------------------------------------------------------


def _validate_completions_update(spec: Obj, old_spec: Obj) -> list[FieldError]:
    """Completions is immutable, except that an Indexed Job scales by changing it together with parallelism."""
    value = spec.get("completions")
    if value == old_spec.get("completions"):
        return []
    if spec.get("completionMode") != INDEXED:
        return [immutable("spec.completions", value)]
    if value is not None and value != spec.get("parallelism"):
        return [invalid("spec.completions", value, "can only be modified in tandem with spec.parallelism")]
    return []  # a missing completions is already refused by the spec rules


def _without_scheduling_directives(template: Any) -> Obj:
    """The template minus what a suspended, never-started Job may still change (for queueing controllers)."""
    result = copy.deepcopy(as_dict(template))
    meta = as_dict(result.get("metadata"))
    meta.pop("labels", None)
    meta.pop("annotations", None)
    pod_spec = as_dict(result.get("spec"))
    for field in ("nodeSelector", "tolerations", "schedulingGates"):
        pod_spec.pop(field, None)
    affinity = pod_spec.get("affinity")
    if isinstance(affinity, dict):
        affinity.pop("nodeAffinity", None)
        if not affinity:
            del pod_spec["affinity"]
    return result


def _validate_template_update(new: Obj, old: Obj) -> list[FieldError]:
    template, old_template = spec_of(new).get("template"), spec_of(old).get("template")
    if is_suspended(old) and status_of(old).get("startTime") is None:
        unchanged = _without_scheduling_directives(template) == _without_scheduling_directives(old_template)
    else:
        unchanged = template == old_template
    return [] if unchanged else [immutable("spec.template", template)]


def validate_job_update(new: Obj, old: Obj) -> list[FieldError]:
    """An update through the main resource: the Job must still be valid, and most of its spec is fixed.

    Upstream runs the spec rules twice on update (ValidateJob and ValidateJobSpecUpdate) and so reports each
    problem twice; we report it once. The object metadata gets the update rules only: name and namespace
    cannot change, so their create-time format checks add nothing.
    """
    new, old = as_dict(new), as_dict(old)
    old_labels = _template_labels(spec_of(old))
    # Jobs created before the batch.kubernetes.io/ labels existed keep validating without them.
    prefixed = JOB_NAME_LABEL in old_labels and CONTROLLER_UID_LABEL in old_labels
    errs = validate_object_meta_update(new.get("metadata"), old.get("metadata"))
    errs += _validate_job_body(new, require_prefixed_labels=prefixed)
    spec, old_spec = spec_of(new), spec_of(old)
    errs += _validate_completions_update(spec, old_spec)
    for field in ("selector", "completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy"):
        if spec.get(field) != old_spec.get(field):
            errs.append(immutable(f"spec.{field}", spec.get(field)))
    errs += _validate_template_update(new, old)
    if spec.get("successPolicy") != old_spec.get("successPolicy"):
        errs.append(immutable("spec.successPolicy", spec.get("successPolicy")))
    return errs


# --- status update validation -------------------------------------------------------------------------------


def _stored_time(value: Any) -> Any:
    """A time as Go stores a metav1.Time: UTC, whole seconds (the fraction is dropped, not rounded)."""
    moment = parse_time(value)
    return value if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stored_status_times(job: Obj) -> Obj:
    """The Job with its status times as kube-apiserver stores them, for the server to apply after validation.

    Validation sees the times as written (a startTime of 12:00:00.5 differs from a stored 12:00:00), but what
    is stored, and so what the next write is judged against, is the second-precision UTC form.
    """
    result = copy.deepcopy(as_dict(job))
    status = result.get("status")
    if not isinstance(status, dict):
        return result
    for field in ("startTime", "completionTime"):
        if status.get(field) is not None:
            status[field] = _stored_time(status[field])
    for cond in as_list(status.get("conditions")):
        if isinstance(cond, dict):
            for field in ("lastProbeTime", "lastTransitionTime"):
                if cond.get(field) is not None:
                    cond[field] = _stored_time(cond[field])
    return result


# Fields that are not pointers upstream read as their zero value when absent, so absent -> 0 is no change.
_STATUS_ZERO_VALUES: Final[Obj] = {"active": 0, "succeeded": 0, "failed": 0, "completedIndexes": ""}


@dataclasses.dataclass(frozen=True)
class _StatusWrite:
    """One write to the status subresource: the Job before and after, and what moved between them."""

    new: Obj
    old: Obj

    @property
    def status(self) -> Obj:
        return status_of(self.new)

    @property
    def old_status(self) -> Obj:
        return status_of(self.old)

    @property
    def spec(self) -> Obj:
        return spec_of(self.new)

    def changed(self, field: str) -> bool:
        zero = _STATUS_ZERO_VALUES.get(field)
        return bool(self.status.get(field, zero) != self.old_status.get(field, zero))

    def has(self, type_: str) -> bool:
        return _any_condition(self.new, type_, "True")

    def had(self, type_: str) -> bool:
        return _any_condition(self.old, type_, "True")

    def time_changed(self, field: str) -> bool:
        """Times compare as instants (upstream decodes them), so a different spelling is no change."""
        new, old = self.status.get(field), self.old_status.get(field)
        return parse_time(new) != parse_time(old) if new is not None and old is not None else new != old

    @property
    def resuming(self) -> bool:
        """Suspended was True and is now False (present with that status, not merely gone)."""
        return self.had(SUSPENDED) and _any_condition(self.new, SUSPENDED, "False")

    def flipped(self, *types: str) -> bool:
        return any(self.has(t) != self.had(t) for t in types)

    @property
    def finished(self) -> bool:
        return self.has(COMPLETE) or self.has(FAILED)

    @property
    def finished_changed(self) -> bool:
        return self.finished != (self.had(COMPLETE) or self.had(FAILED))

    @property
    def uncounted_changed(self) -> bool:
        """An absent list equals an empty one, but an absent uncountedTerminatedPods differs from ``{}``."""
        new, old = self.status.get("uncountedTerminatedPods"), self.old_status.get("uncountedTerminatedPods")
        if new is None or old is None:
            return (new is None) != (old is None)
        return any(
            as_list(as_dict(new).get(k)) != as_list(as_dict(old).get(k)) for k in ("succeeded", "failed")
        )


def _any_condition(job: Obj, type_: str, value: str) -> bool:
    """Whether any condition of the type has that status: upstream looks at every entry, not the first."""
    return any(
        as_dict(c).get("type") == type_ and as_dict(c).get("status") == value for c in conditions_of(job)
    )


def _bad_conditions(detail: str) -> FieldError:
    return invalid("status.conditions", OMITTED, detail)


def _validate_uncounted_uids(status: Obj) -> list[FieldError]:
    """Each pod is counted once: a UID is never empty and never listed twice (succeeded and failed together)."""
    uncounted = as_dict(status.get("uncountedTerminatedPods"))
    seen: set[str] = set()
    errs: list[FieldError] = []
    for kind in ("succeeded", "failed"):
        for i, raw in enumerate(as_list(uncounted.get(kind))):
            uid = raw if isinstance(raw, str) else ""
            where = f"status.uncountedTerminatedPods.{kind}[{i}]"
            if not uid:
                errs.append(invalid(where, uid, "must not be empty"))
            elif uid in seen:
                errs.append(duplicate(where, uid))
            seen.add(uid)
    return errs


def _validate_status_values(write: _StatusWrite) -> list[FieldError]:
    """The rules upstream applies to every status write, whatever changed."""
    status = write.status
    errs = [e for field in _STATUS_COUNTERS for e in _validate_integer(status.get(field), f"status.{field}")]
    errs += _validate_uncounted_uids(status)
    success_met = write.has(SUCCESS_CRITERIA_MET)
    if success_met and write.has(FAILED):
        errs.append(_bad_conditions("cannot set SuccessCriteriaMet=True and Failed=true conditions"))
    if success_met and write.has(FAILURE_TARGET):
        errs.append(_bad_conditions("cannot set SuccessCriteriaMet=True and FailureTarget=true conditions"))
    if write.spec.get("successPolicy") is not None and write.has(COMPLETE) and not success_met:
        detail = "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True"
        errs.append(_bad_conditions(detail))
    return errs


def _validate_condition_transitions(write: _StatusWrite) -> list[FieldError]:
    """A Job's fate, once decided, is final; Complete and Failed follow their interim conditions."""
    errs = [
        _bad_conditions(f"cannot disable the terminal {type_}=True condition")
        for type_ in (FAILED, COMPLETE, FAILURE_TARGET)
        if write.had(type_) and not write.has(type_)
    ]
    complete, failed = write.has(COMPLETE), write.has(FAILED)
    failure_target, success_met = write.has(FAILURE_TARGET), write.has(SUCCESS_CRITERIA_MET)
    if write.had(SUCCESS_CRITERIA_MET) and not success_met:
        errs.append(_bad_conditions("cannot disable the SuccessCriteriaMet=True condition"))
    if write.had(COMPLETE) and not write.had(SUCCESS_CRITERIA_MET) and success_met:
        detail = "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions"
        errs.append(_bad_conditions(detail))
    if write.flipped(COMPLETE, FAILED) and complete and failed:
        errs.append(_bad_conditions("cannot set Complete=True and Failed=true conditions"))
    if write.flipped(COMPLETE, FAILURE_TARGET) and complete and failure_target:
        errs.append(_bad_conditions("cannot set Complete=True and FailureTarget=true conditions"))
    if (write.flipped(FAILED) or write.changed("failedIndexes")) and failed and not failure_target:
        detail = "cannot set Failed=True condition without the FailureTarget=true condition"
        errs.append(_bad_conditions(detail))
    if write.flipped(COMPLETE, SUCCESS_CRITERIA_MET) and complete and not success_met:
        detail = "cannot set Complete=True condition without the SuccessCriteriaMet=true condition"
        errs.append(_bad_conditions(detail))
    return errs


def _validate_pod_counts(write: _StatusWrite) -> list[FieldError]:
    """Counters only grow, and a finished Job has no pods left running or uncounted."""
    status, old_status = write.status, write.old_status
    errs: list[FieldError] = []
    failed = _int(status.get("failed")) or 0
    if failed < (_int(old_status.get("failed")) or 0):
        errs.append(invalid("status.failed", failed, "cannot decrease the failed counter"))
    succeeded = _int(status.get("succeeded")) or 0
    # An elastic Indexed Job (completions == parallelism) may be scaled down, dropping completed indexes.
    elastic = is_indexed(write.new) and write.spec.get("completions") == write.spec.get("parallelism")
    if not elastic and succeeded < (_int(old_status.get("succeeded")) or 0):
        errs.append(invalid("status.succeeded", succeeded, "cannot decrease the succeeded counter"))
    active = _int(status.get("active")) or 0
    if (write.finished_changed or write.changed("active")) and write.finished and active > 0:
        errs.append(invalid("status.active", active, "active>0 is invalid for finished job"))
    terminating = _int(status.get("terminating")) or 0
    if (write.finished_changed or write.changed("terminating")) and write.finished and terminating > 0:
        errs.append(invalid("status.terminating", terminating, "terminating>0 is invalid for finished job"))
    ready = _int(status.get("ready"))
    if (write.changed("ready") or write.changed("active")) and ready is not None and ready > active:
        errs.append(invalid("status.ready", ready, "cannot set more ready pods than active"))
    uncounted = as_dict(status.get("uncountedTerminatedPods"))
    pending = as_list(uncounted.get("succeeded")) + as_list(uncounted.get("failed"))
    if (write.finished_changed or write.uncounted_changed) and write.finished and pending:
        detail = "uncountedTerminatedPods needs to be empty for finished job"
        errs.append(invalid("status.uncountedTerminatedPods", status.get("uncountedTerminatedPods"), detail))
    return errs


def _first_overlap(completed: str, failed: str, total: int) -> int | None:
    """Where the two index lists first share an index, found as upstream finds it: one pass over both lists
    in step, skipping fragments that do not parse (the format rules report those) and advancing the side whose
    interval starts first. Lists out of order can hide an overlap from this pass, and then upstream reports
    none either."""
    if not completed or not failed:
        return None
    a: list[tuple[int, int] | None] = [_interval(f, total) for f in completed.split(",")]
    b: list[tuple[int, int] | None] = [_interval(f, total) for f in failed.split(",")]
    i = j = 0
    while i < len(a) and j < len(b):
        left, right = a[i], b[j]
        if left is None:
            i += 1
        elif right is None:
            j += 1
        elif left[0] <= right[1] and right[0] <= left[1]:
            return max(left[0], right[0])
        elif left[0] <= right[0]:
            i += 1
        else:
            j += 1
    return None


def _interval(fragment: str, total: int) -> tuple[int, int] | None:
    parsed = indexes.strict_intervals(fragment, total)
    return parsed[0] if isinstance(parsed, list) and parsed else None


def _validate_status_indexes(write: _StatusWrite) -> list[FieldError]:
    """completedIndexes and failedIndexes: well formed, below completions, disjoint, and only where they apply."""
    spec, status = write.spec, write.status
    total = _int(spec.get("completions"))
    per_index = spec.get("backoffLimitPerIndex")
    completed = "" if status.get("completedIndexes") is None else str(status["completedIndexes"])
    failed = None if status.get("failedIndexes") is None else str(status["failedIndexes"])
    errs: list[FieldError] = []
    if write.changed("completedIndexes"):
        problem = None if total is None else indexes.validate_indexes(completed, total)
        if problem is not None:
            detail = f"error parsing completedIndexes: {problem}"
            errs.append(invalid("status.completedIndexes", completed, detail))
        if completed and not is_indexed(write.new):
            detail = "cannot set non-empty completedIndexes when non-indexed completion mode"
            errs.append(invalid("status.completedIndexes", completed, detail))
    if write.changed("failedIndexes") and failed is not None:
        problem = None if total is None or per_index is None else indexes.validate_indexes(failed, total)
        if problem is not None:
            errs.append(invalid("status.failedIndexes", failed, f"error parsing failedIndexes: {problem}"))
        if per_index is None:
            detail = "cannot set non-null failedIndexes when backoffLimitPerIndex is null"
            errs.append(invalid("status.failedIndexes", failed, detail))
    if (write.changed("completedIndexes") or write.changed("failedIndexes")) and total is not None and failed:
        overlap = _first_overlap(completed, failed, total)
        if overlap is not None:
            detail = f"failedIndexes and completedIndexes overlap at index: {overlap}"
            errs.append(invalid("status.failedIndexes", failed, detail))
    return errs


def _may_finish_unstarted(job: Obj) -> bool:
    """A suspended Job with zero completions completes without ever starting (reference doc, §3)."""
    return is_suspended(job) and completions(job) == 0


def _validate_status_times(write: _StatusWrite) -> list[FieldError]:
    """startTime is set before the end and moves only across a suspension; completionTime marks success only."""
    status, old_status = write.status, write.old_status
    started, ended = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    old_started, old_ended = (
        parse_time(old_status.get("startTime")),
        parse_time(old_status.get("completionTime")),
    )
    stamp = status.get("completionTime")
    complete = write.has(COMPLETE)
    errs: list[FieldError] = []
    if ended is not None and old_ended is not None and ended != old_ended:
        errs.append(invalid("status.completionTime", stamp, "completionTime cannot be mutated"))
    unstarted_end = write.finished and started is None and not _may_finish_unstarted(write.new)
    if (write.finished_changed or write.time_changed("startTime")) and unstarted_end:
        errs.append(required("status.startTime", "startTime is required for finished job"))
    # A set startTime moves only while spec.suspend is true, or in the write that turns Suspended from True to
    # False (a controller resuming a Job after its user already cleared spec.suspend resets it there).
    start_moved = write.time_changed("startTime") and old_started is not None
    if start_moved and not is_suspended(write.new) and not write.resuming:
        # Upstream reports this as an Invalid value; the unit tests pin the Required wording for now.
        errs.append(required("status.startTime", "startTime cannot be removed for unsuspended job"))
    ends_before_start = started is not None and ended is not None and ended < started
    if (write.time_changed("startTime") or write.time_changed("completionTime")) and ends_before_start:
        errs.append(invalid("status.completionTime", stamp, "completionTime cannot be set before startTime"))
    if write.flipped(COMPLETE) or write.time_changed("completionTime"):
        if ended is not None and not complete:
            detail = "cannot set completionTime when there is no Complete=True condition"
            errs.append(invalid("status.completionTime", stamp, detail))
        if ended is None and complete:
            errs.append(required("status.completionTime", "completionTime is required for Complete jobs"))
    return errs


def validate_job_status_update(new: Obj, old: Obj) -> list[FieldError]:
    """A status write (the server has already copied the old spec into ``new``)."""
    new, old = as_dict(new), as_dict(old)
    write = _StatusWrite(new, old)
    errs = validate_object_meta_update(new.get("metadata"), old.get("metadata"))
    errs += _validate_status_values(write)
    errs += _validate_condition_transitions(write)
    errs += _validate_pod_counts(write)
    errs += _validate_status_indexes(write)
    return errs + _validate_status_times(write)
