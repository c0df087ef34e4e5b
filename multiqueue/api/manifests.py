"""Offline checks of manifests: the defaulting and create-time validation the API server would apply.

Used by ``multiqueue validate`` so people can check a Job or CronJob before they submit it.
"""

from __future__ import annotations

import copy
import difflib
from typing import Any, Final

from multiqueue.api import cronjobs, jobdefaults, jobs, jobspec
from multiqueue.api.errors import invalid_status
from multiqueue.api.meta import as_dict, metadata

# The managedBy value multiqueue's manager handles unless its config says otherwise.
DISPATCHER: Final = "multiqueue.dev/dispatcher"

# Selector generation needs a UID; the server assigns the real one at create time.
_PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"


def display_name(obj: dict[str, Any]) -> str:
    meta = metadata(obj)
    return str(meta.get("name") or meta.get("generateName") or "<unnamed>")


def is_checked(obj: dict[str, Any]) -> bool:
    """Only batch/v1 Jobs and CronJobs have rules here; other kinds are passed over."""
    return obj.get("apiVersion") == "batch/v1" and obj.get("kind") in ("Job", "CronJob")


def validate_manifest(obj: dict[str, Any]) -> str:
    """The message a 422 from the server would carry, or "" when the object would be accepted."""
    kind = str(obj.get("kind", ""))
    if not is_checked(obj):
        return f"{obj.get('apiVersion') or '<no apiVersion>'} {kind or '<no kind>'} is not a batch/v1 Job or CronJob"
    candidate = copy.deepcopy(obj)
    meta = as_dict(candidate.setdefault("metadata", {}))
    meta.setdefault("namespace", "default")
    meta.setdefault("uid", _PLACEHOLDER_UID)
    if kind == "Job":
        errors = jobspec.validate_job(jobdefaults.default_job(candidate))
    else:
        errors = cronjobs.validate_cronjob(cronjobs.default_cronjob(candidate))
    if not errors:
        return ""
    return str(invalid_status(kind, "batch", display_name(obj), errors)["message"])


def managed_by_warning(obj: dict[str, Any], known: tuple[str, ...] = (DISPATCHER,)) -> str:
    """A warning for a managedBy that is nearly, but not exactly, a controller's (``multiqueue.dev/dispacher``):
    the API server accepts any well-formed value, and the Job then waits for a controller that never comes."""
    spec = as_dict(obj.get("spec"))
    if obj.get("kind") == "CronJob":
        spec = as_dict(as_dict(as_dict(spec.get("jobTemplate")).get("spec")))
    value = spec.get("managedBy")
    controllers = (*known, jobs.BUILTIN_CONTROLLER)
    if not isinstance(value, str) or value in controllers:
        return ""
    close = difflib.get_close_matches(value.lower(), controllers, n=1, cutoff=0.8)
    if not close:
        return ""
    return (
        f'spec.managedBy "{value}" is not "{close[0]}": no controller runs such a Job, so it would wait forever; '
        "did you mean that one?"
    )
