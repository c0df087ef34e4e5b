"""The dispatcher at scale, deployed as it runs for real: every cluster a ``multiqueue local up`` process of its own,
the manager a ``multiqueue manager`` process, the load from this one.

Two kinds of worker. ``--workers-mode full`` (the default): each worker runs the embedded Job controller and a
kubelet that simulates 0 s pods, so the run measures the whole system, which the workers' work dominates.
``--workers-mode cheap``: each worker is an API server alone (no Job controller, no kubelet) and a status writer
(tests/bench/status_writer.py) finishes each mirror with the one status write a Job controller would make for a
one-pod Job that succeeded at once; what is left is the manager's own cost per Job. The writers run as tasks of the
bench (``--writers bench``, the default: with 1,000 Jobs on 2 workers the bench spent 1.8 CPU seconds in 25 s, its
writers included, so it is not what bounds the run, and one process fewer per worker leaves the cores to the
manager) or one process per worker (``--writers process``: 1.2 CPU seconds in the bench, 1.2 more in the writers).

One run: the raw create rate of the same servers first (Jobs no controller acts on, created as fast as the bench can
send them), then N Jobs submitted to the management cluster, all at once (``--jobs N``) or at a steady rate
(``--rate R --duration S``: R Jobs a second for S seconds), and followed until each is Complete there and its
mirror and finalizer are gone (``mirrorTTLSecondsAfterFinished: 0``, so cleanup falls inside the run and its
requests are counted). Figures: Jobs/s, dispatch/create ratio, dispatch latency (the user's Job created -> its
mirror seen on a worker), status-sync latency (mirror Complete on the worker -> user Job Complete) with its CDF,
Jobs finished per second over time, the manager's CPU seconds and ms per Job, RSS per tracked Job, and the
manager's own requests per Job from its ``rest_client_requests_total`` (by cluster: management, workers; by verb),
Events apart.

``--idle-servers K`` also runs K API servers the manager is not given: with ``--workers 2 --idle-servers 48`` the
machine is as busy as with 50 workers (on 2 cores, 50 servers keep the load average near 10 and make every
process's CPU time dearer), so the pair of runs shows what the workers cost the manager itself.

Run: ``python -m tests.bench.dispatch_scale [--jobs N | --rate R --duration S] [--workers W] [--idle-servers K]
[--workers-mode full|cheap] [--control-plane embedded|upstream]``; the figures go to tests/bench/results.json under
``dispatch_scale/<control plane>/<load>/<W> workers`` (cheap workers: ``dispatch_scale_cheap/...``; with idle
servers, ``<W> workers, <K> idle servers``), the load being ``<N> jobs`` or ``<R> per s for <S> s``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from multiqueue.api import jobs
from multiqueue.api.types import EVENTS, JOBS, NAMESPACES
from multiqueue.kube.client import ClientOptions, KubeClient
from tests.bench.common import RESULTS, percentile, record, summary_ms
from tests.bench.status_writer import StatusWriter

MANAGED_BY = "multiqueue.dev/dispatcher"
FINALIZER = "dispatch.multiqueue.dev/multiqueue"
# The bench's own client must never be what limits the run.
UNLIMITED = ClientOptions(qps=0, burst=1, request_timeout=120.0)
SENDERS = 64  # creates in flight at once
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
REPO = Path(__file__).resolve().parents[2]
# An upstream worker's kube-controller-manager, so that it is not what bounds the run: its defaults (20 requests/s,
# 5 Jobs synced at once) cap a worker at ~6 Jobs/s.
UPSTREAM_WORKER_KCM_ARGUMENTS = ("--kube-api-qps=1000", "--kube-api-burst=1000", "--concurrent-job-syncs=50")


@dataclass(frozen=True)
class Load:
    """How the Jobs arrive: ``jobs`` at once, or ``rate`` a second for ``duration`` seconds."""

    jobs: int
    rate: float | None = None
    duration: float | None = None

    @classmethod
    def steady(cls, rate: float, duration: float) -> Load:
        return cls(max(1, round(rate * duration)), rate, duration)

    @property
    def name(self) -> str:
        if self.rate is None:
            return f"{self.jobs} jobs"
        return f"{self.rate:g} per s for {self.duration:g} s"


def job(name: str, managed_by: str = MANAGED_BY) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": managed_by,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
            },
        },
    }


@dataclass
class Process:
    """A multiqueue command of the run, and the line it printed when it was ready."""

    process: asyncio.subprocess.Process
    ready: str

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_bytes(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        return int(found.group(1)) * 1024 if found else 0


async def start(args: list[str], ready: str, log: Path, within: float, module: str = "multiqueue") -> Process:
    """A multiqueue command (or another module of this repository), once it prints ``ready``; its output is read on
    so a full pipe never blocks it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, *args, stdout=asyncio.subprocess.PIPE, stderr=log.open("ab"), cwd=REPO
    )
    assert process.stdout is not None
    async with asyncio.timeout(within):
        while True:
            line = (await process.stdout.readline()).decode()
            if not line:
                raise RuntimeError(f"multiqueue {' '.join(args)} exited; see {log}")
            if ready in line:
                break
    asyncio.get_running_loop().create_task(process.stdout.read())
    return Process(process, line)


