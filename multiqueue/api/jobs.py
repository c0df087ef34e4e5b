"""batch/v1 Job rules, as the upstream API server applies them (Kubernetes 1.33, default feature gates).

Entry points other programs call:

- ``default_job(job) -> dict``: create-time defaulting, selector and label generation included (needs
  ``metadata.uid`` for the generated selector). Returns a new dict.
- ``validate_job(job) -> list[FieldError]``: create validation of a defaulted Job.
- ``validate_job_update(new, old) -> list[FieldError]``: spec rules plus immutability.
- ``validate_job_status_update(new, old) -> list[FieldError]``: the KEP-4368 status rules that protect API
  consumers from a faulty controller. Rules about a field run only when that field (or what it depends on)
  changed, so a Job whose old status already breaks a rule can still be updated.

Everything here reads plain dicts and never raises on malformed input: a wrong type counts as absent.
"""

from __future__ import annotations

import copy
import re
from datetime import datetime
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
    validate_object_meta,
    validate_object_meta_update,
)

Obj = dict[str, Any]

# Conditions and their reasons.
COMPLETE: Final = "Complete"
FAILED: Final = "Failed"
SUSPENDED: Final = "Suspended"
FAILURE_TARGET: Final = "FailureTarget"
SUCCESS_CRITERIA_MET: Final = "SuccessCriteriaMet"
BACKOFF_LIMIT_EXCEEDED: Final = "BackoffLimitExceeded"
DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
POD_FAILURE_POLICY: Final = "PodFailurePolicy"
MAX_FAILED_INDEXES_EXCEEDED: Final = "MaxFailedIndexesExceeded"
FAILED_INDEXES: Final = "FailedIndexes"
COMPLETIONS_REACHED: Final = "CompletionsReached"
SUCCESS_POLICY: Final = "SuccessPolicy"
JOB_SUSPENDED: Final = "JobSuspended"
JOB_RESUMED: Final = "JobResumed"

# Completion modes and policies.
NON_INDEXED: Final = "NonIndexed"
INDEXED: Final = "Indexed"
TERMINATING_OR_FAILED: Final = "TerminatingOrFailed"
FAILED_ONLY: Final = "Failed"

