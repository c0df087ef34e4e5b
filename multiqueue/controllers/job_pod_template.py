"""The pod a Job creates: its template with the controller reference, the tracking finalizer and, for Indexed
Jobs, the completion index (label, annotation, hostname, JOB_COMPLETION_INDEX) in a generated name."""

from __future__ import annotations

import copy
from typing import Final

from multiqueue.api import jobs
from multiqueue.api.meta import annotations_of, as_dict, as_list, labels_of, metadata, owner_reference
from multiqueue.api.types import Obj
from multiqueue.controllers.job_pod_facts import INDEX_IGNORED_FAILURE_COUNT

MAX_GENERATE_NAME_PREFIX: Final = 58
INDEX_ENV: Final = "JOB_COMPLETION_INDEX"


def _with_index_env(spec: Obj) -> None:
    """Give every container (and init container) the completion index in its environment, unless it sets it."""
    for field in ("containers", "initContainers"):
        for container in as_list(spec.get(field)):
            if not isinstance(container, dict):
                continue
            env = as_list(container.get("env"))
            if not any(as_dict(e).get("name") == INDEX_ENV for e in env):
                container["env"] = [
                    *env,
                    {
                        "name": INDEX_ENV,
                        "valueFrom": {
                            "fieldRef": {"fieldPath": f"metadata.labels['{jobs.COMPLETION_INDEX}']"}
                        },
                    },
                ]


def pod_for(job: Obj, index: int | None, failure_count: int = 0, ignored_count: int = 0) -> Obj:
    """A pod to create for ``job``: its template with the controller reference, finalizer and index, and with
    per-index limits the failures of its index so far (the ignored ones only when there are any)."""
    template = as_dict(jobs.spec_of(job).get("template"))
    meta = copy.deepcopy(as_dict(template.get("metadata")))
    spec = copy.deepcopy(as_dict(template.get("spec")))
    name = str(metadata(job).get("name", ""))
    labels = dict(labels_of({"metadata": meta}))
    annotations = dict(annotations_of({"metadata": meta}))
    if index is not None:
        labels[jobs.COMPLETION_INDEX] = str(index)
        annotations[jobs.COMPLETION_INDEX] = str(index)
        if jobs.spec_of(job).get("backoffLimitPerIndex") is not None:
            annotations[jobs.INDEX_FAILURE_COUNT] = str(failure_count)
            if ignored_count > 0:
                annotations[INDEX_IGNORED_FAILURE_COUNT] = str(ignored_count)
        spec["hostname"] = f"{name}-{index}"
        suffix = f"-{index}-"
        prefix = name[: MAX_GENERATE_NAME_PREFIX - len(suffix)] + suffix
        _with_index_env(spec)
    else:
        prefix = name[:MAX_GENERATE_NAME_PREFIX] + "-"
    pod_meta: Obj = {
        "generateName": prefix,
        "namespace": metadata(job).get("namespace"),
        "labels": labels,
        "finalizers": [jobs.TRACKING_FINALIZER],
        # LIST items of a real API server carry no kind or apiVersion.
        "ownerReferences": [owner_reference({**job, "apiVersion": "batch/v1", "kind": "Job"})],
    }
    if annotations:
        pod_meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}
