"""What ``multiqueue logs`` reads: the logs of the pods a Job's mirror runs on its worker, found through the same
clusters ``multiqueue status`` reads (multiqueue/dispatch/inspect.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from multiqueue.api import jobs
from multiqueue.api.meta import (
    annotations_of,
    as_dict,
    as_list,
    labels_of,
    metadata,
    name_of,
    namespace_of,
    uid_of,
)
from multiqueue.api.types import JOBS, PODS, Obj, Resource
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.config import ClusterRef, ManagerConfig
from multiqueue.dispatch.generic import GenericJob
from multiqueue.dispatch.inspect import (
    KnownWorker,
    connect,
    connect_worker,
    context_names,
    identity_of,
    known_workers,
)
from multiqueue.dispatch.mirror import CLUSTER_LABEL, ORIGIN_UID_ANNOTATION
from multiqueue.dispatch.split import parts_of
from multiqueue.dispatch.workers import WorkerSettings
from multiqueue.kube.client import KubeClient, LogQuery
from multiqueue.kube.errors import NotFound
from multiqueue.loop.tasks import cancel_and_wait


class LogsError(Exception):
    """Why no logs can be shown (one line for the person who asked)."""


@dataclasses.dataclass(frozen=True)
class LogOptions:
    """Which logs, as ``kubectl logs`` takes them."""

    index: int | None = None  # only the pod of this completion index
    container: str | None = None  # None: the pod's only container (or each one with all_containers)
    all_containers: bool = False
    tail: int | None = None
    timestamps: bool = False


@dataclasses.dataclass(frozen=True)
class LogSource:
    """One container's log to read: the prefix it is printed with when there are several."""

    pod: str
    container: str | None
    prefix: str


async def logs(
    config: ManagerConfig,
    name: str,
    namespace: str,
    options: LogOptions,
    contexts: Path | None = None,
    kind: GenericJob | None = None,
) -> list[tuple[str, str]]:
    """(prefix, log text) of each container asked for, of the Job's pods on the worker that ran it, lowest index
    first. ``contexts``: a kubeconfig whose context of a worker's name reaches a worker ``config`` does not know;
    ``kind``: the adapter of a kind other than batch/v1 Job, whose Jobs' pods are read."""
    async with _job_logs(config, name, namespace, options, contexts, kind) as (client, sources):
        texts = await asyncio.gather(
            *(
                client.read_log(s.pod, namespace, LogQuery(s.container, options.tail, options.timestamps))
                for s in sources
            )
        )
    return [(s.prefix, text) for s, text in zip(sources, texts, strict=True)]


async def follow_logs(
    config: ManagerConfig,
    name: str,
    namespace: str,
    options: LogOptions,
    contexts: Path | None = None,
    kind: GenericJob | None = None,
) -> AsyncGenerator[tuple[str, str], None]:
    """(prefix, line) as each container asked for writes them, until every one has ended."""
    async with _job_logs(config, name, namespace, options, contexts, kind) as (client, sources):
        lines: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue()

        async def follow(source: LogSource) -> None:
            try:
                query = LogQuery(source.container, options.tail, options.timestamps)
                async for line in client.follow_log(source.pod, namespace, query):
                    await lines.put((source.prefix, line))
            finally:
                await lines.put(None)

        followers = [asyncio.create_task(follow(s)) for s in sources]
        try:
            ended = 0
            while ended < len(followers):
                item = await lines.get()
                if item is None:
                    ended += 1
                else:
                    yield item
            for follower in followers:
                follower.result()  # a follower that failed says why
        finally:
            await cancel_and_wait(followers)


