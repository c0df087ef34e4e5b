"""The options of a pods/log request as kube-apiserver reads them: decoded (400 with Go's messages), validated
(422 on ``PodLogOptions``), the container chosen, and the query it forwards to the node's kubelet.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime

from multiqueue.api import query
from multiqueue.api.errors import FieldError, forbidden, invalid
from multiqueue.api.meta import as_dict, as_list, metadata
from multiqueue.api.types import Obj


@dataclasses.dataclass(frozen=True)
class PodLogOptions:
    container: str = ""
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    since_seconds: int | None = None
    since_time: datetime | None = None
    tail_lines: int | None = None
    limit_bytes: int | None = None
    stream: str | None = None  # only with the PodLogsQuerySplitStreams feature, off by default


def parse(params: Mapping[str, str]) -> PodLogOptions:
    """Raises :class:`~multiqueue.api.query.QueryError` for a value that does not decode."""
    since_time = params.get("sinceTime")
    return PodLogOptions(
        container=params.get("container", ""),
        follow=query.flag(params.get("follow")),
        previous=query.flag(params.get("previous")),
        timestamps=query.flag(params.get("timestamps")),
        since_seconds=query.int64(params.get("sinceSeconds")),
        since_time=None if since_time is None else query.rfc3339(since_time),
        tail_lines=query.int64(params.get("tailLines")),
        limit_bytes=query.int64(params.get("limitBytes")),
        stream=params.get("stream"),
    )


def errors(options: PodLogOptions) -> list[FieldError]:
    """Upstream's ValidatePodLogOptions, the stream feature off."""
    found = []
    if options.tail_lines is not None and options.tail_lines < 0:
        found.append(invalid("tailLines", options.tail_lines, "must be greater than or equal to 0"))
    if options.limit_bytes is not None and options.limit_bytes < 1:
        found.append(invalid("limitBytes", options.limit_bytes, "must be greater than 0"))
    if options.since_seconds is not None and options.since_time is not None:
        # Go prints the root field path as "[]".
        found.append(forbidden("[]", "at most one of `sinceTime` or `sinceSeconds` may be specified"))
    elif options.since_seconds is not None and options.since_seconds < 1:
        found.append(invalid("sinceSeconds", options.since_seconds, "must be greater than 0"))
    if options.stream is not None:
        found.append(forbidden("stream", "may not be specified"))
    return found


class NoContainer(ValueError):
    """The request names no container the pod has (a 400 with upstream's message)."""


def container(pod: Obj, named: str) -> str:
    """The container whose log is asked for: the one named, or the pod's only one."""
    spec = as_dict(pod.get("spec"))
    pod_name = str(metadata(pod).get("name"))
    listed = {
        field: [str(as_dict(c).get("name")) for c in as_list(spec.get(field))]
        for field in ("initContainers", "containers", "ephemeralContainers")
    }
    if named:
        if not any(named in names for names in listed.values()):
            raise NoContainer(f"container {named} is not valid for pod {pod_name}")
        return named
    main = listed["containers"]
    if len(main) == 1:
        return main[0]
    if not main:
        raise NoContainer(f"a container name must be specified for pod {pod_name}")
    every = listed["initContainers"] + main + listed["ephemeralContainers"]
    raise NoContainer(
        f"a container name must be specified for pod {pod_name}, choose one of: [{' '.join(every)}]"
    )


def kubelet_query(options: PodLogOptions) -> dict[str, str]:
    """What kube-apiserver asks the kubelet for: the options set, times to the second."""
    params = {}
    for name, on in (
        ("follow", options.follow),
        ("previous", options.previous),
        ("timestamps", options.timestamps),
    ):
        if on:
            params[name] = "true"
    if options.since_seconds is not None:
        params["sinceSeconds"] = str(options.since_seconds)
    if options.since_time is not None:
        t = options.since_time.astimezone(UTC)
        params["sinceTime"] = (
            f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}Z"
        )
    if options.tail_lines is not None:
        params["tailLines"] = str(options.tail_lines)
    if options.limit_bytes is not None:
        params["limitBytes"] = str(options.limit_bytes)
    return params
