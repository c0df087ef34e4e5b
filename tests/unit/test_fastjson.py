"""api/fastjson: what orjson refuses still goes through as the json module takes it, and reads back the same."""

from __future__ import annotations

import json
from typing import Any

import pytest

from multiqueue.api import fastjson


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"kind": "Pod", "metadata": {"name": "p", "labels": {"a": "ü"}}}, id="plain"),
        pytest.param({"kind": "\ud800Namespace"}, id="lone-surrogate"),
        pytest.param({"n": 2**70}, id="integer-beyond-64-bits"),
        pytest.param({"x": [1.5, None, True, "", {}]}, id="mixed"),
    ],
)
def test_what_json_takes_round_trips(value: Any) -> None:
    encoded = fastjson.dumps(value)
    assert isinstance(encoded, bytes)
    assert fastjson.loads(encoded) == value == json.loads(encoded)
    assert fastjson.loads(encoded.decode()) == value


def test_what_json_refuses_is_still_refused() -> None:
    with pytest.raises(json.JSONDecodeError):
        fastjson.loads(b"{not json")


def test_a_copy_is_equal_and_shares_nothing_with_the_original() -> None:
    original = {"spec": {"template": {"labels": {"a": "b"}}, "list": [1, {"x": None}]}, "n": 2**70}
    copy = fastjson.copied(original)
    assert copy == original
    copy["spec"]["template"]["labels"]["a"] = "changed"
    copy["spec"]["list"][1]["x"] = 1
    assert original["spec"]["template"]["labels"] == {"a": "b"} and original["spec"]["list"][1] == {"x": None}
