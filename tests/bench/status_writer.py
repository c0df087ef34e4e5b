"""A worker's Job controller reduced to one write per mirror, so a benchmark measures the manager rather than the
workers: what kwok is for nodes, this is for the mirrors of a cheap worker (an API server with no Job controller
and no kubelet). Real API traffic both ways; nothing is simulated inside the manager.

It watches the Jobs that carry the manager's origin label (``multiqueue.dev/origin``) and, the first time it sees
one that is not suspended and not finished, writes its status once, as a JSON merge patch of the ``status``
subresource: the status the Job controller writes for a one-pod Job whose pod succeeded at once, ``T`` being the
moment of the write (RFC 3339, seconds)::

    startTime: T
    completionTime: T
    active: 0
    ready: 0
    terminating: 0
    succeeded: 1
    failed: 0
    uncountedTerminatedPods: {}
    conditions:
    - {type: SuccessCriteriaMet, status: "True", reason: CompletionsReached,
       message: Reached expected number of succeeded pods, lastProbeTime: T, lastTransitionTime: T}
    - {type: Complete, status: "True", reason: CompletionsReached,
       message: Reached expected number of succeeded pods, lastProbeTime: T, lastTransitionTime: T}

The server validates it under the Job status rules (startTime before completionTime, SuccessCriteriaMet before or
with Complete, no pod left active or uncounted), as it would the controller's write. A mirror deleted before its
write is skipped.

tests/bench/dispatch_scale.py (``--workers-mode cheap``) runs one :class:`StatusWriter` per worker as tasks of its
own, or one process per worker (``--writers process``): ``python -m tests.bench.status_writer --kubeconfig FILE
--context NAME [--origin multiqueue]``, which prints ``writing statuses`` once it has listed the mirrors there.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from multiqueue.api import jobs
from multiqueue.api.meta import format_time
from multiqueue.api.types import JOBS
from multiqueue.dispatch.mirror import ORIGIN_LABEL
from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.kube.errors import Gone, NotFound

# Writes in flight at once: enough that the writer never holds a burst back.
IN_FLIGHT = 32
MESSAGE = "Reached expected number of succeeded pods"


def succeeded_at_once(now: datetime) -> dict[str, Any]:
    """The status of a one-pod Job whose pod succeeded at ``now``."""
    stamp = format_time(now)
    conditions = [
        {
            "type": type_,
            "status": "True",
            "reason": "CompletionsReached",
            "message": MESSAGE,
            "lastProbeTime": stamp,
            "lastTransitionTime": stamp,
        }
        for type_ in (jobs.SUCCESS_CRITERIA_MET, jobs.COMPLETE)
    ]
    return {
        "startTime": stamp,
        "completionTime": stamp,
        "active": 0,
        "ready": 0,
        "terminating": 0,
        "succeeded": 1,
        "failed": 0,
        "uncountedTerminatedPods": {},
        "conditions": conditions,
    }


class StatusWriter:
    """Finishes each of one worker's mirrors once; counts what it wrote."""

    def __init__(self, client: KubeClient, origin: str) -> None:
        self.client = client
        self.selector = f"{ORIGIN_LABEL}={origin}"
        self.seen: set[str] = set()
        self.written = 0
        self.slots = asyncio.Semaphore(IN_FLIGHT)
        self.pending: set[asyncio.Task[None]] = set()

    def offer(self, job: dict[str, Any]) -> None:
        """Write ``job``'s status unless it is suspended, finished or already handled."""
        meta = job.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if uid in self.seen or jobs.is_suspended(job) or jobs.is_finished(job):
            return
        self.seen.add(uid)
        task = asyncio.create_task(self._write(str(meta["name"]), str(meta.get("namespace", "default"))))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def _write(self, name: str, namespace: str) -> None:
        async with self.slots:
            body = {"status": succeeded_at_once(datetime.now(UTC))}
            with contextlib.suppress(NotFound):
                await self.client.patch(JOBS, name, body, namespace, subresource="status")
                self.written += 1

    async def run(self, ready: asyncio.Event | None = None) -> None:
        """List, then watch from there, for ever; a watch too old to resume lists again."""
        while True:
            items, version = await self.client.list(JOBS, label_selector=self.selector)
            for item in items:
                self.offer(item)
            if ready is not None:
                ready.set()
            try:
                while True:
                    async for event in self.client.watch(
                        JOBS, resource_version=version, label_selector=self.selector
                    ):
                        version = event["object"]["metadata"]["resourceVersion"]
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self.offer(event["object"])
            except Gone:
                continue


async def serve(kubeconfig: Path, context: str, origin: str) -> None:
    options = ClientOptions(qps=0, burst=1, request_timeout=120.0, user_agent="status-writer")
    async with await KubeClient.connect(kubeconfig, context, context, options) as client:
        writer = StatusWriter(client, origin)
        ready = asyncio.Event()
        running = asyncio.create_task(writer.run(ready))
        await ready.wait()
        print("writing statuses", flush=True)
        await running


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.status_writer")
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--context", required=True)
    parser.add_argument("--origin", default="multiqueue", help="the manager's name (default: %(default)s)")
    return parser.parse_args()


if __name__ == "__main__":
    options = arguments()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(options.kubeconfig, options.context, options.origin))
