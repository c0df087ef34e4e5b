"""The completed/failed indexes codec: formatting, the controller's tolerant parse, the server's strict check."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from multiqueue.api.indexes import (
    count_indexes,
    first_overlap,
    format_indexes,
    parse_indexes,
    validate_indexes,
)


@pytest.mark.parametrize(
    ("indexes", "text"),
    [
        pytest.param([], "", id="empty"),
        pytest.param([0], "0", id="single"),
        pytest.param([1, 3, 4, 5, 7], "1,3-5,7", id="run-of-three"),
        pytest.param([3, 4], "3,4", id="two-consecutive-written-as-pair"),
        pytest.param([5, 4, 3, 3, 9, 10], "3-5,9,10", id="unsorted-with-duplicates"),
        pytest.param(list(range(100)), "0-99", id="long-run"),
    ],
)
def test_format(indexes: list[int], text: str) -> None:
    assert format_indexes(indexes) == text


@pytest.mark.parametrize(
    ("text", "completions", "expected"),
    [
        pytest.param("", 5, [], id="empty"),
        pytest.param("0,2-4", 5, [0, 2, 3, 4], id="well-formed"),
        pytest.param("1-3,x,5", 10, [1, 2, 3, 5], id="malformed-interval-skipped"),
        pytest.param("1-a,4", 10, [4], id="malformed-end-skipped"),
        pytest.param("1,2-9", 5, [1, 2, 3, 4], id="end-clipped-to-completions"),
        pytest.param("1,7,2", 5, [1], id="stops-at-interval-beyond-completions"),
    ],
)
def test_tolerant_parse(text: str, completions: int, expected: list[int]) -> None:
    assert parse_indexes(text, completions) == expected
    assert count_indexes(text, completions) == len(expected)


@pytest.mark.parametrize(
    ("text", "completions", "message"),
    [
        pytest.param("", 3, None, id="empty-ok"),
        pytest.param("0,2-4,6", 7, None, id="valid"),
        pytest.param(
            "1-2-3",
            7,
            'the fragment "1-2-3" violates the requirement that an index interval can '
            "have at most two parts separated by '-'",
            id="three-parts",
        ),
        pytest.param("a", 7, 'cannot convert string to integer for index: "a"', id="not-a-number"),
        pytest.param("1-b", 7, 'cannot convert string to integer for index: "b"', id="end-not-a-number"),
        pytest.param(" 1", 7, 'cannot convert string to integer for index: " 1"', id="whitespace-rejected"),
        pytest.param("7", 7, 'too large index: "7"', id="index-equals-completions"),
        pytest.param("1-9", 7, 'too large index: "9"', id="end-too-large"),
        pytest.param("3-3", 7, "non-increasing order, previous: 3, current: 3", id="degenerate-interval"),
        pytest.param("2,1", 7, "non-increasing order, previous: 2, current: 1", id="decreasing"),
        pytest.param("1-3,3", 7, "non-increasing order, previous: 3, current: 3", id="overlapping"),
    ],
)
def test_strict_validation(text: str, completions: int, message: str | None) -> None:
    assert validate_indexes(text, completions) == message


def test_first_overlap() -> None:
    assert first_overlap([(0, 2), (5, 9)], [(3, 4), (8, 8)]) == 8
    assert first_overlap([(0, 2)], [(3, 4)]) is None


@given(st.sets(st.integers(min_value=0, max_value=300)))
def test_round_trip(indexes: set[int]) -> None:
    text = format_indexes(indexes)
    assert parse_indexes(text, 301) == sorted(indexes)
    assert validate_indexes(text, 301) is None


@given(st.sets(st.integers(min_value=0, max_value=300)), st.integers(min_value=1, max_value=301))
def test_parse_clips_to_completions(indexes: set[int], completions: int) -> None:
    assert parse_indexes(format_indexes(indexes), completions) == sorted(
        i for i in indexes if i < completions
    )