# Well-known names.
BUILTIN_CONTROLLER: Final = "kubernetes.io/job-controller"
COMPLETION_INDEX: Final = pods.COMPLETION_INDEX
INDEX_FAILURE_COUNT: Final = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT: Final = "batch.kubernetes.io/job-index-ignored-failure-count"
TRACKING_FINALIZER: Final = "batch.kubernetes.io/job-tracking"
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL: Final = "job-name"
LEGACY_CONTROLLER_UID_LABEL: Final = "controller-uid"

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
_HTTP_PATH: Final = re.compile(r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+")


# --- accessors ----------------------------------------------------------------------------------------------


def _int(value: Any) -> int | None:
    """An integer field, or None when absent or not an integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def spec_of(job: Any) -> Obj:
    return as_dict(as_dict(job).get("spec"))


def status_of(job: Any) -> Obj:
    return as_dict(as_dict(job).get("status"))


def conditions_of(job: Any) -> list[Any]:
    return as_list(status_of(job).get("conditions"))


def completion_mode(job: Any) -> str:
    return str(spec_of(job).get("completionMode") or NON_INDEXED)


def is_indexed(job: Any) -> bool:
    return completion_mode(job) == INDEXED


def completions(job: Any) -> int | None:
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
    """True when the built-in (or our embedded) Job controller owns the Job: managedBy unset or the reserved value."""
    return managed_by(job) in (None, BUILTIN_CONTROLLER)


def has_condition(job: Any, type_: str) -> bool:
    return condition_is_true(conditions_of(job), type_)


def is_complete(job: Any) -> bool:
    return has_condition(job, COMPLETE)


def is_failed(job: Any) -> bool:
    return has_condition(job, FAILED)


def is_finished(job: Any) -> bool:
    """Complete or Failed with status True; completionTime alone does not count."""
    return is_complete(job) or is_failed(job)


def finished_condition(job: Any) -> tuple[str, datetime | None] | None:
    """("Complete" | "Failed", the condition's lastTransitionTime) once finished, else None."""
    for type_ in (COMPLETE, FAILED):
        cond = find_condition(conditions_of(job), type_)
        if cond is not None and cond.get("status") == "True":
            return type_, parse_time(cond.get("lastTransitionTime"))
    return None


# --- defaulting ---------------------------------------------------------------------------------------------


def default_job_spec(spec: Obj) -> Obj:
    """Spec defaults (also what a CronJob's jobTemplate.spec gets)."""
    result = copy.deepcopy(as_dict(spec))
    if result.get("parallelism") is None and result.get("completions") is None:
        result["parallelism"] = 1
        result["completions"] = 1
    elif result.get("parallelism") is None:
        result["parallelism"] = 1
    if result.get("backoffLimit") is None:
        result["backoffLimit"] = MAX_INT32 if result.get("backoffLimitPerIndex") is not None else 6
    result.setdefault("completionMode", NON_INDEXED)
    result.setdefault("suspend", False)
    if result.get("podReplacementPolicy") is None:
        result["podReplacementPolicy"] = (
            FAILED_ONLY if result.get("podFailurePolicy") else TERMINATING_OR_FAILED
        )
    for rule in as_list(as_dict(result.get("podFailurePolicy")).get("rules")):
        for pattern in as_list(as_dict(rule).get("onPodConditions")):
            if isinstance(pattern, dict) and not pattern.get("status"):
                pattern["status"] = "True"
    template = as_dict(result.setdefault("template", {}))
    if isinstance(result["template"], dict):
        template["spec"] = pods.default_pod_spec(as_dict(template.get("spec")))
    return result


def default_job(job: Obj) -> Obj:
    """Create-time defaults, then the generated selector and pod labels (unless manualSelector is true)."""
    result = copy.deepcopy(as_dict(job))
    spec = default_job_spec(as_dict(result.get("spec")))
    result["spec"] = spec
    result.pop("status", None)
    meta = as_dict(result.setdefault("metadata", {}))
    if not isinstance(result["metadata"], dict):
        return result
    template = as_dict(spec.get("template"))
    template_meta = as_dict(template.setdefault("metadata", {}))
    template_labels = as_dict(template_meta.get("labels"))
    if not meta.get("labels") and template_labels:
        meta["labels"] = dict(template_labels)
    if spec.get("manualSelector") is True:
        return result
    spec.setdefault("manualSelector", False)
    uid, name = meta.get("uid"), meta.get("name")
    labels = dict(template_labels)
    if uid:
        labels.setdefault(LEGACY_CONTROLLER_UID_LABEL, str(uid))
        labels.setdefault(CONTROLLER_UID_LABEL, str(uid))
    if name:
        labels.setdefault(LEGACY_JOB_NAME_LABEL, str(name))
        labels.setdefault(JOB_NAME_LABEL, str(name))
    template_meta["labels"] = labels
    if spec.get("selector") is None and uid:
        spec["selector"] = {"matchLabels": {CONTROLLER_UID_LABEL: str(uid)}}
    return result


# --- spec validation ----------------------------------------------------------------------------------------


def _domain_prefixed_path(path: str, value: str) -> list[FieldError]:
    host, slash, rest = value.partition("/")
    if not slash or not host or not rest:
        return [invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    errs = [invalid(path, host, m) for m in dns1123_subdomain_errors(host)]
    if not _HTTP_PATH.fullmatch(rest):
        errs.append(
            invalid(
                path, rest, "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"
            )
        )
    return errs


def _validate_selector(selector: Any, path: str) -> list[FieldError]:
    data = as_dict(selector)
    errs: list[FieldError] = []
    for key, value in as_dict(data.get("matchLabels")).items():
        errs += [invalid(f"{path}.matchLabels", key, m) for m in qualified_name_errors(str(key))]
        errs += [invalid(f"{path}.matchLabels", value, m) for m in label_value_errors(str(value))]
    for i, expression in enumerate(as_list(data.get("matchExpressions"))):
        expr = as_dict(expression)
        where = f"{path}.matchExpressions[{i}]"
        operator = expr.get("operator")
        values = as_list(expr.get("values"))
        if operator in ("In", "NotIn"):
            if not values:
                errs.append(
                    required(f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'")
                )
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errs.append(
                    forbidden(
                        f"{where}.values",
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    )
                )
        else:
            errs.append(invalid(f"{where}.operator", operator, "not a valid selector operator"))
        errs += [
            invalid(f"{where}.key", expr.get("key"), m)
            for m in qualified_name_errors(str(expr.get("key", "")))
        ]
    return errs


def _selector_matches(selector: Any, labels: dict[str, Any]) -> bool | None:
    """Whether a metav1.LabelSelector selects ``labels``; None when the selector is malformed."""
    from multiqueue.api.selectors import SelectorError, label_selector_from_dict

    try:
        return label_selector_from_dict(selector).matches({str(k): str(v) for k, v in labels.items()})
    except SelectorError:
        return None


def _validate_pod_failure_policy(spec: Obj, path: str) -> list[FieldError]:
    policy = as_dict(spec.get("podFailurePolicy"))
    rules = as_list(policy.get("rules"))
    errs: list[FieldError] = []
    if len(rules) > MAX_POD_FAILURE_POLICY_RULES:
        errs.append(
            invalid(f"{path}.rules", len(rules), f"must have at most {MAX_POD_FAILURE_POLICY_RULES} items")
        )
    pod_spec = as_dict(as_dict(spec.get("template")).get("spec"))
    names = {
        str(as_dict(c).get("name"))
        for field in ("containers", "initContainers")
        for c in as_list(pod_spec.get(field))
    }
    for i, raw in enumerate(rules):
        rule = as_dict(raw)
        where = f"{path}.rules[{i}]"
        action = rule.get("action")
        actions = ["Count", "FailIndex", "FailJob", "Ignore"]
        if not action:
            errs.append(required(f"{where}.action", "valid values: " + str(actions).replace("'", '"')))
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                errs.append(invalid(f"{where}.action", action, "requires the backoffLimitPerIndex to be set"))
        elif action not in actions:
            errs.append(not_supported(f"{where}.action", action, actions))
        on_exit = rule.get("onExitCodes")
        on_conditions = as_list(rule.get("onPodConditions"))
        if on_exit is not None:
            errs += _validate_on_exit_codes(as_dict(on_exit), f"{where}.onExitCodes", names)
        if len(on_conditions) > MAX_POD_CONDITION_PATTERNS:
            errs.append(
                invalid(
                    f"{where}.onPodConditions",
                    len(on_conditions),
                    f"must have at most {MAX_POD_CONDITION_PATTERNS} items",
                )
            )
        for j, raw_pattern in enumerate(on_conditions):
            pattern = as_dict(raw_pattern)
            errs += [
                invalid(f"{where}.onPodConditions[{j}].type", pattern.get("type"), m)
                for m in qualified_name_errors(str(pattern.get("type", "")))
            ]
            status = pattern.get("status")
            if not status:
                errs.append(
                    required(
                        f"{where}.onPodConditions[{j}].status", 'valid values: ["False" "True" "Unknown"]'
                    )
                )
            elif status not in ("True", "False", "Unknown"):
                errs.append(
                    not_supported(
                        f"{where}.onPodConditions[{j}].status", status, ["False", "True", "Unknown"]
                    )
                )
        if on_exit is not None and on_conditions:
            errs.append(
                invalid(where, OMITTED, "specifying both OnExitCodes and OnPodConditions is not supported")
            )
        if on_exit is None and not on_conditions:
            errs.append(
                invalid(where, OMITTED, "specifying one of OnExitCodes and OnPodConditions is required")
            )
    return errs


def _validate_on_exit_codes(on_exit: Obj, path: str, names: set[str]) -> list[FieldError]:
    errs: list[FieldError] = []
    operator = on_exit.get("operator")
    if not operator:
        errs.append(required(f"{path}.operator", 'valid values: ["In" "NotIn"]'))
    elif operator not in ("In", "NotIn"):
        errs.append(not_supported(f"{path}.operator", operator, ["In", "NotIn"]))
    container = on_exit.get("containerName")
    if container is not None and container not in names:
        errs.append(
            invalid(
                f"{path}.containerName",
                container,
                "must be one of the container or initContainer names in the pod template",
            )
        )
    values = as_list(on_exit.get("values"))
    if not values:
        errs.append(invalid(f"{path}.values", values, "at least one value is required"))
    elif len(values) > MAX_EXIT_CODE_VALUES:
        errs.append(invalid(f"{path}.values", len(values), f"must have at most {MAX_EXIT_CODE_VALUES} items"))
    seen: set[Any] = set()
    ordered = True
    for j, value in enumerate(values):
        if operator == "In" and value == 0:
            errs.append(invalid(f"{path}.values[{j}]", value, "must not be 0 for the In operator"))
        if value in seen:
            errs.append(duplicate(f"{path}.values[{j}]", value))
        seen.add(value)
        if j > 0 and isinstance(value, int) and isinstance(values[j - 1], int) and values[j - 1] > value:
            ordered = False
    if not ordered:
        errs.append(invalid(f"{path}.values", values, "must be ordered"))
    return errs


def _validate_success_policy(spec: Obj, path: str) -> list[FieldError]:
    rules = as_list(as_dict(spec.get("successPolicy")).get("rules"))
    total_completions = _int(spec.get("completions")) or 0
    errs: list[FieldError] = []
    if not rules:
        errs.append(
            required(
                f"{path}.rules", "at least one rules must be specified when the successPolicy is specified"
            )
        )
    if len(rules) > MAX_SUCCESS_POLICY_RULES:
        errs.append(
            invalid(f"{path}.rules", len(rules), f"must have at most {MAX_SUCCESS_POLICY_RULES} items")
        )
    for i, raw in enumerate(rules):
        rule = as_dict(raw)
        where = f"{path}.rules[{i}]"
        count = rule.get("succeededCount")
        listed = rule.get("succeededIndexes")
        if count is None and listed is None:
            errs.append(
                required(where, "at least one of succeededCount or succeededIndexes must be specified")
            )
        total_indexes = 0
        if listed is not None:
            text = str(listed)
            if len(text) > MAX_SUCCEEDED_INDEXES_LENGTH:
                errs.append(too_long(f"{where}.succeededIndexes", MAX_SUCCEEDED_INDEXES_LENGTH))
            parsed = indexes.strict_intervals(text, total_completions)
            if isinstance(parsed, str):
                errs.append(
                    invalid(f"{where}.succeededIndexes", text, f"error parsing succeededIndexes: {parsed}")
                )
            else:
                total_indexes = sum(last - first + 1 for first, last in parsed)
        if count is not None:
            errs += non_negative(f"{where}.succeededCount", count)
            if isinstance(count, int) and count > total_completions:
                errs.append(
                    invalid(
                        f"{where}.succeededCount",
                        count,
                        f"must be less than or equal to {total_completions} (the number of specified completions)",
                    )
                )
            if listed is not None and isinstance(count, int) and count > total_indexes:
                errs.append(
                    invalid(
                        f"{where}.succeededCount",
                        count,
                        f"must be less than or equal to {total_indexes} (the number of indexes in the specified "
                        "succeededIndexes field)",
                    )
                )
    return errs


def _validate_spec_fields(spec: Obj, path: str) -> list[FieldError]:
    """Upstream's validateJobSpec: everything but the selector."""
    errs: list[FieldError] = []
    for field in (
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
    ):
        errs += non_negative(f"{path}.{field}", spec.get(field))
    max_failed = _int(spec.get("maxFailedIndexes"))
    per_index = spec.get("backoffLimitPerIndex")
    count = _int(spec.get("completions"))
    par = _int(spec.get("parallelism"))
    if max_failed is not None:
        errs += non_negative(f"{path}.maxFailedIndexes", max_failed)
        if per_index is None:
            errs.append(required(f"{path}.backoffLimitPerIndex", "when maxFailedIndexes is specified"))
    owner = spec.get("managedBy")
    if owner is not None:
        if not isinstance(owner, str) or not owner:
            errs.append(required(f"{path}.managedBy"))
        else:
            errs += _domain_prefixed_path(f"{path}.managedBy", owner)
            if len(owner) > MAX_MANAGED_BY_LENGTH:
                errs.append(too_long(f"{path}.managedBy", MAX_MANAGED_BY_LENGTH))
    mode = spec.get("completionMode")
    if mode is not None and mode not in (NON_INDEXED, INDEXED):
        errs.append(not_supported(f"{path}.completionMode", mode, [NON_INDEXED, INDEXED]))
    if mode == INDEXED:
        if count is None:
            errs.append(required(f"{path}.completions", "when completion mode is Indexed"))
        if par is not None and par > MAX_PARALLELISM_INDEXED:
            errs.append(
                invalid(
                    f"{path}.parallelism",
                    par,
                    f"must be less than or equal to {MAX_PARALLELISM_INDEXED} when completion mode is Indexed",
                )
            )
        if count is not None and max_failed is not None and max_failed > count:
            errs.append(
                invalid(f"{path}.maxFailedIndexes", max_failed, "must be less than or equal to completions")
            )
        if max_failed is not None and max_failed > MAX_FAILED_INDEXES_INDEXED:
            errs.append(
                invalid(
                    f"{path}.maxFailedIndexes",
                    max_failed,
                    f"must be less than or equal to {MAX_FAILED_INDEXES_INDEXED}",
                )
            )
        if count is not None and count > COMPLETIONS_SOFT_LIMIT and per_index is not None:
            suffix = (
                f"when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
            )
            if max_failed is None:
                errs.append(
                    required(
                        f"{path}.maxFailedIndexes",
                        f"must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}",
                    )
                )
            if par is not None and par > PARALLELISM_LIMIT_HIGH_COMPLETIONS:
                errs.append(
                    invalid(
                        f"{path}.parallelism",
                        par,
                        f"must be less than or equal to {PARALLELISM_LIMIT_HIGH_COMPLETIONS} {suffix}",
                    )
                )
            if max_failed is not None and max_failed > MAX_FAILED_INDEXES_HIGH_COMPLETIONS:
                errs.append(
                    invalid(
                        f"{path}.maxFailedIndexes",
                        max_failed,
                        f"must be less than or equal to {MAX_FAILED_INDEXES_HIGH_COMPLETIONS} {suffix}",
                    )
                )
    if mode in (None, NON_INDEXED):
        if per_index is not None:
            errs.append(
                invalid(f"{path}.backoffLimitPerIndex", per_index, "requires indexed completion mode")
            )
        if max_failed is not None:
            errs.append(invalid(f"{path}.maxFailedIndexes", max_failed, "requires indexed completion mode"))
    if spec.get("podFailurePolicy") is not None:
        errs += _validate_pod_failure_policy(spec, f"{path}.podFailurePolicy")
    if spec.get("successPolicy") is not None:
        if mode != INDEXED:
            errs.append(
                invalid(
                    f"{path}.successPolicy", spec.get("successPolicy"), "requires indexed completion mode"
                )
            )
        else:
            errs += _validate_success_policy(spec, f"{path}.successPolicy")
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None:
        if spec.get("podFailurePolicy") is not None:
            if replacement != FAILED_ONLY:
                errs.append(not_supported(f"{path}.podReplacementPolicy", replacement, [FAILED_ONLY]))
        elif replacement not in (FAILED_ONLY, TERMINATING_OR_FAILED):
            errs.append(
                not_supported(
                    f"{path}.podReplacementPolicy", replacement, [FAILED_ONLY, TERMINATING_OR_FAILED]
                )
            )
    template = spec.get("template")
    errs += pods.validate_pod_template(template, f"{path}.template")
    restart = as_dict(as_dict(template).get("spec")).get("restartPolicy")
    restart_path = f"{path}.template.spec.restartPolicy"
    if restart in (None, "", "Always"):
        errs.append(required(restart_path, 'valid values: "OnFailure", "Never"'))
    elif restart not in ("OnFailure", "Never"):
        errs.append(not_supported(restart_path, restart, ["OnFailure", "Never"]))
    elif spec.get("podFailurePolicy") is not None and restart != "Never":
        errs.append(
            invalid(restart_path, restart, 'only "Never" is supported when podFailurePolicy is specified')
        )
    return errs


def _validate_spec(spec: Obj, path: str) -> list[FieldError]:
    """Upstream's ValidateJobSpec: the fields plus a selector that selects the template's labels."""
    errs = _validate_spec_fields(spec, path)
    selector = spec.get("selector")
    if selector is None:
        errs.append(required(f"{path}.selector"))
        return errs
    errs += _validate_selector(selector, f"{path}.selector")
    labels = as_dict(as_dict(as_dict(spec.get("template")).get("metadata")).get("labels"))
    if _selector_matches(selector, labels) is False:
        errs.append(
            invalid(f"{path}.template.metadata.labels", labels, "`selector` does not match template `labels`")
        )
    return errs


def _validate_generated_selector(job: Obj) -> list[FieldError]:
    spec = spec_of(job)
    if spec.get("manualSelector") is True or spec.get("selector") is None:
        return []
    meta = metadata(job)
    uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
    errs: list[FieldError] = []
    if not uid:
        errs.append(required("metadata.uid"))
    labels = as_dict(as_dict(as_dict(spec.get("template")).get("metadata")).get("labels"))
    expected = {
        LEGACY_CONTROLLER_UID_LABEL: uid,
        LEGACY_JOB_NAME_LABEL: name,
        CONTROLLER_UID_LABEL: uid,
        JOB_NAME_LABEL: name,
    }
    for key, value in expected.items():
        where = f"spec.template.metadata.labels[{key}]"
        if key not in labels:
            errs.append(required(where))
        elif labels[key] != value:
            errs.append(invalid(where, labels[key], f"must be '{value}'"))
    if _selector_matches(spec.get("selector"), expected) is False:
        errs.append(invalid("spec.selector", spec.get("selector"), "`selector` not auto-generated"))
    return errs


def validate_job(job: Obj) -> list[FieldError]:
    errs = validate_object_meta(as_dict(job).get("metadata"), namespaced=True)
    errs += _validate_generated_selector(as_dict(job))
    spec = spec_of(job)
    errs += _validate_spec(spec, "spec")
    count = _int(spec.get("completions"))
    if spec.get("completionMode") == INDEXED and count is not None and count > 0:
        hostname = f"{metadata(job).get('name', '')}-{count - 1}"
        if dns1123_label_errors(hostname):
            errs.append(
                invalid(
                    "metadata.name",
                    metadata(job).get("name"),
                    f"will not able to create pod with invalid DNS label: {hostname}",
                )
            )
    return errs


def validate_job_template_spec(template: Obj, path: str) -> list[FieldError]:
    """A CronJob's ``spec.jobTemplate``: the spec rules, with a selector left for the Job to generate."""
    spec = as_dict(as_dict(template).get("spec"))
    errs = _validate_spec_fields(spec, f"{path}.spec")
    if spec.get("selector") is not None:
        errs.append(
            invalid(f"{path}.spec.selector", spec.get("selector"), "`selector` will be auto-generated")
        )
    if spec.get("manualSelector") is True:
        errs.append(not_supported(f"{path}.spec.manualSelector", True, ["nil", "false"]))
    return errs


def _mutable_template_fields_removed(template: Any) -> Obj:
    """The template without what a never-started suspended Job may still change."""
    result = copy.deepcopy(as_dict(template))
    meta = as_dict(result.get("metadata"))
    meta.pop("labels", None)
    meta.pop("annotations", None)
    pod_spec = as_dict(result.get("spec"))
    for field in ("nodeSelector", "tolerations", "schedulingGates"):
        pod_spec.pop(field, None)
    affinity = as_dict(pod_spec.get("affinity"))
    affinity.pop("nodeAffinity", None)
    if "affinity" in pod_spec and not affinity:
        pod_spec.pop("affinity")
    return result


def validate_job_update(new: Obj, old: Obj) -> list[FieldError]:
    errs = validate_object_meta_update(as_dict(new).get("metadata"), as_dict(old).get("metadata"))
    spec, old_spec = spec_of(new), spec_of(old)
    errs += _validate_spec(spec, "spec")
    if spec.get("completions") != old_spec.get("completions"):
        elastic = spec.get("completionMode") == INDEXED and spec.get("completions") is not None
        if not elastic:
            errs.append(immutable("spec.completions", spec.get("completions")))
        elif spec.get("completions") != spec.get("parallelism"):
            errs.append(
                invalid(
                    "spec.completions",
                    spec.get("completions"),
                    "can only be modified in tandem with spec.parallelism",
                )
            )
    for field in (
        "selector",
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
    ):
        if spec.get(field) != old_spec.get(field):
            errs.append(immutable(f"spec.{field}", spec.get(field)))
    template, old_template = spec.get("template"), old_spec.get("template")
    if old_spec.get("suspend") is True and status_of(old).get("startTime") is None:
        template, old_template = (
            _mutable_template_fields_removed(template),
            _mutable_template_fields_removed(old_template),
        )
    if template != old_template:
        errs.append(immutable("spec.template", spec.get("template")))
    return errs


# --- status validation --------------------------------------------------------------------------------------


def _uncounted(status: Obj) -> tuple[list[Any], list[Any]]:
    uncounted = as_dict(status.get("uncountedTerminatedPods"))
    return as_list(uncounted.get("succeeded")), as_list(uncounted.get("failed"))


def _bad_condition(detail: str) -> FieldError:
    return invalid("status.conditions", OMITTED, detail)


def validate_job_status_update(new: Obj, old: Obj) -> list[FieldError]:
    errs = validate_object_meta_update(as_dict(new).get("metadata"), as_dict(old).get("metadata"))
    status, old_status = status_of(new), status_of(old)
    spec = spec_of(new)
    changed = {key for key in set(status) | set(old_status) if status.get(key) != old_status.get(key)}

    def flipped(type_: str) -> bool:
        return has_condition(new, type_) != has_condition(old, type_)

    complete, failed = is_complete(new), is_failed(new)
    failure_target = has_condition(new, FAILURE_TARGET)
    success_met = has_condition(new, SUCCESS_CRITERIA_MET)
    finished = complete or failed
    finished_changed = finished != is_finished(old)
    count = _int(spec.get("completions"))

    # Always.
    for field in ("active", "succeeded", "failed", "ready", "terminating"):
        errs += non_negative(f"status.{field}", status.get(field))
    seen: set[Any] = set()
    succeeded_uids, failed_uids = _uncounted(status)
    for kind, uids in (("succeeded", succeeded_uids), ("failed", failed_uids)):
        for i, uid in enumerate(uids):
            where = f"status.uncountedTerminatedPods.{kind}[{i}]"
            if not uid:
                errs.append(invalid(where, uid if uid is not None else "", "must not be empty"))
            elif uid in seen:
                errs.append(duplicate(where, uid))
            else:
                seen.add(uid)
    if success_met and failed:
        errs.append(_bad_condition("cannot set SuccessCriteriaMet=True and Failed=true conditions"))
    if success_met and failure_target:
        errs.append(_bad_condition("cannot set SuccessCriteriaMet=True and FailureTarget=true conditions"))
    if spec.get("successPolicy") is not None and complete and not success_met:
        errs.append(
            _bad_condition(
                "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True"
            )
        )
    if has_condition(old, SUCCESS_CRITERIA_MET) and not success_met:
        errs.append(_bad_condition("cannot disable the SuccessCriteriaMet=True condition"))
    if is_complete(old) and not has_condition(old, SUCCESS_CRITERIA_MET) and success_met:
        errs.append(
            _bad_condition("cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions")
        )
    for type_ in (FAILED, COMPLETE, FAILURE_TARGET):
        if has_condition(old, type_) and not has_condition(new, type_):
            errs.append(_bad_condition(f"cannot disable the terminal {type_}=True condition"))
    new_failed, old_failed = _int(status.get("failed")) or 0, _int(old_status.get("failed")) or 0
    if new_failed < old_failed:
        errs.append(invalid("status.failed", new_failed, "cannot decrease the failed counter"))
    new_succeeded, old_succeeded = _int(status.get("succeeded")) or 0, _int(old_status.get("succeeded")) or 0
    elastic = is_indexed(new) and count is not None and count == _int(spec.get("parallelism"))
    if not elastic and new_succeeded < old_succeeded:
        errs.append(invalid("status.succeeded", new_succeeded, "cannot decrease the succeeded counter"))
    completion_time, old_completion_time = status.get("completionTime"), old_status.get("completionTime")
    if (
        completion_time
        and old_completion_time
        and parse_time(completion_time) != parse_time(old_completion_time)
    ):
        errs.append(invalid("status.completionTime", completion_time, "completionTime cannot be mutated"))

    # Only when what the rule looks at changed.
    completed_text = status.get("completedIndexes") or ""
    failed_text = status.get("failedIndexes")
    if "completedIndexes" in changed:
        if count is not None:
            problem = indexes.validate_indexes(str(completed_text), count)
            if problem is not None:
                errs.append(
                    invalid(
                        "status.completedIndexes",
                        completed_text,
                        f"error parsing completedIndexes: {problem}",
                    )
                )
        if completed_text and not is_indexed(new):
            errs.append(
                invalid(
                    "status.completedIndexes",
                    completed_text,
                    "cannot set non-empty completedIndexes when non-indexed completion mode",
                )
            )
    if "failedIndexes" in changed and failed_text is not None:
        if count is not None and spec.get("backoffLimitPerIndex") is not None:
            problem = indexes.validate_indexes(str(failed_text), count)
            if problem is not None:
                errs.append(
                    invalid("status.failedIndexes", failed_text, f"error parsing failedIndexes: {problem}")
                )
        if spec.get("backoffLimitPerIndex") is None:
            errs.append(
                invalid(
                    "status.failedIndexes",
                    failed_text,
                    "cannot set non-null failedIndexes when backoffLimitPerIndex is null",
                )
            )
    if (
        ("failedIndexes" in changed or "completedIndexes" in changed)
        and failed_text is not None
        and count is not None
    ):
        done = indexes.strict_intervals(str(completed_text), count)
        lost = indexes.strict_intervals(str(failed_text), count)
        if not isinstance(done, str) and not isinstance(lost, str):
            overlap = indexes.first_overlap(done, lost)
            if overlap is not None:
                errs.append(
                    invalid(
                        "status.failedIndexes",
                        failed_text,
                        f"failedIndexes and completedIndexes overlap at index: {overlap}",
                    )
                )
    active = _int(status.get("active")) or 0
    if (finished_changed or "active" in changed) and active > 0 and finished:
        errs.append(invalid("status.active", active, "active>0 is invalid for finished job"))
    terminating = _int(status.get("terminating"))
    if (finished_changed or "terminating" in changed) and terminating and finished:
        errs.append(invalid("status.terminating", terminating, "terminating>0 is invalid for finished job"))
    ready = _int(status.get("ready"))
    if ("ready" in changed or "active" in changed) and ready is not None and ready > active:
        errs.append(invalid("status.ready", ready, "cannot set more ready pods than active"))
    start_time = status.get("startTime")
    never_ran = is_suspended(new) and count == 0
    if (finished_changed or "startTime" in changed) and finished and not start_time and not never_ran:
        errs.append(required("status.startTime", "startTime is required for finished job"))
    if (
        (finished_changed or "uncountedTerminatedPods" in changed)
        and finished
        and (succeeded_uids or failed_uids)
    ):
        errs.append(
            invalid(
                "status.uncountedTerminatedPods",
                status.get("uncountedTerminatedPods"),
                "uncountedTerminatedPods needs to be empty for finished job",
            )
        )
    old_start = old_status.get("startTime")
    if "startTime" in changed and old_start and not is_suspended(new):
        resumed = has_condition(old, SUSPENDED) and not has_condition(new, SUSPENDED)
        if not resumed:
            errs.append(required("status.startTime", "startTime cannot be removed for unsuspended job"))
    if ("startTime" in changed or "completionTime" in changed) and start_time and completion_time:
        started, ended = parse_time(start_time), parse_time(completion_time)
        if started is not None and ended is not None and ended < started:
            errs.append(
                invalid(
                    "status.completionTime", completion_time, "completionTime cannot be set before startTime"
                )
            )
    if flipped(COMPLETE) or "completionTime" in changed:
        if completion_time and not complete:
            errs.append(
                invalid(
                    "status.completionTime",
                    completion_time,
                    "cannot set completionTime when there is no Complete=True condition",
                )
            )
        if complete and not completion_time:
            errs.append(required("status.completionTime", "completionTime is required for Complete jobs"))
    if (flipped(COMPLETE) or flipped(FAILED)) and complete and failed:
        errs.append(_bad_condition("cannot set Complete=True and Failed=true conditions"))
    if (flipped(COMPLETE) or flipped(FAILURE_TARGET)) and complete and failure_target:
        errs.append(_bad_condition("cannot set Complete=True and FailureTarget=true conditions"))
    if flipped(FAILED) and failed and not failure_target:
        errs.append(
            _bad_condition("cannot set Failed=True condition without the FailureTarget=true condition")
        )
    if (flipped(COMPLETE) or flipped(SUCCESS_CRITERIA_MET)) and complete and not success_met:
        errs.append(
            _bad_condition("cannot set Complete=True condition without the SuccessCriteriaMet=true condition")
        )
    return errs
