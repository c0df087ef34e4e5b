"""Request metrics of a local API server, exposed in the Prometheus text format under upstream's names.

The benchmarks count API requests per Job from these, so the labels match upstream's
``apiserver_request_total{verb,group,resource,subresource,code}``.
"""

from __future__ import annotations

import bisect
import collections
from typing import Final

# Upstream's buckets for apiserver_request_duration_seconds.
BUCKETS: Final = (
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0,
    20.0, 30.0, 45.0, 60.0,
)  # fmt: skip

Labels = tuple[str, str, str, str]  # verb, group, resource, subresource


class RequestMetrics:
    def __init__(self) -> None:
        self._totals: collections.Counter[tuple[Labels, str]] = collections.Counter()
        self._durations: dict[Labels, list[int]] = {}
        self._sums: collections.defaultdict[Labels, float] = collections.defaultdict(float)
        self._counts: collections.Counter[Labels] = collections.Counter()

    def observe(
        self, verb: str, group: str, resource: str, subresource: str, code: int, seconds: float
    ) -> None:
        labels = (verb, group, resource, subresource)
        self._totals[(labels, str(code))] += 1
        if verb == "WATCH":
            return  # a watch lasts as long as the client wants; upstream keeps it out of the latency histogram
        buckets = self._durations.setdefault(labels, [0] * len(BUCKETS))
        index = bisect.bisect_left(BUCKETS, seconds)
        if index < len(BUCKETS):
            buckets[index] += 1
        self._sums[labels] += seconds
        self._counts[labels] += 1

    def total(self, verb: str | None = None, resource: str | None = None) -> int:
        """Requests counted so far, optionally for one verb and/or resource (benchmarks read this)."""
        return sum(
            n
            for ((v, _g, r, _s), _code), n in self._totals.items()
            if (verb is None or v == verb) and (resource is None or r == resource)
        )

    def render(self) -> str:
        lines = [
            "# HELP apiserver_request_total Counter of apiserver requests broken out by verb, resource and code.",
            "# TYPE apiserver_request_total counter",
        ]
        for (labels, code), n in sorted(self._totals.items()):
            lines.append(f'apiserver_request_total{{{_labels(labels)},code="{code}"}} {n}')
        lines += [
            "# HELP apiserver_request_duration_seconds Response latency distribution in seconds.",
            "# TYPE apiserver_request_duration_seconds histogram",
        ]
        for labels, buckets in sorted(self._durations.items()):
            running = 0
            for bound, n in zip(BUCKETS, buckets, strict=True):
                running += n
                lines.append(
                    f'apiserver_request_duration_seconds_bucket{{{_labels(labels)},le="{bound}"}} {running}'
                )
            lines.append(
                f'apiserver_request_duration_seconds_bucket{{{_labels(labels)},le="+Inf"}} {self._counts[labels]}'
            )
            lines.append(
                f"apiserver_request_duration_seconds_sum{{{_labels(labels)}}} {self._sums[labels]:.6f}"
            )
            lines.append(
                f"apiserver_request_duration_seconds_count{{{_labels(labels)}}} {self._counts[labels]}"
            )
        return "\n".join(lines) + "\n"


def _labels(labels: Labels) -> str:
    verb, group, resource, subresource = labels
    return f'verb="{verb}",group="{group}",resource="{resource}",subresource="{subresource}"'
