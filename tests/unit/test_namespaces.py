"""Namespaces: DNS-label names and standard or qualified finalizers, with upstream's messages."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.api.types import Obj
from multiqueue.apiserver.rules import namespaces


def _ns(name: str, **spec: Any) -> Obj:
    return {"metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(
    ("ns", "messages"),
    [
        pytest.param(_ns("fid", finalizers=["kubernetes", "example.com/x"]), [], id="valid"),
        pytest.param(_ns("a.b"), ['metadata.name: Invalid value: "a.b": must not contain dots'], id="dots"),
        pytest.param(
            _ns("a" * 64),
            [f'metadata.name: Invalid value: "{"a" * 64}": must be no more than 63 characters'],
            id="too-long",
        ),
        pytest.param(
            _ns("fid", finalizers=["bogus"]),
            [
                'spec.finalizers: Invalid value: "bogus": name is neither a standard finalizer name nor is it fully '
                "qualified"
            ],
            id="bogus-finalizer",
        ),
    ],
)
def test_validate_namespace(ns: Obj, messages: list[str]) -> None:
    assert [e.message() for e in namespaces.validate_namespace(ns)] == messages
