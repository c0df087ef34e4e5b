"""What ``multiqueue status`` and ``multiqueue explain`` read from the clusters of a manager config (and how
``multiqueue logs`` finds a Job's worker: multiqueue/dispatch/joblogs.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from multiqueue.api import jobs
from multiqueue.api.meta import (
    as_dict,
    as_list,
    key_of,
    labels_of,
    metadata,
    namespace_of,
    parse_time,
    uid_of,
)
from multiqueue.api.types import EVENTS, JOBS, SECRETS, Obj, Resource
from multiqueue.dispatch.adapters import ADAPTERS, adapters_of
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.capacity import Ledger, held_on
from multiqueue.dispatch.config import ClusterRef, ManagerConfig
from multiqueue.dispatch.dispatcher import COMPONENT as DISPATCHER_COMPONENT
from multiqueue.dispatch.explain import Explanation
from multiqueue.dispatch.explain import explain as explain_job
from multiqueue.dispatch.generic import GenericJob
from multiqueue.dispatch.mirror import CLUSTER_LABEL, ORIGIN_LABEL, Identity
from multiqueue.dispatch.nodecapacity import NodeCapacity
from multiqueue.dispatch.readmodel import WorkerState, worker_state
from multiqueue.dispatch.split import parts_of
from multiqueue.dispatch.workers import CONNECTED, WorkerSettings, health_reason, read_node_capacity
from multiqueue.dispatch.workersecrets import WorkerSecretError, settings_of, worker_from_secret
from multiqueue.kube.client import KubeClient
from multiqueue.kube.config import KubeconfigError, load_credentials
from multiqueue.kube.errors import Gone, KubeError, NotFound
from multiqueue.loop.tasks import cancel_and_wait


@dataclasses.dataclass
class WorkerRow:
    name: str
    active: str  # "True" or the reason it is not
    running: int
    labels: dict[str, str]
    # Of each configured limit, what the Jobs placed there use: "jobs" -> (used, limit), resource -> (used, quota).
    capacity: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    missing_kinds: list[str] = dataclasses.field(default_factory=list)  # kinds it takes none of: no CRD there


@dataclasses.dataclass
class JobRow:
    kind: str
    key: str
    worker: str  # where it was placed ("worker-1[0-19],worker-2[20-39]" as parts); "-" until then
    state: str
    completions: str
    age_seconds: float
    reason: str = "-"  # how it ended, or the manager's latest Event about it (why it waits, a conflict)
    message: str = ""
    # A waiting Job's line accounting for every worker ("0/2 workers can take this Job: ..."), as placement sees
    # the workers now; empty for the others.
    placement: str = ""


@dataclasses.dataclass
class KnownWorker:
    """A worker as the manager would know it: from the config file, or from a Secret (maybe refused)."""

    name: str
    settings: WorkerSettings
    ref: ClusterRef | None = None
    kubeconfig: dict[str, Any] | None = None
    refused: str = ""  # the reason a Secret makes no worker


@asynccontextmanager
async def connect(ref: ClusterRef, name: str) -> AsyncIterator[KubeClient]:
    client = await KubeClient.connect(ref.kubeconfig, ref.context, name, allow_insecure=ref.allow_insecure)
    try:
        yield client
    finally:
        await client.close()


@asynccontextmanager
async def connect_worker(worker: KnownWorker, allow_exec: bool) -> AsyncIterator[KubeClient]:
    if worker.ref is not None:
        async with connect(worker.ref, worker.name) as client:
            yield client
        return
    if worker.kubeconfig is None:
        raise KubeconfigError(worker.refused)
    client = KubeClient(
        await load_credentials(config_dict=worker.kubeconfig, allow_exec=allow_exec), worker.name
    )
    try:
        yield client
    finally:
        await client.close()


async def known_workers(
    config: ManagerConfig, management: KubeClient, contexts: Path | None = None
) -> list[KnownWorker]:
    """The config's workers, then those of Secrets (unless the Secrets cannot be read). ``contexts``: the user's
    kubeconfig, whose context of a Secret's worker's name is used in place of the Secret's kubeconfig: the user's
    own credentials, at an address this machine reaches (a Secret gives the manager's, which may be in-cluster)."""
    found = [KnownWorker(w.name, settings_of(w.labels, w.capacity), ref=w) for w in config.workers]
    if not config.worker_secrets.enabled:
        return found
    own = await asyncio.to_thread(context_names, contexts) if contexts is not None else set()
    try:
        secrets, _ = await management.list(SECRETS, config.namespace, label_selector=CLUSTER_LABEL)
    except (KubeError, OSError):
        return found
    allow = config.worker_secrets.allow_insecure_kubeconfigs
    for secret in sorted(secrets, key=lambda s: str(metadata(s).get("name"))):
        try:
            worker = worker_from_secret(secret, allow_unsafe=allow)
        except WorkerSecretError as refusal:
            name = labels_of(secret).get(CLUSTER_LABEL) or str(metadata(secret).get("name"))
            found.append(KnownWorker(name, WorkerSettings(), refused=refusal.reason))
            continue
        if worker.name in own:
            ref = ClusterRef.model_validate({"kubeconfig": contexts, "context": worker.name})
            found.append(KnownWorker(worker.name, worker.settings, ref=ref))
            continue
        found.append(KnownWorker(worker.name, worker.settings, kubeconfig=worker.kubeconfig))
    return found


def _state(adapter: GenericJob, job: Obj, placed: bool) -> str:
    finish = adapter.finish(job)
    if finish is not None:
        return "Complete" if finish.succeeded else "Failed"
    if adapter.is_suspended(job):
        return "Suspended"
    return "Running" if placed else "Waiting"


def _why(adapter: GenericJob, job: Obj, latest: dict[str, Obj]) -> tuple[str, str]:
    """(reason, message): how a finished Job ended, else the manager's latest Event about it."""
    finish = adapter.finish(job)
    if finish is not None:
        return finish.reason, finish.message
    event = latest.get(uid_of(job))
    if event is None:
        return "-", ""
    return str(event.get("reason") or "-"), str(event.get("message") or "")


def event_time(event: Obj) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or "")


