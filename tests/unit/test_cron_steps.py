"""The steps under cron schedules on their own: Go's time-zone loading, the time helpers, and the next-activation
walk over bit masks."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest

from multiqueue.api.cronschedules import load_location
from multiqueue.api.cronsearch import STAR, aware, next_activation, unix_seconds

BERLIN = ZoneInfo("Europe/Berlin")


def _mask(*values: int) -> int:
    return sum(1 << v for v in values)


def _every(low: int, high: int) -> int:
    return STAR | _mask(*range(low, high + 1))


@dataclasses.dataclass(frozen=True)
class Masks:
    minute: int = dataclasses.field(default_factory=lambda: _every(0, 59))
    hour: int = dataclasses.field(default_factory=lambda: _every(0, 23))
    dom: int = dataclasses.field(default_factory=lambda: _every(1, 31))
    month: int = dataclasses.field(default_factory=lambda: _every(1, 12))
    dow: int = dataclasses.field(default_factory=lambda: _every(0, 6))


@pytest.mark.parametrize(
    ("name", "zone", "error"),
    [
        pytest.param("", UTC, None, id="empty-is-utc"),
        pytest.param("UTC", UTC, None, id="utc"),
        pytest.param("Local", None, None, id="local"),
        pytest.param("Europe/Berlin", BERLIN, None, id="iana"),
        pytest.param("../etc/passwd", None, "time: invalid location name", id="path"),
        pytest.param("Mars/Olympus", None, "unknown time zone Mars/Olympus", id="unknown"),
    ],
)
def test_load_location(name: str, zone: tzinfo | None, error: str | None) -> None:
    assert load_location(name) == (zone, error)


@pytest.mark.parametrize(
    ("moment", "seconds"),
    [
        pytest.param(datetime(1970, 1, 1, tzinfo=UTC), 0, id="epoch"),
        pytest.param(datetime(1970, 1, 1, 0, 0, 1, 500_000, tzinfo=UTC), 1, id="fraction-dropped"),
        pytest.param(
            datetime(1969, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC), -1, id="before-epoch-rounds-down"
        ),
        pytest.param(datetime(1970, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))), 0, id="offset"),
    ],
)
def test_unix_seconds(moment: datetime, seconds: int) -> None:
    assert unix_seconds(moment) == seconds


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        pytest.param(datetime(2026, 1, 1), datetime(2026, 1, 1, tzinfo=UTC), id="naive-is-utc"),
        pytest.param(
            datetime(2026, 1, 1, tzinfo=BERLIN), datetime(2026, 1, 1, tzinfo=BERLIN), id="aware-kept"
        ),
    ],
)
def test_aware(moment: datetime, expected: datetime) -> None:
    assert aware(moment) == expected
    assert aware(moment).tzinfo is expected.tzinfo


def _at(text: str) -> int:
    return unix_seconds(datetime.fromisoformat(text))


@pytest.mark.parametrize(
    ("masks", "zone", "after", "expected"),
    [
        pytest.param(
            Masks(), UTC, "2026-01-01T00:00:00+00:00", "2026-01-01T00:01:00+00:00", id="every-minute"
        ),
        pytest.param(
            Masks(minute=_mask(30), hour=_mask(9)),
            UTC,
            "2026-01-01T09:30:00+00:00",
            "2026-01-02T09:30:00+00:00",
            id="strictly-after",
        ),
        pytest.param(
            Masks(minute=_mask(0), hour=_mask(0), dom=_mask(1), month=_mask(3)),
            UTC,
            "2026-04-01T00:00:00+00:00",
            "2027-03-01T00:00:00+00:00",
            id="wraps-to-next-year",
        ),
        pytest.param(
            Masks(minute=_mask(30), hour=_mask(2)),
            BERLIN,
            "2026-03-28T12:00:00+00:00",
            "2026-03-30T00:30:00+00:00",
            id="skipped-wall-time-does-not-fire",
        ),
        pytest.param(
            Masks(minute=_mask(0), hour=_mask(0), dom=_mask(30), month=_mask(2)),
            UTC,
            "2026-01-01T00:00:00+00:00",
            None,
            id="february-30th-never",
        ),
        pytest.param(Masks(minute=0), UTC, "2026-01-01T00:00:00+00:00", None, id="empty-field-never"),
    ],
)
def test_next_activation(masks: Masks, zone: tzinfo, after: str, expected: str | None) -> None:
    found = next_activation(masks, zone, _at(after))
    assert found == (None if expected is None else _at(expected))
