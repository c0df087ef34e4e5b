"""The client's token bucket: a burst at once, then the sustained rate, with the waits of requests made together
queued one after another rather than all granted at the same instant."""

from __future__ import annotations

import asyncio

from multiqueue.kube.client import RateLimiter


class Time:
    """A clock that moves only when a request sleeps, recording each wait."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(round(seconds, 6))


async def test_a_burst_goes_at_once_and_the_rest_wait_their_turn_at_the_rate() -> None:
    time = Time()
    limiter = RateLimiter(qps=10, burst=2, clock=time.clock, sleep=time.sleep)
    await asyncio.gather(*(limiter.acquire() for _ in range(5)))
    assert time.waits == [0.1, 0.2, 0.3]


async def test_tokens_come_back_with_time_up_to_the_burst() -> None:
    time = Time()
    limiter = RateLimiter(qps=10, burst=2, clock=time.clock, sleep=time.sleep)
    for _ in range(2):
        await limiter.acquire()
    time.now += 60  # a long quiet spell refills the bucket only up to the burst
    for _ in range(3):
        await limiter.acquire()
    assert time.waits == [0.1]


async def test_no_qps_means_no_limit() -> None:
    time = Time()
    limiter = RateLimiter(qps=0, burst=1, clock=time.clock, sleep=time.sleep)
    await asyncio.gather(*(limiter.acquire() for _ in range(50)))
    assert time.waits == []
