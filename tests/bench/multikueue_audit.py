"""Requests counted where they are served: kube-apiserver's audit log (JSON lines, Metadata level), each request
once, by who sent it (the first word of its User-Agent), verb and resource.

A request is counted at its answer (stage ResponseComplete), a watch when it starts (ResponseStarted): a watch
still open at the end of a run is counted, and one that ends in a later run is not counted twice. The bench reads
the part of the log a run wrote (from the size it had when the run began)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def client(user_agent: str) -> str:
    """The program behind a User-Agent: ``kueue/v0.17.0 (linux/amd64) ...`` -> ``kueue``."""
    return user_agent.split("/", 1)[0].split(" ", 1)[0] or "unknown"


def what(event: Mapping[str, Any]) -> str:
    """``verb resource[/subresource]`` (a non-resource request: ``verb path``), followed by the status code in
    parentheses when the request failed (``create jobs (409)``)."""
    ref = event.get("objectRef")
    if not ref:
        done = f"{event.get('verb', '')} {event.get('requestURI', '').split('?', 1)[0]}"
    else:
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        done = f"{event.get('verb', '')} {resource}"
    code = int(event.get("responseStatus", {}).get("code", 200))
    return f"{done} ({code})" if code >= 400 else done


def counted(event: Mapping[str, Any]) -> bool:
    """Whether this event is the one its request is counted at."""
    if event.get("verb") == "watch":
        return event.get("stage") == "ResponseStarted"
    return event.get("stage") == "ResponseComplete"


def count(lines: Iterable[str]) -> dict[str, Counter[str]]:
    """Requests by client, then by ``verb resource``."""
    found: dict[str, Counter[str]] = {}
    for line in lines:
        if not line.strip():
            continue
        event = json.loads(line)
        if event.get("kind") != "Event" or not counted(event):
            continue
        found.setdefault(client(event.get("userAgent", "")), Counter())[what(event)] += 1
    return found


def size(log: Path) -> int:
    return log.stat().st_size if log.exists() else 0


def count_since(log: Path, offset: int) -> dict[str, Counter[str]]:
    """The requests of ``log`` written after its first ``offset`` bytes (blocking: call it in a thread)."""
    with log.open("rb") as opened:
        opened.seek(offset)
        return count(line.decode() for line in opened)


def per_job(counts: Mapping[str, int], jobs: int) -> dict[str, float]:
    """Counts divided by the Jobs of the run, the ones under 0.005 per Job left out."""
    return {k: round(n / jobs, 2) for k, n in sorted(counts.items()) if round(n / jobs, 2) > 0}


def by_verb(counts: Mapping[str, int]) -> dict[str, int]:
    verbs: Counter[str] = Counter()
    for key, n in counts.items():
        verbs[key.split(" ", 1)[0]] += n
    return dict(verbs)
