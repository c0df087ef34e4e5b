"""The resourceVersion options of a LIST or WATCH, defaulted and validated as the upstream API server does.

With the WatchList feature on (the default since 1.34), a watch that names no resourceVersion (or "0") and neither
``sendInitialEvents`` nor ``resourceVersionMatch`` is treated as ``sendInitialEvents=true`` with
``resourceVersionMatch=NotOlderThan``: it starts with the current objects and, when bookmarks are allowed, a
BOOKMARK that marks the end of them. Bad combinations are 422s on the kind ``ListOptions.meta.k8s.io``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

from multiqueue.api.errors import FieldError, forbidden, invalid_status, not_supported, status
from multiqueue.api.query import flag
from multiqueue.api.types import Obj

EXACT: Final = "Exact"
NOT_OLDER_THAN: Final = "NotOlderThan"
# How long upstream's watch cache waits for a resourceVersion it has not reached before it answers "too large",
# and the retry it then suggests.
FRESHNESS_WAIT: Final = 3.0
TOO_LARGE_RETRY_SECONDS: Final = 1


@dataclasses.dataclass(frozen=True)
class ListOptions:
    watch: bool = False
    resource_version: str = ""
    resource_version_match: str = ""
    send_initial_events: bool | None = None
    allow_bookmarks: bool = False
    continue_token: str = ""

    @property
    def legacy_version(self) -> bool:
        """No resourceVersion, or "0": any recent state will do."""
        return self.resource_version in ("", "0")


def parse(query: Mapping[str, str]) -> ListOptions:
    """The options a request's query names, before defaulting."""
    return ListOptions(
        watch=flag(query.get("watch")),
        resource_version=query.get("resourceVersion", ""),
        resource_version_match=query.get("resourceVersionMatch", ""),
        send_initial_events=flag(query.get("sendInitialEvents")) if "sendInitialEvents" in query else None,
        allow_bookmarks=flag(query.get("allowWatchBookmarks")),
        continue_token=query.get("continue", ""),
    )


def with_defaults(options: ListOptions) -> ListOptions:
    """A legacy watch becomes a watch of the current objects first (upstream's SetListOptionsDefaults)."""
    if options.send_initial_events is not None or options.resource_version_match:
        return options
    if options.watch and options.legacy_version:
        return dataclasses.replace(options, send_initial_events=True, resource_version_match=NOT_OLDER_THAN)
    return options


def errors(options: ListOptions) -> list[FieldError]:
    """What upstream's ValidateListOptions refuses, in its order."""
    match = options.resource_version_match
    found: list[FieldError] = []
    if options.watch:
        if options.send_initial_events is not None and match != NOT_OLDER_THAN:
            found.append(
                forbidden(
                    "resourceVersionMatch",
                    f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}",
                )
            )
        if match:
            if options.send_initial_events is None:
                found.append(
                    forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    )
                )
            if match != NOT_OLDER_THAN:
                found.append(not_supported("resourceVersionMatch", match, [NOT_OLDER_THAN]))
            if options.continue_token:
                found.append(
                    forbidden(
                        "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"
                    )
                )
        return found
    if match:
        if not options.resource_version:
            found.append(
                forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )
            )
        if options.continue_token:
            found.append(
                forbidden(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"
                )
            )
        if match not in (EXACT, NOT_OLDER_THAN):
            found.append(not_supported("resourceVersionMatch", match, [EXACT, NOT_OLDER_THAN, ""]))
        if match == EXACT and options.resource_version == "0":
            found.append(
                forbidden(
                    "resourceVersionMatch",
                    'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    if options.send_initial_events is not None:
        found.append(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return found


def invalid(found: list[FieldError]) -> Obj:
    """The 422 Status for ``found``."""
    return invalid_status("ListOptions", "meta.k8s.io", "", found)


def page_size(resource_version: str, limit: int) -> int:
    """Items per page, 0 for all: a limit of 0 or less pages nothing, and upstream's watch cache ignores the
    limit of a LIST at resourceVersion "0"."""
    return 0 if limit <= 0 or resource_version == "0" else limit


def lists_exactly(options: ListOptions, limit: int) -> bool:
    """Whether a LIST shows the objects exactly at its resourceVersion: resourceVersionMatch=Exact, or the
    legacy form, a paged LIST that names a resourceVersion."""
    if options.resource_version_match == EXACT:
        return True
    return not options.resource_version_match and not options.legacy_version and limit > 0


def too_large_status(requested: int, current: int) -> Obj:
    """The 504 for a resourceVersion the server has not reached after :data:`FRESHNESS_WAIT`."""
    cause = {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    message = f"Timeout: Too large resource version: {requested}, current: {current}"
    return status(504, "Timeout", message, {"causes": [cause], "retryAfterSeconds": TOO_LARGE_RETRY_SECONDS})
