"""PriorityClasses: the ceiling on user-defined values and the reserved system names, as upstream."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.api.types import Obj
from multiqueue.apiserver.rules import priorityclasses


def _pc(name: str = "fid", **fields: Any) -> Obj:
    return {"metadata": {"name": name}, "value": 1000, **fields}


@pytest.mark.parametrize(
    ("pc", "messages"),
    [
        pytest.param(_pc(), [], id="valid"),
        pytest.param(
            _pc(value=2000000000),
            ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"],
            id="too-high",
        ),
        pytest.param(_pc("system-cluster-critical", value=2000000000), [], id="system-class"),
        pytest.param(
            _pc("system-fid", value=5),
            [
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use "
                "only. error: system-fid is not a known system priority class"
            ],
            id="reserved-prefix",
        ),
        pytest.param(
            _pc("system-node-critical", value=5),
            [
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use "
                "only. error: value of system-node-critical PriorityClass must be 2000001000"
            ],
            id="system-class-value",
        ),
        pytest.param(
            _pc(preemptionPolicy="Sometimes"),
            [
                'preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"'
            ],
            id="policy",
        ),
    ],
)
def test_validate_priority_class(pc: Obj, messages: list[str]) -> None:
    assert [e.message() for e in priorityclasses.validate_priority_class(pc)] == messages


def test_value_and_policy_are_set_once() -> None:
    old = _pc(preemptionPolicy="PreemptLowerPriority")
    new = _pc(value=5, preemptionPolicy="Never")
    assert [e.message() for e in priorityclasses.validate_priority_class_update(new, old)] == [
        "value: Forbidden: may not be changed in an update.",
        'preemptionPolicy: Invalid value: "Never": field is immutable',
    ]
    defaulted = _pc()
    priorityclasses.default_priority_class(defaulted)
    assert defaulted["preemptionPolicy"] == "PreemptLowerPriority"