@dataclass
class Run:
    """What the watches saw: when each Job was created, when its mirror appeared, when it finished on the management
    cluster and on its worker, and when it was all gone (finalizer off the user's Job, mirror deleted)."""

    names: set[str]
    created: dict[str, float] = field(default_factory=dict)
    mirror_added: dict[str, float] = field(default_factory=dict)
    user_done: dict[str, float] = field(default_factory=dict)
    mirror_done: dict[str, float] = field(default_factory=dict)
    released: set[str] = field(default_factory=set)
    mirrors_gone: set[str] = field(default_factory=set)
    all_complete: asyncio.Event = field(default_factory=asyncio.Event)
    all_gone: asyncio.Event = field(default_factory=asyncio.Event)

    def check(self) -> None:
        if len(self.user_done) == len(self.names):
            self.all_complete.set()
        if len(self.released) == len(self.mirrors_gone) == len(self.names):
            self.all_gone.set()


async def events(client: KubeClient, version: str) -> AsyncIterator[dict[str, Any]]:
    """The default namespace's Job events from ``version`` on."""
    while True:
        async for event in client.watch(JOBS, "default", resource_version=version, timeout_seconds=300):
            version = event["object"]["metadata"]["resourceVersion"]
            if event["type"] != "BOOKMARK":
                yield event


async def follow_users(client: KubeClient, version: str, run: Run) -> None:
    async for event in events(client, version):
        obj, name = event["object"], event["object"]["metadata"]["name"]
        if name not in run.names:
            continue
        if name not in run.user_done and jobs.is_complete(obj):
            run.user_done[name] = time.perf_counter()
            run.check()
        if name in run.user_done and FINALIZER not in (obj["metadata"].get("finalizers") or []):
            run.released.add(name)
            run.check()


async def follow_mirrors(client: KubeClient, version: str, run: Run) -> None:
    async for event in events(client, version):
        obj, name = event["object"], event["object"]["metadata"]["name"]
        if name not in run.names:
            continue
        if name not in run.mirror_added:
            run.mirror_added[name] = time.perf_counter()
        if name not in run.mirror_done and jobs.is_complete(obj):
            run.mirror_done[name] = time.perf_counter()
        if event["type"] == "DELETED":
            run.mirrors_gone.add(name)
            run.check()


async def create_all(
    client: KubeClient, bodies: list[dict[str, Any]], namespace: str, created: dict[str, float] | None = None
) -> float:
    """Create every body with SENDERS requests in flight; the seconds it took. ``created``: when each answer came."""
    queue = iter(bodies)

    async def sender() -> None:
        for body in queue:
            await client.create(JOBS, body, namespace)
            if created is not None:
                created[body["metadata"]["name"]] = time.perf_counter()

    began = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(SENDERS)))
    return time.perf_counter() - began


async def create_steadily(
    client: KubeClient, bodies: list[dict[str, Any]], namespace: str, rate: float, created: dict[str, float]
) -> None:
    """Create one body every 1/``rate`` seconds on a fixed schedule, however long each create takes."""
    began = time.perf_counter()

    async def one(body: dict[str, Any]) -> None:
        await client.create(JOBS, body, namespace)
        created[body["metadata"]["name"]] = time.perf_counter()

    sending: list[asyncio.Task[None]] = []
    for i, body in enumerate(bodies):
        await asyncio.sleep(max(0.0, began + i / rate - time.perf_counter()))
        sending.append(asyncio.create_task(one(body)))
    await asyncio.gather(*sending)


