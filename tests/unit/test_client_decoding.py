"""A large response body is decoded with the garbage collector paused, and the collector is left as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from multiqueue.api import fastjson
from multiqueue.kube.client import LARGE_BODY, decoded


def _list_body(items: int) -> bytes:
    item = {
        "metadata": {"name": "job", "labels": {"a": "b"}},
        "spec": {"template": {"spec": {"containers": []}}},
    }
    return fastjson.dumps({"kind": "JobList", "items": [item] * items})


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of each collection started while the test runs."""
    started: list[int] = []

    def seen(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(int(info["generation"]))

    gc.callbacks.append(seen)
    try:
        yield started
    finally:
        gc.callbacks.remove(seen)


def test_a_large_list_is_decoded_without_collections(collections: list[int]) -> None:
    body = _list_body(20_000)
    assert len(body) >= LARGE_BODY
    gc.collect()
    collections.clear()
    found = decoded(body)
    # One young collection at most: the one the new objects owe once the collector runs again.
    assert collections in ([], [0])
    assert found == fastjson.loads(body)
    assert gc.isenabled()


def test_the_same_list_decoded_as_is_sets_off_collections(collections: list[int]) -> None:
    """What the pause saves: without it the same body makes the collector run (so the test above can fail)."""
    body = _list_body(20_000)
    gc.collect()
    collections.clear()
    fastjson.loads(body)
    assert len(collections) > 10


def test_a_paused_collector_stays_paused() -> None:
    gc.disable()
    try:
        decoded(_list_body(20_000))
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("body", [b'{"kind":"Status","code":404}', b"[1,2,3]", b'"text"'])
def test_a_small_body_decodes_as_json_does(body: bytes) -> None:
    assert decoded(body) == fastjson.loads(body)
    assert gc.isenabled()
