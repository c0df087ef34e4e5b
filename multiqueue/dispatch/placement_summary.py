"""The one line that accounts for every configured worker of a Job that waits: how many could take it, then each
reason with the count of workers it stops and their names, e.g. ``0/3 workers can take this Job: 2 have no
capacity now (worker-1: cpu 3.5/4, worker-3: jobs 2/2), 1 does not match the selector region=us (worker-2)``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from multiqueue.dispatch.placement_filters import Verdict

# The verb of a phrase for more than one worker.
_PLURAL = {
    "is ": "are ",
    "has ": "have ",
    "does ": "do ",
    "asks ": "ask ",
    "takes ": "take ",
    "holds ": "hold ",
}


def first_failure(verdicts: Sequence[Verdict]) -> Verdict | None:
    """The verdict that stops a worker: its first failing filter, in the filters' order."""
    return next((v for v in verdicts if not v.passes), None)


def summary(verdicts: Mapping[str, Sequence[Verdict]]) -> str:
    """``verdicts``: each configured worker's verdicts, by name. Reasons stopping more workers come first, then
    in the filters' order."""
    total = len(verdicts)
    if total == 0:
        return "0/0 workers can take this Job: no worker is configured"
    groups: dict[str, list[tuple[str, Verdict]]] = {}
    order: dict[str, int] = {}
    passing = 0
    for name, seen in sorted(verdicts.items()):
        failed = first_failure(seen)
        if failed is None:
            passing += 1
            continue
        groups.setdefault(failed.text, []).append((name, failed))
        order.setdefault(failed.text, seen.index(failed))
    head = f"{passing}/{total} workers can take this Job"
    if not groups:
        return head
    parts = [
        _part(text, stopped)
        for text, stopped in sorted(groups.items(), key=lambda g: (-len(g[1]), order[g[0]], g[0]))
    ]
    return f"{head}: {', '.join(parts)}"


def _part(text: str, stopped: list[tuple[str, Verdict]]) -> str:
    phrase = _plural(text) if len(stopped) > 1 else text
    shared = stopped[0][1]
    if shared.code in _SHARED_DETAIL and shared.detail:
        # The pin or the selector is the Job's, the same for every worker: said once, after the phrase.
        phrase = f"{phrase} {shared.detail}"
    names = ", ".join(
        f"{name}: {v.detail}" if v.detail and v.code not in _SHARED_DETAIL else name for name, v in stopped
    )
    return f"{len(stopped)} {phrase} ({names})"


# Reasons whose detail is the Job's own term rather than the worker's numbers or health.
_SHARED_DETAIL: Final = frozenset({"SelectorMismatch", "NotPinned"})


def _plural(text: str) -> str:
    for singular, plural in _PLURAL.items():
        if text.startswith(singular):
            text = plural + text[len(singular) :]
            break
    return text.replace(" than it has ", " than they have ").replace(" its ", " their ")