async def _latest_events(client: KubeClient) -> dict[str, Obj]:
    """The dispatcher's latest Event about each object (by UID); none when Events cannot be read."""
    try:
        events, _ = await client.list(EVENTS, field_selector=f"reportingComponent={DISPATCHER_COMPONENT}")
    except (KubeError, OSError):
        return {}
    latest: dict[str, Obj] = {}
    for event in sorted(events, key=event_time):
        uid = str(as_dict(event.get("involvedObject")).get("uid") or "")
        if uid:
            latest[uid] = event
    return latest


def _completions(adapter: GenericJob, job: Obj) -> str:
    if adapter.resource != JOBS:
        return "-"
    done = int(jobs.status_of(job).get("succeeded") or 0)
    return f"{done}/{jobs.completions(job) or 1}"


async def _reason(
    config: ManagerConfig, worker: KnownWorker, kinds: list[GenericJob]
) -> tuple[str, list[str]]:
    """Connected, or why not, as the manager names it, and the kinds the worker does not serve: the worker is
    asked for this manager's mirrors of each kind (the permission the manager needs most); a 404 means that kind's
    CRD is not there, any other failure is named by the manager's own health rule."""
    if worker.refused:
        return worker.refused, []
    missing = []
    try:
        async with connect_worker(worker, config.worker_secrets.allow_insecure_kubeconfigs) as client:
            for adapter in kinds:
                try:
                    await client.list_page(
                        adapter.resource, label_selector=f"{ORIGIN_LABEL}={config.name}", limit=1
                    )
                except NotFound:
                    missing.append(adapter.resource.kind)
    except (KubeError, KubeconfigError, OSError) as exc:
        return health_reason(exc, True), []
    return CONNECTED, missing


async def _nodes(config: ManagerConfig, worker: KnownWorker, kinds: list[GenericJob]) -> NodeCapacity | None:
    """What a worker whose capacity comes from its Nodes has left, read as the manager reads it; None for the
    others, or when its Nodes cannot be read."""
    if not worker.settings.from_nodes or worker.refused:
        return None
    try:
        async with connect_worker(worker, config.worker_secrets.allow_insecure_kubeconfigs) as client:
            return await read_node_capacity(client, [k.resource for k in kinds], config.name)
    except (KubeError, KubeconfigError, OSError):
        return None


def worker_row(state: WorkerState) -> WorkerRow:
    """How ``multiqueue status`` prints a worker of the read model."""
    active = "True" if state.active else f"False ({state.reason})"
    if state.active and state.missing_kinds:
        active = f"True (does not serve {', '.join(state.missing_kinds)})"
    return WorkerRow(
        state.name, active, state.running, dict(state.labels), dict(state.capacity), list(state.missing_kinds)
    )


