"""How the kubelet API reads a container's output: the attempts' ranges in the log file, the query options as
upstream's PodLogOptions, tail lines, stamps, since and the byte limit, in upstream kubelet's order."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from aiohttp import web

from multiqueue.local import containers, kubeletapi
from multiqueue.local.containers import AttemptLog, PodRecords, Running
from multiqueue.local.kubeletapi import LogOptions, LogRequestError, rfc3339_nano, stream_log, tail_start

NOW = datetime(2030, 1, 1, 0, 0, 10, tzinfo=UTC)
S = 1_000_000_000
BASE = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp()) * S


class Collected:
    """Stands in for the HTTP response: what was written."""

    def __init__(self) -> None:
        self.data = b""

    async def write(self, chunk: bytes) -> None:
        self.data += chunk


async def read(attempt: AttemptLog, **options: Any) -> str:
    out = Collected()
    await stream_log(attempt, LogOptions(**options), cast(web.StreamResponse, out), poll=0.01)
    return out.data.decode()


def attempt(tmp_path: Path, text: str, start: int = 0, end: int | None = None, **fields: Any) -> AttemptLog:
    path = tmp_path / "main.log"
    path.write_text(text)
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    (run_dir / "exit").write_text("0\n")
    return AttemptLog(path, run_dir, start, end, fields.get("stamps", ()), fields.get("started_ns", BASE))


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (BASE, "2030-01-01T00:00:00Z"),
        (BASE + S // 2, "2030-01-01T00:00:00.5Z"),
        (BASE + 123, "2030-01-01T00:00:00.000000123Z"),
        (BASE + 1_230_000, "2030-01-01T00:00:00.00123Z"),
    ],
)
def test_rfc3339_nano_as_go_writes_it(ns: int, text: str) -> None:
    assert rfc3339_nano(ns) == text


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, LogOptions()),
        ({"follow": "true", "previous": "1", "timestamps": "True"}, LogOptions(True, True, True)),
        ({"tailLines": "3", "limitBytes": "10"}, LogOptions(tail_lines=3, limit_bytes=10)),
        ({"tail": "4"}, LogOptions(tail_lines=4)),
        ({"tail": "all", "tailLines": "4"}, LogOptions()),
        ({"sinceSeconds": "5"}, LogOptions(since_ns=BASE + 5 * S)),
        ({"sinceTime": "2030-01-01T00:00:02Z"}, LogOptions(since_ns=BASE + 2 * S)),
    ],
)
def test_options_from_the_query(query: dict[str, str], expected: LogOptions) -> None:
    assert LogOptions.from_query(query, NOW) == expected


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ({"tailLines": "-1"}, 422),
        ({"limitBytes": "0"}, 422),
        ({"sinceSeconds": "0"}, 422),
        ({"sinceSeconds": "1", "sinceTime": "2030-01-01T00:00:00Z"}, 422),
        ({"tailLines": "x"}, 400),
        ({"follow": "maybe"}, 400),
        ({"sinceTime": "yesterday"}, 400),
    ],
)
def test_bad_options_are_refused_as_upstream_refuses_them(query: dict[str, str], status: int) -> None:
    with pytest.raises(LogRequestError) as caught:
        LogOptions.from_query(query, NOW)
    assert caught.value.status == status


@pytest.mark.parametrize(
    ("text", "lines", "expected"),
    [
        ("a\nb\nc\n", None, "a\nb\nc\n"),
        ("a\nb\nc\n", 0, ""),
        ("a\nb\nc\n", 1, "c\n"),
        ("a\nb\nc\n", 2, "b\nc\n"),
        ("a\nb\nc\n", 9, "a\nb\nc\n"),
        ("a\nb\nc", 1, "c"),
        ("a\nb\nc", 2, "b\nc"),
        ("a\n\n\n", 2, "\n\n"),
        ("", 3, ""),
    ],
)
@pytest.mark.parametrize("block", [1, 2, 1 << 20])
def test_tail_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, lines: int | None, expected: str, block: int
) -> None:
    monkeypatch.setattr(kubeletapi, "_BLOCK", block)
    before = "earlier attempt\n"  # the attempt's output starts after it: tailing never reaches back into it
    found = attempt(tmp_path, before + text, start=len(before))
    assert (tmp_path / "main.log").read_text()[tail_start(found, lines) :] == expected


async def test_an_attempt_is_its_own_range_and_lines_carry_their_chunks_time(tmp_path: Path) -> None:
    text = "first\nsecond\nthird\nfourth"  # a last line without its newline is still a line
    # Chunks: "first\nsec" at +1 s, "ond\nthird\n" at +2 s, "fourth" at +3 s (output of the next attempt follows).
    stamps = ((0, BASE + S), (9, BASE + 2 * S), (19, BASE + 3 * S))
    found = attempt(tmp_path, text + "next attempt\n", end=len(text), stamps=stamps)
    assert await read(found) == text
    assert await read(found, timestamps=True) == (
        "2030-01-01T00:00:01Z first\n"
        "2030-01-01T00:00:01Z second\n"  # it began in the first chunk
        "2030-01-01T00:00:02Z third\n"
        "2030-01-01T00:00:03Z fourth"
    )
    assert await read(found, since_ns=BASE + 2 * S) == "third\nfourth"
    # tailLines first, then since (as upstream): the last two lines, of which one is recent enough.
    assert await read(found, tail_lines=2, since_ns=BASE + 3 * S) == "fourth"
    # limitBytes last, counting the timestamps.
    assert await read(found, timestamps=True, limit_bytes=25) == "2030-01-01T00:00:01Z firs"
    assert await read(found, limit_bytes=100) == text


async def test_output_before_the_first_stamp_has_the_attempts_start_time(tmp_path: Path) -> None:
    found = attempt(tmp_path, "from the wrapper\n", started_ns=BASE + 7 * S)
    assert await read(found, timestamps=True) == "2030-01-01T00:00:07Z from the wrapper\n"


async def test_following_an_attempt_that_ended_reads_to_its_end(tmp_path: Path) -> None:
    found = attempt(tmp_path, "a\nb\npartial")
    assert found.running() is Running.ENDED
    assert await read(found, follow=True) == "a\nb\npartial"


def test_the_records_place_each_attempt_in_the_log_file(tmp_path: Path) -> None:
    records = PodRecords(tmp_path / "logs" / "default" / "p", "uid-1")
    records.begin("node-1", "default", "p", "2030-01-01T00:00:00Z")
    record = records.container("main")
    log = tmp_path / "main.log"
    assert containers.attempt_log(record, log) is None
    log.write_text("one\ntwo\n")
    (record.start(1, "2030-01-01T00:00:00Z") / containers.LOG_START).write_text("0\n")
    (record.run_dir(1) / containers.LOG_INDEX).write_text(
        f"0 {BASE}\n4 {BASE + S}\n8 "
    )  # a half-written line
    assert containers.attempt_log(record, log, previous=True) is None
    (record.start(2, "2030-01-01T00:00:01Z") / containers.LOG_START).write_text("8\n")
    record.start(3, "2030-01-01T00:00:02Z")  # a kubelet stopped before it ran: never ran, no output
    (record.start(4, "2030-01-01T00:00:03Z") / containers.LOG_START).write_text("8\n")
    latest = containers.attempt_log(record, log)
    previous = containers.attempt_log(record, log, previous=True)
    assert latest is not None and previous is not None
    assert (latest.start, latest.end) == (8, None)
    assert (previous.run_dir, previous.start, previous.end) == (record.run_dir(2), 8, 8)
    assert previous.running() is Running.ENDED, "another attempt followed it"
    stamps, read_to = containers.read_stamps(record.run_dir(1), 0)
    assert stamps == ((0, BASE), (4, BASE + S)) and read_to == len(f"0 {BASE}\n4 {BASE + S}\n")
