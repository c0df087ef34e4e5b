"""batch/v1 Job create-time defaulting, as upstream's SetDefaults_Job and the Job strategy's selector generation.

``default_job`` returns a new dict (the input is not mutated); it generates the selector and pod labels when
``metadata.uid`` is set and ``spec.manualSelector`` is not true. ``default_job_spec`` defaults a spec alone,
as the CronJob controller does for each Job it creates from a template.
"""

from __future__ import annotations

import copy

from multiqueue.api import jobs, pods
from multiqueue.api.meta import as_dict, as_list
from multiqueue.api.types import Obj


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
        result["backoffLimit"] = pods.MAX_INT32 if result.get("backoffLimitPerIndex") is not None else 6
    for field, value in (("completionMode", jobs.NON_INDEXED), ("suspend", False), ("manualSelector", False)):
        if result.get(field) is None:
            result[field] = value
    for rule in as_list(as_dict(result.get("podFailurePolicy")).get("rules")):
        for pattern in as_list(as_dict(rule).get("onPodConditions")):
            if isinstance(pattern, dict) and not pattern.get("status"):
                pattern["status"] = "True"
    if result.get("podReplacementPolicy") is None:
        has_policy = result.get("podFailurePolicy") is not None
        result["podReplacementPolicy"] = jobs.FAILED_ONLY if has_policy else jobs.TERMINATING_OR_FAILED
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
            (jobs.LEGACY_JOB_NAME_LABEL, name),
            (jobs.JOB_NAME_LABEL, name),
            (jobs.LEGACY_CONTROLLER_UID_LABEL, uid),
            (jobs.CONTROLLER_UID_LABEL, uid),
        ):
            labels.setdefault(key, value)
    selector = _child(spec, "selector")
    match_labels = None if selector is None else _child(selector, "matchLabels")
    if match_labels is not None:
        match_labels.setdefault(jobs.CONTROLLER_UID_LABEL, uid)


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
    template_labels = jobs.template_labels(spec)
    if not meta.get("labels") and template_labels:
        meta["labels"] = dict(template_labels)
    return result