async def manager_requests(url: str) -> dict[tuple[str, str, str], int]:
    """The manager's rest_client_requests_total: (code, host, method) -> count."""
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        text = await response.text()
    found: dict[tuple[str, str, str], int] = {}
    for line in text.splitlines():
        if line.startswith("rest_client_requests_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            found[(labels["code"], labels["host"], labels["method"])] = int(float(line.rsplit(" ", 1)[1]))
    return found


async def served(client: KubeClient) -> dict[str, int]:
    """A cluster's apiserver_request_total by "verb resource[/subresource]", every client's requests together."""
    text = await client.get_raw("/metrics")
    found: dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            what = f"{labels['verb']} {labels['resource']}" + (
                f"/{labels['subresource']}" if labels.get("subresource") else ""
            )
            found[what] = found.get(what, 0) + int(float(line.rsplit(" ", 1)[1]))
    return found


async def settled(url: str, within: float) -> tuple[dict[tuple[str, str, str], int], bool]:
    """The manager's request counts once they stop moving (the watch that saw the last write can be ahead of the
    manager counting the answer to it, and its Events are written after the Jobs are done), and whether they did
    within ``within`` seconds: if not, the last counts."""
    last = await manager_requests(url)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        now = await manager_requests(url)
        if now == last:
            return now, True
        last = now
    return last, False


def server_of(kubeconfig: Path) -> str:
    config = yaml.safe_load(kubeconfig.read_text())
    return str(config["clusters"][0]["cluster"]["server"]).split("://", 1)[-1].rstrip("/")


async def connect(kubeconfig: Path, context: str) -> KubeClient:
    return await KubeClient.connect(kubeconfig, context, context, UNLIMITED)


async def events_posted(client: KubeClient) -> int:
    found, _ = await client.list(EVENTS, "default", field_selector="reportingComponent=multiqueue-dispatcher")
    return len(found)


def per_second(stamps: list[float], start: float) -> list[int]:
    """How many of ``stamps`` fall in each second from ``start``."""
    if not stamps:
        return []
    counts = [0] * (int(max(stamps) - start) + 1)
    for stamp in stamps:
        counts[int(stamp - start)] += 1
    return counts


async def profile(
    processes: dict[str, Process], folder: Path, raw: bool = False
) -> list[asyncio.subprocess.Process]:
    """py-spy recording each process: a flame graph per process (``raw``: collapsed stacks, one per line, to read
    as text), written when the recorder is stopped with SIGINT. Only samples that hold the GIL count: on a shared
    machine a process waiting in a system call, or for a core, would otherwise look busy there."""
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    recorders = []
    for name, started in processes.items():
        pid = str(started.process.pid)
        command = ["py-spy", "record", "--pid", pid, "--rate", "200", "--nonblocking", "--gil"]
        output = (
            ["--format", "raw", "--output", str(folder / f"{name}.txt")]
            if raw
            else ["--output", str(folder / f"{name}.svg")]
        )
        recorders.append(
            await asyncio.create_subprocess_exec(*command, *output, stdout=asyncio.subprocess.DEVNULL)
        )
    return recorders


def cluster_of(name: str, workers_mode: str, capacity_pods: int) -> dict[str, Any]:
    """A ``local up`` cluster: the management cluster runs no pods; a full worker simulates 0 s pods; a cheap one
    is an API server alone."""
    if name == "management":
        return {"name": name, "kubelet": "none", "capacityPods": capacity_pods}
    if workers_mode == "cheap":
        return {"name": name, "kubelet": "none", "controllers": []}
    return {"name": name, "kubelet": "simulate", "capacityPods": capacity_pods}


def per_verb(
    sent: dict[tuple[str, str, str], int], management_host: str, posted: int, jobs_total: int
) -> Any:
    """The manager's requests per Job, by cluster then verb; the management cluster's Events (POSTs) apart."""
    counts: dict[str, dict[str, int]] = {"management": {}, "workers": {}}
    for (_, host, method), n in sent.items():
        where = counts["management" if host == management_host else "workers"]
        where[method] = where.get(method, 0) + n
    if posted:
        counts["management"]["POST"] = counts["management"].get("POST", 0) - posted
    return {
        where: {verb: round(n / jobs_total, 2) for verb, n in sorted(verbs.items()) if n > 0}
        for where, verbs in counts.items()
    }


async def main(
    load: Load,
    workers: int,
    control_plane: str,
    flames: Path | None = None,
    raw: bool = False,
    results: Path = RESULTS,
    workers_mode: str = "full",
    writers: str = "bench",
    idle_servers: int = 0,
) -> None:
    jobs_total = load.jobs
    base = Path(tempfile.mkdtemp(prefix="mq-bench-scale-"))
    names = [f"worker-{i}" for i in range(1, workers + 1)]
    # Servers the manager is not given: a run with few workers on a machine as busy as a run with many.
    idle = [f"idle-{i}" for i in range(1, idle_servers + 1)]
    within = 300.0 if control_plane == "upstream" else 60.0
    cheap = workers_mode == "cheap"
    processes: dict[str, Process] = {}
    clients: dict[str, KubeClient] = {}
    tasks: list[asyncio.Task[None]] = []
    writing: list[StatusWriter] = []
    try:
        for name in ["management", *names, *idle]:
            cluster = cluster_of(name, "cheap" if name in idle else workers_mode, max(110, 2 * jobs_total))
            if control_plane == "upstream" and name != "management":
                cluster["extraArgs"] = {"kube-controller-manager": list(UPSTREAM_WORKER_KCM_ARGUMENTS)}
            local = base / f"{name}.yaml"
            local.write_text(yaml.safe_dump({"clusters": [cluster], "controlPlane": control_plane}))
            processes[name] = await start(
                ["local", "up", "--config", str(local), "--state-dir", str(base / name)],
                "local clusters are up",
                base / f"{name}.log",
                within,
            )
        kubeconfigs = {n: base / n / "kubeconfig" for n in ["management", *names]}
        manager_config = {
            "management": {"kubeconfig": str(kubeconfigs["management"]), "context": "management"},
            "workers": [{"name": w, "kubeconfig": str(kubeconfigs[w]), "context": w} for w in names],
            "workerSecrets": {"enabled": False},
            "metricsAddress": "127.0.0.1:0",
            "mirrorTTLSecondsAfterFinished": 0,
        }
        (base / "manager.yaml").write_text(yaml.safe_dump(manager_config))
        processes["manager"] = manager = await start(
            ["manager", "--config", str(base / "manager.yaml")], "dispatching", base / "manager.log", within
        )
        metrics_url = manager.ready.strip().rsplit(" ", 1)[-1]
        for name, path in kubeconfigs.items():
            clients[name] = await connect(path, name)
        if cheap and writers == "process":
            for w in names:
                processes[f"{w}-writer"] = await start(
                    ["--kubeconfig", str(kubeconfigs[w]), "--context", w],
                    "writing statuses",
                    base / f"{w}-writer.log",
                    within,
                    module="tests.bench.status_writer",
                )
        elif cheap:
            for w in names:
                writer, ready = StatusWriter(clients[w], "multiqueue"), asyncio.Event()
                writing.append(writer)
                tasks.append(asyncio.create_task(writer.run(ready)))
                await ready.wait()

        # The raw create rate of the same kind of server: Jobs no controller acts on, in a namespace of their own
        # on a worker (whose Jobs the manager does not cache unless they are its mirrors).
        raw_jobs = min(jobs_total, 2000)
        await clients[names[0]].create(NAMESPACES, {"metadata": {"name": "raw"}})
        raw_cpu_before = processes[names[0]].cpu_seconds()
        raw_seconds = await create_all(
            clients[names[0]], [job(f"raw-{i}", "example.com/nobody") for i in range(raw_jobs)], "raw"
        )

        raw_server_cpu = processes[names[0]].cpu_seconds() - raw_cpu_before
        run = Run({f"bench-{i}" for i in range(jobs_total)})
        # Each watch starts from a list made before the first create, so it misses nothing.
        versions = {n: (await clients[n].list(JOBS, "default"))[1] for n in ["management", *names]}
        tasks.append(asyncio.create_task(follow_users(clients["management"], versions["management"], run)))
        tasks += [asyncio.create_task(follow_mirrors(clients[w], versions[w], run)) for w in names]
        requests_before = await manager_requests(metrics_url)
        cpu_before, rss_before = manager.cpu_seconds(), manager.rss_bytes()
        bench_cpu_before = time.process_time()
        cpu_of_clusters = {n: p.cpu_seconds() for n, p in processes.items()}
        served_before = {n: await served(clients[n]) for n in ["management", names[0]]}
        recorders = await profile(processes, flames, raw) if flames is not None else []
        started = time.perf_counter()
        bodies = [job(f"bench-{i}") for i in range(jobs_total)]
        if load.rate is None:
            await create_all(clients["management"], bodies, "default", run.created)
        else:
            await create_steadily(clients["management"], bodies, "default", load.rate, run.created)
        async with asyncio.timeout(max(900.0, jobs_total / 5)):
            await run.all_complete.wait()
            elapsed = time.perf_counter() - started
            rss_tracking = manager.rss_bytes()
            await run.all_gone.wait()
        bench_cpu = time.process_time() - bench_cpu_before
        # Events queued in a burst are written one at a time after the Jobs are done; their CPU is the Jobs'.
        requests_after, requests_settled = await settled(metrics_url, max(30.0, jobs_total / 25))
        cpu = manager.cpu_seconds() - cpu_before
        cpu_of_clusters = {n: round(p.cpu_seconds() - cpu_of_clusters[n], 2) for n, p in processes.items()}
        for recorder in recorders:
            recorder.send_signal(signal.SIGINT)
            await recorder.wait()
        posted = await events_posted(clients["management"])
        served_after = {n: await served(clients[n]) for n in served_before}
    finally:
        for task in tasks:
            task.cancel()
        for writer in writing:
            for pending in list(writer.pending):
                pending.cancel()
        for client in clients.values():
            await client.close()
        for process in processes.values():
            with contextlib.suppress(ProcessLookupError):
                process.process.send_signal(signal.SIGTERM)
        for process in processes.values():
            await process.process.wait()

    management_host = server_of(kubeconfigs["management"])
    sent = {k: requests_after.get(k, 0) - requests_before.get(k, 0) for k in requests_after}
    on_management = sum(n for (_, host, _), n in sent.items() if host == management_host)
    on_workers = sum(n for (_, host, _), n in sent.items() if host != management_host)
    by_method: dict[str, int] = {}
    for (code, host, method), n in sent.items():
        where = "management" if host == management_host else "workers"
        by_method[f"{where} {method} {code}"] = by_method.get(f"{where} {method} {code}", 0) + n
    delays = [run.user_done[n] - run.mirror_done[n] for n in run.user_done if n in run.mirror_done]
    dispatch_delays = [run.mirror_added[n] - run.created[n] for n in run.mirror_added if n in run.created]
    # Every client's requests as the server counts them: per Job on the management cluster, per mirror on a
    # worker (the mirrors it was given).
    counted = {
        n: {w: c - served_before[n].get(w, 0) for w, c in served_after[n].items()} for n in served_after
    }
    served_per_job = {
        n: {
            what: round(count / (jobs_total if n == "management" else max(1, counts.get("POST jobs", 0))), 2)
            for what, count in sorted(counts.items())
            if count > 0
        }
        for n, counts in counted.items()
    }
    # Writes every server takes for one Job: the management cluster's, and one worker's for each of its mirrors.
    writes_per_job = sum(
        n for counts in served_per_job.values() for what, n in counts.items() if what.split()[0] in WRITES
    )
    dispatch_rate = jobs_total / elapsed
    create_rate = raw_jobs / raw_seconds
    # Cheap runs under a name of their own: the charts of docs/performance.md show the full runs.
    prefix = "dispatch_scale_cheap" if cheap else "dispatch_scale"
    figures: dict[str, Any] = {
        "control_plane": control_plane,
        "workers_mode": workers_mode,
        "jobs": jobs_total,
        "workers": workers,
        "raw_creates_per_s": round(create_rate, 1),
        "jobs_per_s": round(dispatch_rate, 1),
        "dispatch_to_create_ratio": round(dispatch_rate / create_rate, 3),
        "seconds_to_all_complete": round(elapsed, 2),
        "dispatch_latency": summary_ms(dispatch_delays),
        "status_sync_latency": summary_ms(delays),
        "status_sync_cdf_ms": {q: round(percentile(delays, q) * 1000, 1) for q in range(0, 101, 5)},
        "completed_per_second": per_second(list(run.user_done.values()), started),
        "manager_cpu_seconds": round(cpu, 2),
        "manager_cpu_ms_per_job": round(cpu / jobs_total * 1000, 2),
        "cpu_seconds_by_process": cpu_of_clusters,
        "bench_cpu_seconds": round(bench_cpu, 2),
        "manager_rss_mb_tracking": round(rss_tracking / 2**20, 1),
        "manager_rss_kb_per_job": round((rss_tracking - rss_before) / 1024 / jobs_total, 2),
        "manager_requests_per_job": round((on_management + on_workers - posted) / jobs_total, 2),
        "manager_requests_per_job_management": round((on_management - posted) / jobs_total, 2),
        "manager_requests_per_job_workers": round(on_workers / jobs_total, 2),
        "manager_requests_per_job_by_verb": per_verb(sent, management_host, posted, jobs_total),
        "manager_events_per_job": round(posted / jobs_total, 2),
        "manager_requests_settled": requests_settled,
        "manager_requests_by_method": dict(sorted(by_method.items())),
        "served_per_job": served_per_job,
        # What bounds the dispatch rate on a machine whose cores every process shares: CPU per Job, all
        # processes together, against what one write costs the server (a raw create, measured above).
        "cpu_ms_per_job_all_processes": round(sum(cpu_of_clusters.values()) / jobs_total * 1000, 2),
        "raw_create_server_cpu_ms": round(raw_server_cpu / raw_jobs * 1000, 3),
        "writes_per_job_all_servers": round(writes_per_job, 2),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "note": "each cluster a local up process, the manager a process of its own; manager requests counted "
        "client-side from its rest_client_requests_total, Events (POSTs of the dispatcher's Events) apart; manager "
        "CPU from the first create until its request counts stop moving (its Events written)",
    }
    if load.rate is not None:
        figures |= {"rate_per_s": load.rate, "duration_s": load.duration}
    if idle:
        figures["idle_servers"] = len(idle)
    if control_plane == "upstream":
        figures["worker_kube_controller_manager"] = list(UPSTREAM_WORKER_KCM_ARGUMENTS)
    if cheap:
        figures["status_writers"] = writers
        figures["note"] += (
            "; cheap workers: API servers with no Job controller and no kubelet, each mirror finished by one "
            "status write (tests/bench/status_writer.py)"
        )
    beside = f", {len(idle)} idle servers" if idle else ""
    record(f"{prefix}/{control_plane}/{load.name}/{workers} workers{beside}", figures, results)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.dispatch_scale")
    parser.add_argument("--jobs", type=int, default=1000, help="a burst: this many Jobs at once")
    parser.add_argument("--rate", type=float, help="a steady load instead: this many Jobs a second ...")
    parser.add_argument("--duration", type=float, help="... for this many seconds")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--control-plane", choices=("embedded", "upstream"), default="embedded")
    parser.add_argument(
        "--workers-mode",
        choices=("full", "cheap"),
        default="full",
        help="full: Job controller and simulated pods on every worker; cheap: an API server and a status writer",
    )
    parser.add_argument(
        "--writers",
        choices=("bench", "process"),
        default="bench",
        help="with --workers-mode cheap: the status writers as tasks of the bench, or a process per worker",
    )
    parser.add_argument(
        "--idle-servers",
        type=int,
        default=0,
        help="also run this many API servers the manager is not given, so that a run with few workers loads the "
        "machine as one with many does",
    )
    parser.add_argument(
        "--flames", type=Path, help="write a py-spy flame graph of each process to this folder"
    )
    parser.add_argument("--raw", action="store_true", help="with --flames: collapsed stacks as text, not SVG")
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help="the results file (default: %(default)s)"
    )
    options = parser.parse_args()
    if options.workers_mode == "cheap" and options.control_plane == "upstream":
        # An upstream cluster runs kube-controller-manager, whose Job controller would run the mirrors too.
        parser.error(
            "--workers-mode cheap takes embedded workers: an upstream one runs its own Job controller"
        )
    if (options.rate is None) != (options.duration is None):
        parser.error("--rate and --duration go together")
    if options.rate is not None and (options.rate <= 0 or options.duration <= 0):
        parser.error("--rate and --duration must be positive")
    return options


if __name__ == "__main__":
    options = arguments()
    shape = Load(options.jobs) if options.rate is None else Load.steady(options.rate, options.duration)
    asyncio.run(
        main(
            shape,
            options.workers,
            options.control_plane,
            options.flames,
            options.raw,
            options.results,
            options.workers_mode,
            options.writers,
            options.idle_servers,
        )
    )
