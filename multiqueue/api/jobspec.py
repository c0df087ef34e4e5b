"""Create validation of a defaulted batch/v1 Job, as the upstream API server applies it (Kubernetes 1.33/1.34,
default feature gates): the spec's fields, the selector and the pod labels it must match, and the CronJob job
template's variant of the same rules. The two policies have their rules in ``jobpolicies``.

A value of the wrong type is reported when it is a number upstream would refuse to decode, and otherwise counts
as absent.
"""

from __future__ import annotations

import re
from typing import Any, Final

from multiqueue.api import jobpolicies, jobs, pods
from multiqueue.api.errors import (
    FieldError,
    SelectorError,
    forbidden,
    invalid,
    non_negative_integer,
    not_supported,
    required,
    too_long,
)
from multiqueue.api.labelselectors import label_selector_from_dict
from multiqueue.api.meta import (
    as_dict,
    as_int,
    as_list,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_value_errors,
    metadata,
    qualified_name_errors,
    validate_labels,
    validate_object_meta,
)
from multiqueue.api.types import Obj

# Limits, with upstream's values.
MAX_MANAGED_BY_LENGTH: Final = 63
MAX_PARALLELISM_INDEXED: Final = 100_000
MAX_FAILED_INDEXES_INDEXED: Final = 100_000
COMPLETIONS_SOFT_LIMIT: Final = 100_000
PARALLELISM_LIMIT_HIGH_COMPLETIONS: Final = 10_000
MAX_FAILED_INDEXES_HIGH_COMPLETIONS: Final = 10_000

_HTTP_PATH_FMT: Final = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"
_HTTP_PATH: Final = re.compile(_HTTP_PATH_FMT)
_SPEC_INTEGERS: Final = (
    "parallelism",
    "completions",
    "activeDeadlineSeconds",
    "backoffLimit",
    "ttlSecondsAfterFinished",
    "backoffLimitPerIndex",
    "maxFailedIndexes",
)


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


def _validate_high_completions(spec: Obj, path: str) -> list[FieldError]:
    """More than 100000 completions with a per-index limit needs tighter bounds on what runs and fails."""
    width = as_int(spec.get("parallelism"))
    max_failed = as_int(spec.get("maxFailedIndexes"))
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
    total = as_int(spec.get("completions"))
    width = as_int(spec.get("parallelism"))
    max_failed = as_int(spec.get("maxFailedIndexes"))
    errs: list[FieldError] = []
    if spec.get("completions") is None:
        errs.append(required(f"{path}.completions", f"when completion mode is {jobs.INDEXED}"))
    if width is not None and width > MAX_PARALLELISM_INDEXED:
        detail = (
            f"must be less than or equal to {MAX_PARALLELISM_INDEXED} when completion mode is {jobs.INDEXED}"
        )
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
    if mode == jobs.INDEXED:
        return _validate_indexed(spec, path)
    if mode is not None and mode != jobs.NON_INDEXED:
        return [not_supported(f"{path}.completionMode", mode, [jobs.NON_INDEXED, jobs.INDEXED])]
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
        supported = [jobs.FAILED_ONLY]
    else:
        supported = [jobs.FAILED_ONLY, jobs.TERMINATING_OR_FAILED]
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
    errs = [e for field in _SPEC_INTEGERS for e in non_negative_integer(f"{path}.{field}", spec.get(field))]
    if spec.get("maxFailedIndexes") is not None and spec.get("backoffLimitPerIndex") is None:
        errs.append(required(f"{path}.backoffLimitPerIndex", "when maxFailedIndexes is specified"))
    if spec.get("managedBy") is not None:
        errs += _validate_managed_by(spec.get("managedBy"), f"{path}.managedBy")
    errs += _validate_completion_mode(spec, path)
    if spec.get("podFailurePolicy") is not None:
        errs += jobpolicies.validate_pod_failure_policy(spec, f"{path}.podFailurePolicy")
    if spec.get("successPolicy") is not None and spec.get("completionMode") != jobs.INDEXED:
        errs.append(
            invalid(f"{path}.successPolicy", spec["successPolicy"], "requires indexed completion mode")
        )
    elif spec.get("successPolicy") is not None:
        errs += jobpolicies.validate_success_policy(spec, f"{path}.successPolicy")
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
    labels = jobs.template_labels(spec)
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
    spec = jobs.spec_of(job)
    if spec.get("manualSelector") is True or spec.get("selector") is None:
        return []
    meta = metadata(job)
    uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
    errs = [] if uid else [required("metadata.uid")]
    expected = {jobs.LEGACY_CONTROLLER_UID_LABEL: uid, jobs.LEGACY_JOB_NAME_LABEL: name}
    if require_prefixed_labels:
        expected |= {jobs.CONTROLLER_UID_LABEL: uid, jobs.JOB_NAME_LABEL: name}
    labels = jobs.template_labels(spec)
    for key, value in expected.items():
        errs += _has_label(labels, key, value)
    if _selector_matches(spec.get("selector"), expected) is False:
        errs.append(invalid("spec.selector", spec.get("selector"), "`selector` not auto-generated"))
    return errs


def _validate_indexed_hostname(job: Obj) -> list[FieldError]:
    """Indexed pods get "<job>-<index>" as hostname, which must stay a DNS label up to the last index."""
    spec = jobs.spec_of(job)
    total = as_int(spec.get("completions"))
    if spec.get("completionMode") != jobs.INDEXED or total is None or total <= 0:
        return []
    name = metadata(job).get("name")
    hostname = f"{name or ''}-{total - 1}"
    if not dns1123_label_errors(hostname):
        return []
    return [invalid("metadata.name", name, f"will not able to create pod with invalid DNS label: {hostname}")]


def validate_job_body(job: Obj, require_prefixed_labels: bool) -> list[FieldError]:
    """Upstream's ValidateJob without the object metadata, which create and update judge differently."""
    errs = _validate_generated_selector(job, require_prefixed_labels)
    errs += _validate_spec(jobs.spec_of(job), "spec")
    return errs + _validate_indexed_hostname(job)


def validate_job(job: Obj) -> list[FieldError]:
    """Create validation of a defaulted Job."""
    errs = validate_object_meta(as_dict(job).get("metadata"), namespaced=True)
    return errs + validate_job_body(as_dict(job), require_prefixed_labels=True)


def validate_job_template_spec(template: Obj, path: str) -> list[FieldError]:
    """A CronJob's jobTemplate at ``path``: the spec rules, with the selector left for each Job to generate."""
    spec = as_dict(as_dict(template).get("spec"))
    errs = _validate_spec_fields(spec, f"{path}.spec")
    if spec.get("selector") is not None:
        errs.append(invalid(f"{path}.spec.selector", spec["selector"], "`selector` will be auto-generated"))
    if spec.get("manualSelector") is True:
        errs.append(not_supported(f"{path}.spec.manualSelector", True, ["nil", "false"]))
    return errs
