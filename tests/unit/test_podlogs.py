"""pods/log options as kube-apiserver decodes, validates and forwards them, and the Status it makes of a kubelet's
refusal; the query decoding rules (booleans, int64s, RFC 3339 times) with Go's messages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from multiqueue.api import query
from multiqueue.apiserver.podlog import kubelet_refusal, kubelet_url
from multiqueue.apiserver.rules import podlogs
from multiqueue.apiserver.rules.podlogs import PodLogOptions


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, False),
        ("", True),
        ("0", False),
        ("false", False),
        ("FALSE", False),
        ("1", True),
        ("maybe", True),
    ],
)
def test_a_flag_is_false_only_when_absent_zero_or_false(value: str | None, expected: bool) -> None:
    assert query.flag(value) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), ("12", 12), ("+3", 3), ("-4", -4), (str((1 << 63) - 1), (1 << 63) - 1)],
)
def test_int64s_decode_as_go_parses_them(value: str | None, expected: int | None) -> None:
    assert query.int64(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x", 'strconv.ParseInt: parsing "x": invalid syntax'),
        ("", 'strconv.ParseInt: parsing "": invalid syntax'),
        ("1_000", 'strconv.ParseInt: parsing "1_000": invalid syntax'),
        (" 1", 'strconv.ParseInt: parsing " 1": invalid syntax'),
        (str(1 << 63), f'strconv.ParseInt: parsing "{1 << 63}": value out of range'),
    ],
)
def test_bad_int64s_get_strconvs_messages(value: str, message: str) -> None:
    with pytest.raises(query.QueryError) as caught:
        query.int64(value)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2020-01-02T03:04:05Z", datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2020-01-02T03:04:05.250Z", datetime(2020, 1, 2, 3, 4, 5, 250000, tzinfo=UTC)),
        ("2020-01-02T03:04:05+01:00", datetime(2020, 1, 2, 2, 4, 5, tzinfo=UTC)),
        ("2020-01-02T3:04:05Z", datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)),  # Go's "15" takes one digit
        ("2020-02-29T00:00:00-00:30", datetime(2020, 2, 29, 0, 30, tzinfo=UTC)),
        ("", datetime(1, 1, 1, tzinfo=UTC)),
        ("null", datetime(1, 1, 1, tzinfo=UTC)),
    ],
)
def test_times_decode_as_rfc3339(value: str, expected: datetime) -> None:
    assert query.rfc3339(value) == expected


LAYOUT = '"2006-01-02T15:04:05Z07:00"'


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("yesterday", f'parsing time "yesterday" as {LAYOUT}: cannot parse "yesterday" as "2006"'),
        (
            "2020-1-02T00:00:00Z",
            f'parsing time "2020-1-02T00:00:00Z" as {LAYOUT}: cannot parse "1-02T00:00:00Z" as "01"',
        ),
        (
            "2020-01-02 00:00:00Z",
            f'parsing time "2020-01-02 00:00:00Z" as {LAYOUT}: cannot parse " 00:00:00Z" as "T"',
        ),
        (
            "2020-01-02T00:00:00",
            f'parsing time "2020-01-02T00:00:00" as {LAYOUT}: cannot parse "" as "Z07:00"',
        ),
        (
            "2020-01-02T00:00:00+0100",
            f'parsing time "2020-01-02T00:00:00+0100" as {LAYOUT}: cannot parse "+0100" as "Z07:00"',
        ),
        ("2020-13-01T00:00:00Z", 'parsing time "2020-13-01T00:00:00Z": month out of range'),
        ("2021-02-29T00:00:00Z", 'parsing time "2021-02-29T00:00:00Z": day out of range'),
        ("2020-01-01T24:00:00Z", 'parsing time "2020-01-01T24:00:00Z": hour out of range'),
        ("2020-01-01T00:00:00Zjunk", 'parsing time "2020-01-01T00:00:00Zjunk": extra text: "junk"'),
    ],
)
def test_bad_times_get_gos_parse_errors(value: str, message: str) -> None:
    with pytest.raises(query.QueryError) as caught:
        query.rfc3339(value)
    assert str(caught.value) == message


def test_options_decode_from_the_query() -> None:
    options = podlogs.parse(
        {
            "container": "c",
            "follow": "",
            "previous": "0",
            "timestamps": "true",
            "tailLines": "5",
            "limitBytes": "9",
        }
    )
    assert options == PodLogOptions("c", follow=True, timestamps=True, tail_lines=5, limit_bytes=9)


@pytest.mark.parametrize(
    ("options", "messages"),
    [
        (PodLogOptions(tail_lines=0, limit_bytes=1, since_seconds=1), []),
        (PodLogOptions(tail_lines=-1), ["tailLines: Invalid value: -1: must be greater than or equal to 0"]),
        (
            PodLogOptions(limit_bytes=0, since_seconds=0),
            [
                "limitBytes: Invalid value: 0: must be greater than 0",
                "sinceSeconds: Invalid value: 0: must be greater than 0",
            ],
        ),
        (
            PodLogOptions(since_seconds=0, since_time=datetime(2020, 1, 1, tzinfo=UTC)),
            ["[]: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"],
        ),
        (PodLogOptions(stream="Stdout"), ["stream: Forbidden: may not be specified"]),
    ],
)
def test_options_are_validated_as_upstream_validates_them(
    options: PodLogOptions, messages: list[str]
) -> None:
    assert [e.message() for e in podlogs.errors(options)] == messages


def pod(containers: list[str], init: tuple[str, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": n} for n in containers]}
    if init:
        spec["initContainers"] = [{"name": n} for n in init]
    return {"metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize(
    ("spec", "named", "expected"),
    [
        (pod(["main"]), "", "main"),
        (pod(["a", "b"], ("init",)), "b", "b"),
        (pod(["a", "b"], ("init",)), "init", "init"),
        (
            pod(["a", "b"], ("init",)),
            "",
            "a container name must be specified for pod p, choose one of: [init a b]",
        ),
        (pod(["a"]), "z", "container z is not valid for pod p"),
        (pod([]), "", "a container name must be specified for pod p"),
    ],
)
def test_the_container_is_the_one_named_or_the_only_one(
    spec: dict[str, Any], named: str, expected: str
) -> None:
    try:
        assert podlogs.container(spec, named) == expected
    except podlogs.NoContainer as exc:
        assert str(exc) == expected


def test_the_kubelet_is_asked_with_set_options_only_and_times_to_the_second() -> None:
    moment = datetime(2030, 5, 6, 8, 9, 10, 999999, tzinfo=timezone(timedelta(hours=2)))
    options = PodLogOptions("c", follow=True, since_time=moment, tail_lines=0, limit_bytes=7)
    assert podlogs.kubelet_query(options) == {
        "follow": "true",
        "sinceTime": "2030-05-06T06:09:10Z",
        "tailLines": "0",
        "limitBytes": "7",
    }
    assert podlogs.kubelet_query(PodLogOptions(previous=True, since_seconds=30)) == {
        "previous": "true",
        "sinceSeconds": "30",
    }


@pytest.mark.parametrize(
    ("code", "reason", "message"),
    [
        (400, "BadRequest", 'previous terminated container "c" in pod "p" not found'),
        (404, "NotFound", "the server could not find the requested resource ( pods/log p)"),
        (
            500,
            "InternalError",
            'Internal error occurred: previous terminated container "c" in pod "p" not found',
        ),
        (401, "Unauthorized", "the server has asked for the client to provide credentials ( pods/log p)"),
        (
            418,
            "Unknown",
            "the server responded with the status code 418 but did not return more information ( pods/log p)",
        ),
    ],
)
def test_a_kubelets_refusal_becomes_the_status_kube_apiserver_makes(
    code: int, reason: str, message: str
) -> None:
    status = kubelet_refusal(code, 'previous terminated container "c" in pod "p" not found', "p")
    assert (status["code"], status["reason"], status["message"]) == (code, reason, message)


@pytest.mark.parametrize(
    ("status", "url"),
    [
        (
            {
                "addresses": [
                    {"type": "Hostname", "address": "n"},
                    {"type": "InternalIP", "address": "127.0.0.1"},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            },
            "https://127.0.0.1:10250",
        ),
        (
            {
                "addresses": [{"type": "Hostname", "address": "n"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 1}},
            },
            "https://n:1",
        ),
        ({"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}, None),
    ],
)
def test_the_kubelet_is_reached_at_the_nodes_preferred_address(
    status: dict[str, Any], url: str | None
) -> None:
    assert kubelet_url({"status": status}) == url
