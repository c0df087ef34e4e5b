"""The dispatcher's own counts, read by /metrics, ``multiqueue status`` and the benchmarks."""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Final

from opentelemetry import metrics
from opentelemetry.metrics import Histogram, Meter

from multiqueue.dispatch.capacity import Key

LATENCY_SAMPLES: Final = 10_000


@dataclasses.dataclass
class DispatcherMetrics:
    dispatched: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    rejected: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    # By the worker that was lost.
    redispatched: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    # The latest samples, for benchmarks; operators read the histogram on /metrics.
    dispatch_latency: collections.deque[float] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=LATENCY_SAMPLES)
    )
    status_sync_latency: collections.deque[float] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=LATENCY_SAMPLES)
    )
    histogram: Histogram | None = None
    # When the manager first saw a Job, and when its mirror finished (monotonic): the starts of the latencies.
    _seen: dict[Key, float] = dataclasses.field(default_factory=dict)
    _finished: dict[Key, float] = dataclasses.field(default_factory=dict)

    @classmethod
    def with_meter(cls, meter: Meter | None) -> DispatcherMetrics:
        histogram = (meter or metrics.get_meter(__name__)).create_histogram(
            "multiqueue_dispatch_latency_seconds",
            unit="s",
            description="From the manager first seeing a Job to its mirror existing on a worker.",
        )
        return cls(histogram=histogram)

    def seen(self, key: Key) -> None:
        self._seen.setdefault(key, time.monotonic())

    def dispatched_to(self, key: Key, worker: str) -> None:
        self.dispatched[worker] += 1
        seen = self._seen.pop(key, None)
        if seen is not None:
            latency = time.monotonic() - seen
            self.dispatch_latency.append(latency)
            if self.histogram is not None:
                self.histogram.record(latency)

    def mirror_finished(self, key: Key) -> None:
        self._finished.setdefault(key, time.monotonic())

    def status_synced(self, key: Key) -> None:
        finished = self._finished.pop(key, None)
        if finished is not None:
            self.status_sync_latency.append(time.monotonic() - finished)

    def forget(self, key: Key) -> None:
        self._seen.pop(key, None)
        self._finished.pop(key, None)
