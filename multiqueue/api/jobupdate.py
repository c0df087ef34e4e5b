"""Update validation of a batch/v1 Job through the main resource: the Job must still be valid, and most of its
spec is fixed once created; a suspended Job with no active pods may still change where its pods will run and
the resources its containers request.
"""

from __future__ import annotations

import copy
from typing import Any

from multiqueue.api import jobs, jobspec
from multiqueue.api.errors import FieldError, immutable, invalid
from multiqueue.api.meta import as_dict, as_list, validate_object_meta_update
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


def template_is_open(old: Obj) -> bool:
    """Whether a Job's pod template may change where its pods run and what they request (kube-apiserver 1.37,
    MutableSchedulingDirectivesForSuspendedJobs and MutablePodResourcesForSuspendedJobs, both on by default).

    The Job must be suspended with no active pods, and either never started or suspended after it ran (the Job
    controller clears startTime and sets the Suspended condition when it stops the pods). kube-apiserver 1.37.2
    was probed for each combination of startTime, active and the condition; the state before the update decides.
    """
    status = jobs.status_of(old)
    if not jobs.is_suspended(old) or status.get("active") not in (None, 0):
        return False
    return status.get("startTime") is None or jobs.has_condition(old, jobs.SUSPENDED)


def _open_parts_removed(pod_spec: Any) -> Obj:
    """The pod spec minus what an open template may change: the scheduling directives (node selector,
    tolerations, scheduling gates, node affinity) and each container's and init container's requests and limits
    (resource claims stay fixed, as do pod-level resources)."""
    result = copy.deepcopy(as_dict(pod_spec))
    for field in ("nodeSelector", "tolerations", "schedulingGates"):
        result.pop(field, None)
    affinity = result.get("affinity")
    if isinstance(affinity, dict):
        affinity.pop("nodeAffinity", None)
        if not affinity:
            del result["affinity"]
    for key in ("containers", "initContainers"):
        for container in as_list(result.get(key)):
            resources = as_dict(container).get("resources") if isinstance(container, dict) else None
            if isinstance(resources, dict):
                resources.pop("requests", None)
                resources.pop("limits", None)
                if not resources:
                    del container["resources"]
    return result


def _validate_template_update(new: Obj, old: Obj) -> list[FieldError]:
    """An open template may change its metadata and the open parts of its spec: anything else is refused at
    spec.template.spec. A closed template is refused whole, at spec.template."""
    template, old_template = as_dict(jobs.spec_of(new).get("template")), jobs.spec_of(old).get("template")
    if template_is_open(old):
        pod_spec, old_pod_spec = template.get("spec"), as_dict(old_template).get("spec")
        if _open_parts_removed(pod_spec) == _open_parts_removed(old_pod_spec):
            return []
        return [immutable("spec.template.spec", pod_spec)]
    return [] if template == old_template else [immutable("spec.template", template)]


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
