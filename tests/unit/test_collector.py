"""The garbage collector as a long-running process leaves it: a pause restores what it found, and a settled
process collects its young objects less often and never rescans what it made while starting."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from multiqueue.loop.collector import YOUNG_THRESHOLD, collector_paused, settle


@pytest.fixture
def collector() -> Iterator[None]:
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    if enabled:
        gc.enable()


@pytest.mark.usefixtures("collector")
def test_a_pause_inside_a_pause_stays_one_and_the_collector_is_left_as_found() -> None:
    gc.enable()
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled(), "the inner pause ending does not end the outer one"
    assert gc.isenabled()
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled(), "a collector found off stays off"


@pytest.mark.usefixtures("collector")
def test_a_settled_process_keeps_what_it_made_while_starting_out_of_every_collection() -> None:
    started = [object() for _ in range(1000)]
    assert gc.get_freeze_count() == 0
    settle()
    assert gc.get_freeze_count() >= len(started), "what exists when it settles is frozen"
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD > 700, "young objects are collected less often"