async def status(config: ManagerConfig, contexts: Path | None = None) -> tuple[list[WorkerRow], list[JobRow]]:
    """Workers with their health and load, and every Job (of every configured kind) this manager handles.
    ``contexts``: the user's kubeconfig, whose contexts of workers' names reach those workers."""
    identity = identity_of(config)
    async with connect(config.management, "management") as client:
        states, listed = await _worker_states(config, client, contexts)
        latest = await _latest_events(client)
    workers = [worker_row(state) for state in states]
    now = datetime.now(UTC)
    rows = []
    for adapter, items in listed:
        for job in items:
            if adapter.managed_by(job) != config.managed_by:
                continue
            row = job_row(adapter, job, identity, latest, now)
            if row.state == "Waiting":
                row.placement = explain_job(adapter, job, identity, config.placement, states).summary
            rows.append(row)
    return workers, sorted(rows, key=lambda r: (r.kind, r.key))


async def _worker_states(
    config: ManagerConfig, client: KubeClient, contexts: Path | None, placed_only: bool = False
) -> tuple[list[WorkerState], list[tuple[GenericJob, list[Obj]]]]:
    """Each worker as the manager would see it (health, kinds served, what its Jobs use), and the Jobs of each
    kind the management cluster serves. ``placed_only``: only the Jobs that carry a worker's label are listed,
    enough for what the workers' Jobs use (the ledger counts no other) and far less to read when most wait."""
    identity = identity_of(config)
    known = await known_workers(config, client, contexts)
    selector = CLUSTER_LABEL if placed_only else None
    listed = [
        (a, items) for a in _adapters(config) if (items := await _listed(client, a, selector)) is not None
    ]
    served = [adapter for adapter, _ in listed]
    reasons = await asyncio.gather(*(_reason(config, w, served) for w in known))
    # What each worker's Jobs use, counted as the running manager's ledger counts it.
    ledger = Ledger()
    for adapter, items in listed:
        for job in items:
            holdings = held_on(adapter, identity, job)
            if holdings:
                ledger.hold((adapter.resource.kind, key_of(job)), holdings)
    nodes = await asyncio.gather(*(_nodes(config, w, served) for w in known))
    states = [
        worker_state(w.name, w.settings, reason, ledger.usage(w.name), missing_kinds=missing, nodes=left)
        for w, (reason, missing), left in zip(known, reasons, nodes, strict=True)
    ]
    return states, listed


# Jobs read in one request when status or explain lists them: with thousands of Jobs, pages of 500 cost more in
# round trips than serving and decoding the Jobs themselves.
LIST_PAGE = 5000


class ExplainError(Exception):
    """Why a Job cannot be explained (one line for the person who asked)."""


async def explain(
    config: ManagerConfig,
    name: str,
    namespace: str,
    contexts: Path | None = None,
    kind: GenericJob | None = None,
) -> Explanation:
    """The Job ``namespace/name`` (of ``kind``, batch/v1 Job by default) explained against the workers as the
    manager would see them, read from the clusters as ``status`` reads them."""
    adapter = kind or BatchJobAdapter()
    where = f'{adapter.resource.kind.lower()} "{namespace}/{name}"'
    async with connect(config.management, "management") as client:
        try:
            job = await client.get(adapter.resource, name, namespace)
        except NotFound as exc:
            raise ExplainError(f"{where} not found on the management cluster") from exc
        if adapter.managed_by(job) != config.managed_by:
            raise ExplainError(
                f"{where} is not dispatched by multiqueue: its spec.managedBy is not {config.managed_by}"
            )
        states, _ = await _worker_states(config, client, contexts, placed_only=True)
    return explain_job(adapter, job, identity_of(config), config.placement, states)


async def _listed(
    client: KubeClient, adapter: GenericJob, label_selector: str | None = None
) -> list[Obj] | None:
    """Every object of the adapter's kind on the management cluster (that ``label_selector`` selects); None when
    it does not serve that kind (a manager refuses to start so, but ``status`` without a manager config looks for
    every kind it knows)."""
    try:
        return (await client.list(adapter.resource, label_selector=label_selector, page_size=LIST_PAGE))[0]
    except NotFound:
        return None


def job_row(
    adapter: GenericJob, job: Obj, identity: Identity, latest: dict[str, Obj], now: datetime
) -> JobRow:
    created = parse_time(metadata(job).get("creationTimestamp")) or now
    placed = identity.holds(job) or adapter.is_finished(job)
    reason, message = _why(adapter, job, latest)
    parts = parts_of(job)
    where = parts.short() if parts is not None else labels_of(job).get(CLUSTER_LABEL, "-")
    return JobRow(
        kind=adapter.resource.kind,
        key=f"{namespace_of(job)}/{metadata(job).get('name')}",
        worker=where if placed else "-",
        state=_state(adapter, job, placed),
        completions=_completions(adapter, job),
        age_seconds=(now - created).total_seconds(),
        reason=reason,
        message=message,
    )


