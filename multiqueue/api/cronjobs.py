"""batch/v1 CronJob rules: the vocabulary, create-time defaulting and validation, as the upstream API server
applies them.

- ``default_cronjob(cronjob) -> dict``: create-time defaulting, into a new dict.
- ``validate_cronjob(cronjob) -> list[FieldError]``: create validation of a defaulted CronJob.
- ``validate_cronjob_update(new, old) -> list[FieldError]``: the same spec rules, with upstream's tolerance for
  what an old object may keep (a ``TZ=`` schedule, a name longer than 52 characters, an unchanged time zone).

Schedules are parsed in ``cronschedules``; when a CronJob runs is ``cronjobtimes``.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Final

from multiqueue.api import jobspec, pods
from multiqueue.api.cronschedules import load_location, parse_schedule
from multiqueue.api.errors import FieldError, invalid, non_negative_integer, not_supported, required
from multiqueue.api.meta import (
    as_dict,
    metadata,
    validate_object_meta,
    validate_object_meta_update,
)
from multiqueue.api.types import Obj

SCHEDULED_TIMESTAMP_ANNOTATION: Final = "batch.kubernetes.io/cronjob-scheduled-timestamp"
"""The annotation on each Job with its scheduled time, RFC 3339 in the CronJob's time zone."""

ALLOW: Final = "Allow"
FORBID: Final = "Forbid"
REPLACE: Final = "Replace"
CONCURRENCY_POLICIES: Final = (ALLOW, FORBID, REPLACE)

MAX_NAME_LENGTH: Final = 52
"""Job names are ``<cronjob>-<11 characters>`` and must stay DNS labels (63)."""

_TZ_PART: Final = re.compile(r"[A-Za-z.\-_0-9+]{1,14}")


def default_cronjob(cronjob: Obj) -> Obj:
    """Upstream's SetDefaults_CronJob and the pod defaults of its job template; a JSON null counts as unset."""
    result = copy.deepcopy(as_dict(cronjob))
    if result.get("spec") is None:
        result["spec"] = {}
    spec = result["spec"]
    if not isinstance(spec, dict):
        return result
    for field, value in (
        ("concurrencyPolicy", ALLOW),
        ("suspend", False),
        ("successfulJobsHistoryLimit", 3),
        ("failedJobsHistoryLimit", 1),
    ):
        if spec.get(field) is None or spec.get(field) == "":
            spec[field] = value
    if spec.get("jobTemplate") is None:
        spec["jobTemplate"] = {}
    template = spec["jobTemplate"]
    # Like upstream's generated defaulters: the pod template is defaulted here, the Job spec only when the
    # controller creates a Job from it (so an Indexed template without completions is refused at once).
    job_spec = template.get("spec") if isinstance(template, dict) else None
    pod_template = job_spec.get("template") if isinstance(job_spec, dict) else None
    if isinstance(pod_template, dict):
        pod_template["spec"] = pods.default_pod_spec(as_dict(pod_template.get("spec")))
    return result


def _validate_schedule(spec: Obj, old_spec: Obj | None) -> list[FieldError]:
    path = "spec.schedule"
    schedule = spec.get("schedule")
    if schedule is None or schedule == "":
        return [required(path)]
    if not isinstance(schedule, str):
        return [invalid(path, schedule, "must be a string")]
    errs: list[FieldError] = []
    parsed = parse_schedule(schedule)
    if isinstance(parsed, str):
        errs.append(invalid(path, schedule, parsed))
    # Upstream looks for "TZ" anywhere in the text. An object stored with one may keep it, but not together
    # with spec.timeZone.
    old_schedule = None if old_spec is None else old_spec.get("schedule")
    tz_allowed = isinstance(old_schedule, str) and "TZ" in old_schedule
    if "TZ" in schedule and tz_allowed and spec.get("timeZone") is not None:
        detail = "cannot use both timeZone field and TZ or CRON_TZ in schedule"
        errs.append(invalid(path, schedule, detail))
    elif "TZ" in schedule and not tz_allowed:
        errs.append(
            invalid(path, schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead")
        )
    return errs


def _validate_time_zone(value: Any) -> list[FieldError]:
    path = "spec.timeZone"
    if value is None:
        return []
    if not isinstance(value, str):
        return [invalid(path, value, "must be a string")]
    if not value:
        return [invalid(path, value, "timeZone must be nil or non-empty string")]
    # IANA's naming rules (digits and "+" tolerated for legacy names) keep file paths out of the zone lookup.
    for part in value.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART.fullmatch(part):
            return [invalid(path, value, f"unknown time zone {value}")]
    errs: list[FieldError] = []
    if value.lower() == "local":
        detail = "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
        errs.append(invalid(path, value, detail))
    _, error = load_location(value)
    if error is not None:  # "local" gets both errors, as upstream: only "Local" itself loads in Go
        errs.append(invalid(path, value, error))
    return errs


def _validate_concurrency_policy(value: Any) -> list[FieldError]:
    path = "spec.concurrencyPolicy"
    if value is None or value == "":
        return [required(path)]
    if value not in CONCURRENCY_POLICIES:
        return [not_supported(path, value, list(CONCURRENCY_POLICIES))]
    return []


def _validate_spec(spec: Obj, old_spec: Obj | None) -> list[FieldError]:
    """Upstream's validateCronJobSpec, in its order; ``old_spec`` is None on create."""
    errs = _validate_schedule(spec, old_spec)
    errs += non_negative_integer("spec.startingDeadlineSeconds", spec.get("startingDeadlineSeconds"))
    # An unchanged zone is not checked again, so an object stays updatable if its zone leaves the database.
    if old_spec is None or old_spec.get("timeZone") != spec.get("timeZone"):
        errs += _validate_time_zone(spec.get("timeZone"))
    errs += _validate_concurrency_policy(spec.get("concurrencyPolicy"))
    errs += jobspec.validate_job_template_spec(as_dict(spec.get("jobTemplate")), "spec.jobTemplate")
    errs += non_negative_integer("spec.successfulJobsHistoryLimit", spec.get("successfulJobsHistoryLimit"))
    return errs + non_negative_integer("spec.failedJobsHistoryLimit", spec.get("failedJobsHistoryLimit"))


def validate_cronjob(cronjob: Obj) -> list[FieldError]:
    """Create validation of a defaulted CronJob."""
    body = as_dict(cronjob)
    errs = validate_object_meta(body.get("metadata"), namespaced=True)
    errs += _validate_spec(as_dict(body.get("spec")), None)
    name = metadata(body).get("name")
    # Go counts bytes. Checked on create only, so CronJobs made before the limit can still be updated.
    if isinstance(name, str) and len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_LENGTH:
        errs.append(invalid("metadata.name", name, f"must be no more than {MAX_NAME_LENGTH} characters"))
    return errs


def validate_cronjob_update(new: Obj, old: Obj) -> list[FieldError]:
    """Update validation: immutable metadata, then the spec rules with the old spec's tolerances."""
    new_body, old_body = as_dict(new), as_dict(old)
    errs = validate_object_meta_update(new_body.get("metadata"), old_body.get("metadata"))
    return errs + _validate_spec(as_dict(new_body.get("spec")), as_dict(old_body.get("spec")))
