"""Leases: durations and transitions as kube-apiserver checks them; gated fields dropped as it drops them."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.api.types import Obj
from multiqueue.apiserver.rules import leases


def _lease(**spec: Any) -> Obj:
    return {"metadata": {"name": "l", "namespace": "ns"}, "spec": spec}


@pytest.mark.parametrize(
    ("lease", "messages"),
    [
        pytest.param(_lease(leaseDurationSeconds=30, leaseTransitions=0), [], id="valid"),
        pytest.param(
            _lease(leaseDurationSeconds=-1),
            ["spec.leaseDurationSeconds: Invalid value: -1: must be greater than 0"],
            id="duration",
        ),
        pytest.param(
            _lease(leaseDurationSeconds=0),
            ["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"],
            id="zero-duration",
        ),
        pytest.param(
            _lease(leaseTransitions=-1),
            ["spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"],
            id="transitions",
        ),
    ],
)
def test_validate_lease(lease: Obj, messages: list[str]) -> None:
    assert [e.message() for e in leases.validate_lease(lease)] == messages
    assert [e.message() for e in leases.validate_lease_update(lease, lease)] == messages


def test_gated_fields_are_dropped_unless_in_use() -> None:
    lease = _lease(strategy="Bogus", preferredHolder="x", holderIdentity="h")
    leases.drop_disabled_fields(lease, None)
    assert lease == _lease(holderIdentity="h")
    kept = _lease(strategy="OldestEmulationVersion")
    leases.drop_disabled_fields(kept, _lease(strategy="OldestEmulationVersion"))
    assert kept["spec"] == {"strategy": "OldestEmulationVersion"}