async def watch_jobs(config: ManagerConfig) -> AsyncIterator[JobRow]:
    """A Job's row each time it changes (its object, or the manager's latest Event about it), as ``kubectl get
    -w`` prints them; rows that read as before are not repeated. Runs until cancelled."""
    identity = identity_of(config)
    changes: asyncio.Queue[Change] = asyncio.Queue()
    async with connect(config.management, "management") as client:
        watchers = [
            asyncio.create_task(follow_objects(client, a.resource, changes, a)) for a in _adapters(config)
        ]
        events = f"reportingComponent={DISPATCHER_COMPONENT}"
        watchers.append(asyncio.create_task(follow_objects(client, EVENTS, changes, None, events)))
        try:
            latest: dict[str, Obj] = {}
            jobs_by_uid: dict[str, tuple[GenericJob, Obj]] = {}
            shown: dict[str, JobRow] = {}
            while True:
                change = await changes.get()
                if isinstance(change, BaseException):
                    raise change  # a watch that failed ends this one, saying why
                adapter, obj = change
                if adapter is None:  # an Event: the Job it is about shows its reason
                    uid = str(as_dict(obj.get("involvedObject")).get("uid") or "")
                    if event_time(obj) >= event_time(latest.get(uid, {})):
                        latest[uid] = obj
                    if uid not in jobs_by_uid:
                        continue
                    adapter, obj = jobs_by_uid[uid]
                elif adapter.managed_by(obj) != config.managed_by:
                    continue
                jobs_by_uid[uid_of(obj)] = (adapter, obj)
                row = job_row(adapter, obj, identity, latest, datetime.now(UTC))
                before = shown.get(uid_of(obj))
                shown[uid_of(obj)] = row
                if before is None or dataclasses.replace(before, age_seconds=row.age_seconds) != row:
                    yield row
        finally:
            await cancel_and_wait(watchers)


# What a watch of ``watch_jobs`` hands on: (the adapter, or None for an Event; the object), or why it stopped.
Change = tuple[GenericJob | None, Obj] | BaseException


async def follow_objects(
    client: KubeClient,
    resource: Resource,
    changes: asyncio.Queue[Change],
    adapter: GenericJob | None,
    field_selector: str | None = None,
) -> None:
    """List, then watch ``resource`` from there until cancelled, putting each object seen (not deletions) on
    ``changes``; an expired watch lists again, and a failure is put there too. A kind the cluster does not serve
    has nothing to follow."""
    try:
        while True:
            items, version = await client.list(resource, field_selector=field_selector)
            for item in items:
                await changes.put((adapter, item))
            with contextlib.suppress(Gone):
                while True:
                    async for event in client.watch(
                        resource, resource_version=version, field_selector=field_selector
                    ):
                        obj = as_dict(event.get("object"))
                        version = str(metadata(obj).get("resourceVersion") or version)
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            await changes.put((adapter, obj))
    except (KubeError, OSError) as exc:
        if not (isinstance(exc, NotFound) and adapter is not None):
            await changes.put(exc)


def reader_of(kubeconfig: Path, context: str | None) -> ManagerConfig:
    """What ``status`` and ``logs`` read without a manager config: the management cluster of a kubeconfig
    context, a manager of the default name, and every kind multiqueue knows (those the cluster serves count)."""
    return ManagerConfig.model_validate(
        {"management": {"kubeconfig": kubeconfig, "context": context}, "kinds": list(ADAPTERS)}
    )


def identity_of(config: ManagerConfig) -> Identity:
    return Identity(config.name, config.managed_by)


def _adapters(config: ManagerConfig) -> list[GenericJob]:
    """One adapter for each kind the manager dispatches."""
    return adapters_of(config.kinds)


class UnknownKind(Exception):
    """The kind asked for is none the manager dispatches (a usage error)."""


def kind_named(config: ManagerConfig, type_name: str) -> GenericJob:
    """The adapter of the kind ``type_name`` names as kubectl takes a TYPE (``job``, ``jobsets``,
    ``jobset.jobset.x-k8s.io``): among the manager's kinds, then the kinds multiqueue knows without a declaration."""
    wanted = type_name.lower()
    for adapter in [*_adapters(config), *(make() for make in ADAPTERS.values())]:
        resource = adapter.resource
        names = {resource.kind.lower(), resource.plural}
        if wanted in names or any(wanted == f"{n}.{resource.group}" for n in names):
            return adapter
    known = sorted({a.resource.kind for a in _adapters(config)} | set(ADAPTERS))
    raise UnknownKind(f'no kind named "{type_name}": use one of {", ".join(known)}')


def context_names(kubeconfig: Path) -> set[str]:
    try:
        loaded = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return set()
    return {str(as_dict(c).get("name")) for c in as_list(as_dict(loaded).get("contexts"))}
