"""List and watch options: upstream's watch-list defaulting and the ListOptions validation messages."""

from __future__ import annotations

import pytest

from multiqueue.apiserver.rules import listoptions
from multiqueue.apiserver.rules.listoptions import ListOptions


@pytest.mark.parametrize(
    ("query", "initial", "match"),
    [
        ({"watch": "1"}, True, "NotOlderThan"),
        ({"watch": "true", "resourceVersion": "0"}, True, "NotOlderThan"),
        ({"watch": "1", "resourceVersion": "12"}, None, ""),
        (
            {"watch": "1", "sendInitialEvents": "false", "resourceVersionMatch": "NotOlderThan"},
            False,
            "NotOlderThan",
        ),
        ({"watch": "1", "resourceVersionMatch": "NotOlderThan"}, None, "NotOlderThan"),
        ({}, None, ""),
        ({"watch": "false"}, None, ""),
    ],
)
def test_a_legacy_watch_starts_with_the_current_objects(
    query: dict[str, str], initial: bool | None, match: str
) -> None:
    options = listoptions.with_defaults(listoptions.parse(query))
    assert (options.send_initial_events, options.resource_version_match) == (initial, match)


@pytest.mark.parametrize(
    ("options", "messages"),
    [
        (ListOptions(watch=True, send_initial_events=True, resource_version_match="NotOlderThan"), []),
        (ListOptions(resource_version="5", resource_version_match="Exact"), []),
        (ListOptions(resource_version="0", resource_version_match="NotOlderThan"), []),
        (
            ListOptions(watch=True, send_initial_events=False),
            [
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
            ],
        ),
        (
            ListOptions(watch=True, resource_version_match="NotOlderThan"),
            [
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
            ],
        ),
        (
            ListOptions(watch=True, send_initial_events=False, resource_version_match="Exact"),
            [
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                'resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"',
            ],
        ),
        (
            ListOptions(resource_version_match="NotOlderThan"),
            [
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
            ],
        ),
        (
            ListOptions(resource_version="0", resource_version_match="Exact"),
            [
                'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
            ],
        ),
        (
            ListOptions(resource_version="1", resource_version_match="Other"),
            [
                'resourceVersionMatch: Unsupported value: "Other": supported values: "Exact", "NotOlderThan", ""'
            ],
        ),
        (
            ListOptions(resource_version="1", resource_version_match="Exact", continue_token="abc"),
            ["resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"],
        ),
        (
            ListOptions(send_initial_events=True),
            ["sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"],
        ),
    ],
)
def test_bad_combinations_get_upstreams_messages(options: ListOptions, messages: list[str]) -> None:
    assert [e.message() for e in listoptions.errors(options)] == messages


def test_the_status_names_list_options_of_meta() -> None:
    status = listoptions.invalid(listoptions.errors(ListOptions(send_initial_events=True)))
    assert status["code"] == 422 and status["details"]["kind"] == "ListOptions"
    assert status["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list'
    )


@pytest.mark.parametrize(
    ("resource_version", "limit", "page"),
    [
        ("", 0, 0),
        ("", -1, 0),  # upstream pages nothing: the whole list, no continue, no remainingItemCount
        ("", 5, 5),
        ("12", 5, 5),
        ("0", 5, 0),  # the watch cache ignores the limit of a LIST at "0"
    ],
)
def test_page_size(resource_version: str, limit: int, page: int) -> None:
    assert listoptions.page_size(resource_version, limit) == page


@pytest.mark.parametrize(
    ("options", "limit", "exact"),
    [
        (ListOptions(resource_version="7", resource_version_match="Exact"), 0, True),
        (ListOptions(resource_version="7", resource_version_match="NotOlderThan"), 5, False),
        (ListOptions(resource_version="7"), 5, True),  # the legacy form of an exact, paged LIST
        (ListOptions(resource_version="7"), 0, False),
        (ListOptions(resource_version="0"), 5, False),
        (ListOptions(), 5, False),
    ],
)
def test_lists_exactly(options: ListOptions, limit: int, exact: bool) -> None:
    assert listoptions.lists_exactly(options, limit) is exact


def test_too_large_status_is_upstreams_timeout() -> None:
    assert listoptions.too_large_status(90, 12) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Timeout: Too large resource version: 90, current: 12",
        "reason": "Timeout",
        "details": {
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        },
        "code": 504,
    }
