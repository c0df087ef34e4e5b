"""Leases (coordination.k8s.io/v1), checked as kube-apiserver checks them."""

from __future__ import annotations

from typing import Final

from multiqueue.api.errors import FieldError, forbidden, invalid, not_supported
from multiqueue.api.meta import (
    as_dict,
    qualified_name_errors,
    validate_object_meta,
    validate_object_meta_update,
)
from multiqueue.api.types import Obj

STRATEGIES: Final = ("OldestEmulationVersion",)


def _validate_spec(lease: Obj) -> list[FieldError]:
    spec = as_dict(lease.get("spec"))
    errs: list[FieldError] = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        errs.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        errs.append(invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0"))
    strategy = spec.get("strategy")
    if strategy is not None:
        # Upstream names the field twice in this path; so does this.
        path = "spec.strategy.strategy"
        if "/" not in str(strategy):
            if strategy not in STRATEGIES:
                errs.append(not_supported(path, strategy, list(STRATEGIES)))
        else:
            errs += [invalid(path, strategy, m) for m in qualified_name_errors(str(strategy))]
    if spec.get("preferredHolder") and not strategy:
        errs.append(forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined"))
    return errs


# Fields behind a feature gate kube-apiserver leaves off (coordinated leader election): dropped as written,
# unless the stored object already uses them.
_GATED: Final = ("strategy", "preferredHolder")


def drop_disabled_fields(lease: Obj, old: Obj | None) -> None:
    spec, old_spec = as_dict(lease.get("spec")), as_dict(as_dict(old).get("spec"))
    for field in _GATED:
        if not old_spec.get(field):
            spec.pop(field, None)


def validate_lease(lease: Obj) -> list[FieldError]:
    return validate_object_meta(lease.get("metadata"), namespaced=True) + _validate_spec(lease)


def validate_lease_update(new: Obj, old: Obj) -> list[FieldError]:
    return validate_object_meta_update(new.get("metadata"), old.get("metadata")) + _validate_spec(new)