@asynccontextmanager
async def _job_logs(
    config: ManagerConfig,
    name: str,
    namespace: str,
    options: LogOptions,
    contexts: Path | None,
    kind: GenericJob | None,
) -> AsyncIterator[tuple[KubeClient, list[LogSource]]]:
    """A client of the worker that runs (or ran) the Job, and the containers to read: only of the mirror this
    manager made of this very Job, never of another Job of the same name there."""
    adapter = kind or BatchJobAdapter()
    resource = adapter.resource
    where = f'{resource.kind.lower()} "{namespace}/{name}"'
    async with connect(config.management, "management") as client:
        try:
            job = await client.get(resource, name, namespace)
        except NotFound as exc:
            raise LogsError(f"{where} not found on the management cluster") from exc
        worker_name = labels_of(job).get(CLUSTER_LABEL)
        parts = parts_of(job)
        if parts is not None and options.index is not None:
            # Run as parts: the index's own part's worker.
            worker_name = parts.worker_of(options.index, jobs.completions(job) or 0)
            if worker_name is None:
                raise LogsError(f"no part of {where} runs index {options.index} now: {parts.described()}")
        placed = identity_of(config).holds(job)
        known = await known_workers(config, client, contexts) if placed else []
    worker = next((w for w in known if w.name == worker_name), None)
    if worker is None and placed and worker_name and contexts is not None:
        # Not one the manager's config or Secrets name: a context of its name in the user's kubeconfig, if any.
        ref = ClusterRef.model_validate({"kubeconfig": contexts, "context": worker_name})
        if worker_name in await asyncio.to_thread(context_names, contexts):
            worker = KnownWorker(worker_name, WorkerSettings(), ref=ref)
    if worker is None:
        if adapter.is_finished(job):
            raise LogsError(
                f"{where} finished and its mirror is gone from the worker; mirrors stay "
                f"{config.mirror_ttl_after_finished:g}s after the Job finishes (mirrorTTLSecondsAfterFinished)"
            )
        raise LogsError(f"{where} has not been dispatched to a worker (yet)")
    async with connect_worker(worker, config.worker_secrets.allow_insecure_kubeconfigs) as client:
        try:
            mirror = await client.get(resource, name, namespace)
        except NotFound as exc:
            raise LogsError(f"{where} has no mirror on worker {worker.name} (yet)") from exc
        if annotations_of(mirror).get(ORIGIN_UID_ANNOTATION) != uid_of(job):
            raise LogsError(
                f"the {resource.kind} named {name} on worker {worker.name} was not made for this {resource.kind} "
                "(another manager's, or nobody's); its logs are not shown"
            )
        pods = await _pods_of(client, mirror, resource)
        if options.index is not None:
            pods = [p for p in pods if labels_of(p).get(jobs.COMPLETION_INDEX) == str(options.index)]
        if not pods:
            raise LogsError(f"no pods of {where} on worker {worker.name} (not started yet)")
        yield client, _sources(pods, options)


async def _pods_of(client: KubeClient, mirror: Obj, resource: Resource) -> list[Obj]:
    """The pods a mirror runs, in the order they are shown: a Job's by completion index; another kind's (its pods
    come from batch Job templates) are the pods of each Job it owns, as JobSet's replicated Jobs, Job by Job."""
    if resource == JOBS:
        return await _pods_of_job(client, mirror)
    children, _ = await client.list(JOBS, namespace_of(mirror))
    pods: list[Obj] = []
    for child in sorted((j for j in children if _owned_by(j, mirror)), key=name_of):
        pods += await _pods_of_job(client, child)
    return pods


async def _pods_of_job(client: KubeClient, job: Obj) -> list[Obj]:
    selector = f"{jobs.CONTROLLER_UID_LABEL}={uid_of(job)}"
    return _by_index((await client.list(PODS, namespace_of(job), label_selector=selector))[0])


def _by_index(pods: list[Obj]) -> list[Obj]:
    return sorted(pods, key=lambda p: (int(labels_of(p).get(jobs.COMPLETION_INDEX, "0") or 0), name_of(p)))


def _owned_by(obj: Obj, owner: Obj) -> bool:
    return any(as_dict(r).get("uid") == uid_of(owner) for r in as_list(metadata(obj).get("ownerReferences")))


def _sources(pods: list[Obj], options: LogOptions) -> list[LogSource]:
    sources = []
    for pod in pods:
        pod_name = str(metadata(pod)["name"])
        names = [str(as_dict(c).get("name")) for c in as_list(as_dict(pod.get("spec")).get("containers"))]
        if options.container is not None:
            if options.container not in names:
                raise LogsError(
                    f'container "{options.container}" is not in pod {pod_name}; its containers: {", ".join(names)}'
                )
            names = [options.container]
        elif not options.all_containers:
            if len(names) > 1:
                raise LogsError(
                    f"pod {pod_name} has {len(names)} containers ({', '.join(names)}): name one with -c, or "
                    "use --all-containers"
                )
            names = [names[0]] if names else [""]
        for container in names:
            prefix = f"pod/{pod_name}/{container}" if options.all_containers else pod_name
            sources.append(LogSource(pod_name, container or None, prefix))
    return sources
