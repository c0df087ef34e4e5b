"""Garbage collection of mirrors: one sweep per manager, every kind, every worker.

Syncs delete the mirrors of the Jobs they look at; the sweep finds the rest — mirrors whose user Job is gone (or
was re-created with another UID) while no sync looked, such as across a manager restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from multiqueue.api.meta import annotations_of, key_of, uid_of
from multiqueue.api.types import Obj
from multiqueue.dispatch.executor import Executor
from multiqueue.dispatch.generic import GenericJob
from multiqueue.dispatch.mirror import ORIGIN_UID_ANNOTATION
from multiqueue.dispatch.workers import WorkerPool
from multiqueue.kube.errors import KubeError
from multiqueue.kube.informer import Informer

log = logging.getLogger(__name__)


def garbage(pool: WorkerPool, users: Mapping[str, Informer]) -> list[tuple[str, str, Obj]]:
    """(kind, worker, mirror) of every mirror of ours whose user Job is gone or is another Job of that name."""
    found = []
    for name, worker in pool.workers.items():
        if not worker.active:
            continue  # asked again once it is back
        for kind, informer in worker.mirrors.items():
            for mirror in informer.objects():
                user = users[kind].get(key_of(mirror))
                if user is None or uid_of(user) != annotations_of(mirror).get(ORIGIN_UID_ANNOTATION):
                    found.append((kind, name, mirror))
    return found


async def collect_garbage(
    pool: WorkerPool, users: Mapping[str, Informer], adapters: Mapping[str, GenericJob], executor: Executor
) -> int:
    """Delete every mirror :func:`garbage` finds (mirrors of other managers are never in our caches)."""
    doomed = garbage(pool, users)
    for kind, worker, mirror in doomed:
        await executor.delete_mirror(adapters[kind], worker, mirror)
    return len(doomed)


async def sweep_every(
    interval: float,
    pool: WorkerPool,
    users: Mapping[str, Informer],
    adapters: Mapping[str, GenericJob],
    executor: Executor,
) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            await collect_garbage(pool, users, adapters, executor)
        except KubeError as exc:
            log.warning("garbage collection of mirrors: %s", exc)
