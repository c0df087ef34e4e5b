"""Jobs as a test sees them through a watch that outlives crashes of the API server, and Jobs that leave a
marker behind each time one of their pods runs.

A marker Job's only container appends one line (the node and the pod) to a file named after the Job; with
``completions: 1``, ``restartPolicy: Never`` and ``backoffLimit: 0`` a second line can only come from the Job
running twice, never from a retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from multiqueue.api.types import JOBS
from multiqueue.dispatch.mirror import FINALIZER_PREFIX
from multiqueue.kube.client import KubeClient
from multiqueue.kube.config import KubeconfigError
from multiqueue.kube.errors import KubeError

Obj = dict[str, Any]
MANAGED_BY = "multiqueue.dev/dispatcher"
CLUSTER_LABEL = "multiqueue.dev/cluster"
PIN_LABEL = "multiqueue.dev/requested-cluster"
ORIGIN_LABEL = "multiqueue.dev/origin"
# Between two attempts to watch again after the connection broke (the server may be down for a while).
RECONNECT_PAUSE = 0.2


def condition_true(job: Obj, type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def finished(job: Obj) -> bool:
    return condition_true(job, "Complete") or condition_true(job, "Failed")


def placed_on(job: Obj) -> str | None:
    return ((job.get("metadata") or {}).get("labels") or {}).get(CLUSTER_LABEL)


def _state(name: str, job: Obj) -> str:
    return f"{name} on {placed_on(job) or '-'} status {json.dumps(job.get('status') or {}, sort_keys=True)}"


def our_finalizers(job: Obj) -> list[str]:
    return [f for f in (job.get("metadata") or {}).get("finalizers") or [] if f.startswith(FINALIZER_PREFIX)]


def marker_job(
    name: str, markers: Path, *, seconds: float = 0.0, gate: Path | None = None, pin: str | None = None
) -> Obj:
    """A managed Job whose pod writes one marker line, then sleeps ``seconds`` and, with ``gate``, waits for that
    file to exist."""
    command = 'echo "$NODE_NAME $HOSTNAME" >> "$MARKERS/$JOB_NAME"'
    if seconds > 0:
        command += f"; sleep {seconds}"
    if gate is not None:
        command += f"; while [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.2; done"
    labels = {PIN_LABEL: pin} if pin is not None else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "managedBy": MANAGED_BY,
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["sh", "-c", command],
                            "env": [
                                {"name": "JOB_NAME", "value": name},
                                {"name": "MARKERS", "value": str(markers)},
                                {
                                    "name": "NODE_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                                },
                            ],
                        }
                    ],
                }
            },
        },
    }


def marker_lines(markers: Path, names: list[str]) -> dict[str, list[str]]:
    """Each Job's marker lines (none when it never ran)."""
    found: dict[str, list[str]] = {}
    for name in names:
        path = markers / name
        found[name] = path.read_text().splitlines() if path.exists() else []
    return found


def not_exactly_once(markers: Path, names: list[str]) -> str:
    """'' when every Job ran exactly once; else how many did not, and which, with their marker lines."""
    lines = marker_lines(markers, names)
    bad = {name: found for name, found in lines.items() if len(found) != 1}
    if not bad:
        return ""
    twice = sorted(n for n, found in bad.items() if len(found) > 1)
    never = sorted(n for n, found in bad.items() if not found)
    # The same pod twice: its node ran it again. Different pods: a second pod or a second mirror was made.
    same_pod = sum(1 for n in twice if len(set(bad[n])) == 1)
    shown = "; ".join(f"{n}: {len(bad[n])} x {sorted(set(bad[n]))}" for n in [*twice, *never][:15])
    return (
        f"{len(bad)} of {len(names)} Jobs did not run exactly once: {len(twice)} ran more than once "
        f"({same_pod} of them the same pod again, {len(twice) - same_pod} in different pods), "
        f"{len(never)} never ran; marker lines (node pod): {shown}"
    )


class JobsView:
    """The latest version of every Job of one cluster and namespace (optionally by label), kept by a watch that
    lists and watches again whenever the connection breaks; ``changed`` is set on every change."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[KubeClient]],
        namespace: str | None = "default",
        *,
        label_selector: str | None = None,
        server_up: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.connect = connect
        self.namespace = namespace
        self.label_selector = label_selector
        self.server_up = server_up
        self.latest: dict[str, Obj] = {}
        self.uids_seen: dict[str, set[str]] = {}  # name -> every UID a Job of that name had
        self.changed = asyncio.Event()
        self.reconnects = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="jobs view")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _key(self, job: Obj) -> str:
        meta = job["metadata"]
        return str(meta["name"]) if self.namespace else f"{meta.get('namespace')}/{meta['name']}"

    def _saw(self, job: Obj) -> None:
        key = self._key(job)
        self.latest[key] = job
        self.uids_seen.setdefault(key, set()).add(str(job["metadata"].get("uid")))

    async def _run(self) -> None:
        while True:
            try:
                client = await self.connect()
            except (KubeconfigError, OSError):
                client = None
            if client is not None:
                try:
                    await self._list_and_watch(client)
                except (KubeError, OSError):
                    pass
                finally:
                    await client.close()
            self.reconnects += 1
            if self.server_up is not None:
                await self.server_up()
            await asyncio.sleep(RECONNECT_PAUSE)

    async def _list_and_watch(self, client: KubeClient) -> None:
        items, rv = await client.list(JOBS, self.namespace, label_selector=self.label_selector)
        self.latest = {}
        for item in items:
            self._saw(item)
        self.changed.set()
        while True:
            async for event in client.watch(
                JOBS,
                self.namespace,
                label_selector=self.label_selector,
                resource_version=rv,
                timeout_seconds=300,
            ):
                job = event["object"]
                rv = str(job["metadata"].get("resourceVersion") or rv)
                if event["type"] == "DELETED":
                    self.latest.pop(self._key(job), None)
                elif event["type"] in ("ADDED", "MODIFIED"):
                    self._saw(job)
                else:
                    continue
                self.changed.set()

    async def until(
        self, predicate: Callable[[], bool], within: float, what: str | Callable[[], str] = ""
    ) -> None:
        """Wait for ``predicate`` to hold, checking it again on every change; ``what`` (or what it returns then)
        says in the failure what did not happen."""
        try:
            async with asyncio.timeout(within):
                while not predicate():
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            described = what() if callable(what) else what
            raise AssertionError(f"not within {within:.0f} s: {described or predicate}") from None

    def states(self, names: list[str]) -> str:
        """Where each of ``names`` is placed and its status, for failure messages."""
        return "; ".join(
            _state(n, j) if (j := self.latest.get(n)) is not None else f"{n} not seen" for n in names
        )

    def unfinished(self, limit: int = 10) -> str:
        """Some Jobs that have not finished, with their status, for failure messages."""
        waiting = [(n, j) for n, j in sorted(self.latest.items()) if not finished(j)]
        shown = "; ".join(_state(n, j) for n, j in waiting[:limit])
        return f"{len(waiting)} unfinished: {shown}"

    def empty(self) -> bool:
        return not self.latest

    def count(self, predicate: Callable[[Obj], bool]) -> int:
        return sum(1 for job in self.latest.values() if predicate(job))
