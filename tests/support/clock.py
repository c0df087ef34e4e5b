"""A clock that tests set and move, for the ``clock=`` of controllers: time passes when the test says so."""

from __future__ import annotations

from datetime import datetime, timedelta


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> datetime:
        self.now += delta
        return self.now

    def set(self, moment: datetime) -> None:
        if moment < self.now:
            raise ValueError(f"a clock does not go back: {moment} is before {self.now}")
        self.now = moment
