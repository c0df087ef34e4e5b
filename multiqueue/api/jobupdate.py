"""Update validation of a batch/v1 Job through the main resource: the Job must still be valid, and most of its
spec is fixed once created; a suspended Job that never started may still change where its pods will run.
"""

from __future__ import annotations

import copy
from typing import Any

from multiqueue.api import jobs, jobspec
from multiqueue.api.errors import FieldError, immutable, invalid
from multiqueue.api.meta import as_dict, validate_object_meta_update
from multiqueue.api.types import Obj


def _validate_completions_update(spec: Obj, old_spec: Obj) -> list[FieldError]:
    """Completions is immutable, except that an Indexed Job scales by changing it together with parallelism."""
    value = spec.get("completions")
    if value == old_spec.get("completions"):
        return []
    if spec.get("completionMode") != jobs.INDEXED:
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
    template, old_template = jobs.spec_of(new).get("template"), jobs.spec_of(old).get("template")
    if jobs.is_suspended(old) and jobs.status_of(old).get("startTime") is None:
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
    old_labels = jobs.template_labels(jobs.spec_of(old))
    # Jobs created before the batch.kubernetes.io/ labels existed keep validating without them.
    prefixed = jobs.JOB_NAME_LABEL in old_labels and jobs.CONTROLLER_UID_LABEL in old_labels
    errs = validate_object_meta_update(new.get("metadata"), old.get("metadata"))
    errs += jobspec.validate_job_body(new, require_prefixed_labels=prefixed)
    spec, old_spec = jobs.spec_of(new), jobs.spec_of(old)
    errs += _validate_completions_update(spec, old_spec)
    for field in ("selector", "completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy"):
        if spec.get(field) != old_spec.get(field):
            errs.append(immutable(f"spec.{field}", spec.get(field)))
    errs += _validate_template_update(new, old)
    if spec.get("successPolicy") != old_spec.get("successPolicy"):
        errs.append(immutable("spec.successPolicy", spec.get("successPolicy")))
    return errs
