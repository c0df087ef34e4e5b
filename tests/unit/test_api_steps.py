"""The small shared steps of api/ that several rule modules call: reading an integer field, and judging an
optional non-negative integer the way upstream decodes it."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.api.errors import ErrorType, non_negative_integer
from multiqueue.api.meta import as_int


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(3, 3, id="int"),
        pytest.param(0, 0, id="zero"),
        pytest.param(-2, -2, id="negative"),
        pytest.param(None, None, id="absent"),
        pytest.param(True, None, id="json-boolean"),
        pytest.param(1.0, None, id="float"),
        pytest.param("3", None, id="string"),
    ],
)
def test_as_int(value: Any, expected: int | None) -> None:
    assert as_int(value) == expected


@pytest.mark.parametrize(
    ("value", "errors"),
    [
        pytest.param(None, [], id="absent"),
        pytest.param(0, [], id="zero"),
        pytest.param(7, [], id="positive"),
        pytest.param(-1, [(ErrorType.INVALID, "must be greater than or equal to 0")], id="negative"),
        pytest.param("1", [(ErrorType.INVALID, "must be an integer")], id="string"),
        pytest.param(False, [(ErrorType.INVALID, "must be an integer")], id="boolean"),
        pytest.param(1.5, [(ErrorType.INVALID, "must be an integer")], id="float"),
    ],
)
def test_non_negative_integer(value: Any, errors: list[tuple[ErrorType, str]]) -> None:
    found = non_negative_integer("spec.backoffLimit", value)
    assert [(e.type, e.detail) for e in found] == errors
    assert all(e.field == "spec.backoffLimit" for e in found)
