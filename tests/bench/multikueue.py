"""multiqueue and Kueue's MultiKueue side by side: the same one-pod Jobs on the same three upstream clusters
(``multiqueue local up --control-plane upstream`` each: management, worker-1, worker-2), first through MultiKueue,
then through a ``multiqueue manager``.

Kueue (hack/build-kueue.sh builds it) runs as a manager process per cluster, on the host as the release's manager
runs in a pod: its CRDs, its webhooks called on loopback with a certificate made here, no leader election, no
internal certificate management, the batch/job integration only, client QPS and burst 1000. Each worker has a
ResourceFlavor, a ClusterQueue with room for every Job at once and a LocalQueue; the management cluster the same
behind a MultiKueue AdmissionCheck whose MultiKueueConfig names a MultiKueueCluster per worker (its kubeconfig in a
Secret), dispatching to every worker at once (AllAtOnce). Kueue keeps running in the multiqueue run: it leaves Jobs
that name no queue alone (``manageJobsWithoutQueueName: false``), though its webhooks still see every Job.

The workers' kube-controller-manager gets ``--kube-api-qps=1000 --kube-api-burst=1000 --concurrent-job-syncs=50``
(its defaults cap a worker at ~6 Jobs/s) and every kube-apiserver an audit log (Metadata level), which is how
requests are counted: where they are served, by the User-Agent of whoever sent them
(tests/bench/multikueue_audit.py). The management cluster's Kueue runs as ``multikueue-manager`` (its argv[0]), so
its calls to a worker (client-go's default User-Agent starts with the program's name) are told from the worker's
own Kueue's (``kueue/<version>``).

Figures for each dispatcher: the management-side process's CPU per Job (Kueue's manager on the management cluster;
the multiqueue manager) and the workers' Kueue apart, its requests per Job by cluster and verb, dispatch latency
(the user's Job created -> its copy created on a worker), status-sync latency (the copy Complete -> the user's Job
Complete), and the Jobs that reach no final status before the run stops waiting (``--timeout``, or nothing moved
for ``--stall`` seconds), with the state each is stuck in.

Run: ``python3 -m tests.bench.multikueue [--jobs N] [--keep]``; the figures go to tests/bench/results.json under
``multikueue/<N> jobs/2 workers``; the clusters' files and logs are removed after the run unless ``--keep``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from multiqueue.api import jobs as job_status
from multiqueue.api.types import JOBS
from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.local.certs import serving_cert
from tests.bench import multikueue_audit as audit
from tests.bench import multikueue_kueue as kueue
from tests.bench.common import RESULTS, record, summary_ms
from tests.bench.dispatch_scale import (
    UPSTREAM_WORKER_KCM_ARGUMENTS,
    Process,
    cluster_of,
    create_all,
    events,
    start,
)
from tests.bench.dispatch_scale import job as multiqueue_job

# The bench's own client: never what limits the run, and told apart from the multiqueue manager in the audit log.
BENCH = ClientOptions(qps=0, burst=1, request_timeout=120.0, user_agent="multiqueue-bench/1")
QPS = 1000
MANAGEMENT_KUEUE = "multikueue-manager"  # argv[0] of the management cluster's Kueue
MULTIQUEUE_MANAGER = "multiqueue-manager"  # the manager's User-Agent program
WITHIN = 300.0  # for a process to be ready


def free_port() -> int:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return int(listener.getsockname()[1])


async def run_command(*argv: str, stdin: str | None = None, within: float = 300.0) -> str:
    """A command that must exit 0; its output."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else None,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(within):
        out, _ = await process.communicate(stdin.encode() if stdin is not None else None)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:6])} ... exited {process.returncode}: {out.decode()[-2000:]}")
    return out.decode()


@dataclass
class Cluster:
    name: str
    kubeconfig: Path
    audit_log: Path
    process: Process
    client: KubeClient | None = None
    kueue: Process | None = None

    def kubectl(self, *args: str, stdin: str | None = None, within: float = 300.0) -> Any:
        return run_command(
            "kubectl",
            "--kubeconfig",
            str(self.kubeconfig),
            "--context",
            self.name,
            *args,
            stdin=stdin,
            within=within,
        )

    async def apply(self, objects: list[dict[str, Any]]) -> None:
        await self.kubectl(
            "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump_all(objects)
        )

    async def get_json(self, path: str) -> dict[str, Any]:
        assert self.client is not None
        found = await self.client.get_raw(path)
        return found if isinstance(found, dict) else json.loads(found)


@dataclass
class Phase:
    """What the watches saw of one dispatcher's Jobs."""

    names: set[str]
    created: dict[str, float] = field(default_factory=dict)
    copy_added: dict[str, float] = field(default_factory=dict)
    copy_done: dict[str, float] = field(default_factory=dict)
    user_done: dict[str, float] = field(default_factory=dict)
    copies_gone: set[str] = field(default_factory=set)
    moved: float = field(default_factory=time.monotonic)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def progress(self) -> None:
        self.moved = time.monotonic()
        self.changed.set()

    @property
    def complete(self) -> bool:
        return len(self.user_done) == len(self.names)

    @property
    def settled(self) -> bool:
        """Every Job complete and every copy gone from the workers."""
        return self.complete and len(self.copies_gone) == len(self.names)


async def follow_users(client: KubeClient, version: str, phase: Phase) -> None:
    async for event in events(client, version):
        obj, name = event["object"], event["object"]["metadata"]["name"]
        if name in phase.names and name not in phase.user_done and job_status.is_complete(obj):
            phase.user_done[name] = time.perf_counter()
            phase.progress()


async def follow_copies(client: KubeClient, version: str, phase: Phase) -> None:
    async for event in events(client, version):
        obj, name = event["object"], event["object"]["metadata"]["name"]
        if name not in phase.names:
            continue
        if name not in phase.copy_added:
            phase.copy_added[name] = time.perf_counter()
            phase.progress()
        if name not in phase.copy_done and job_status.is_complete(obj):
            phase.copy_done[name] = time.perf_counter()
            phase.progress()
        if event["type"] == "DELETED":
            phase.copies_gone.add(name)
            phase.progress()


async def wait(phase: Phase, until: str, limit: float, stall: float) -> bool:
    """Until the phase is ``complete`` or ``settled``; False once ``limit`` seconds pass or nothing moved for
    ``stall`` seconds."""
    deadline = time.monotonic() + limit
    while not getattr(phase, until):
        left = min(deadline, phase.moved + stall) - time.monotonic()
        if left <= 0:
            return False
        phase.changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(left):
                await phase.changed.wait()
    return True


def stuck_state(job: dict[str, Any], workload: dict[str, Any] | None) -> str:
    """One line saying where a Job that never finished stands: the Job's suspend, its conditions and active pods,
    and its Workload's conditions."""
    spec, status = job.get("spec", {}), job.get("status", {})
    conditions = ",".join(c["type"] for c in status.get("conditions", []) if c.get("status") == "True")
    parts = [
        "suspended" if spec.get("suspend") else "running",
        f"conditions={conditions or 'none'}",
        f"status={'none' if not status else 'set'}",
    ]
    if workload is None:
        parts.append("workload=none")
    else:
        held = [
            c["type"] for c in workload.get("status", {}).get("conditions", []) if c.get("status") == "True"
        ]
        parts.append(f"workload={','.join(held) or 'pending'}")
    return " ".join(parts)


async def stuck(management: Cluster, phase: Phase) -> dict[str, Any]:
    """The Jobs of ``phase`` that did not complete: how many, and how many in each state."""
    left = sorted(phase.names - set(phase.user_done))
    if not left:
        return {"count": 0, "states": {}}
    found = await management.get_json("/apis/batch/v1/namespaces/default/jobs")
    by_name = {j["metadata"]["name"]: j for j in found.get("items", [])}
    workloads: dict[str, dict[str, Any]] = {}
    with contextlib.suppress(Exception):
        listed = await management.get_json("/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads")
        for workload in listed.get("items", []):
            for owner in workload["metadata"].get("ownerReferences", []):
                workloads[owner["name"]] = workload
    states = Counter(stuck_state(by_name[n], workloads.get(n)) if n in by_name else "gone" for n in left)
    return {"count": len(left), "states": dict(states.most_common()), "examples": left[:5]}


def cpu(processes: dict[str, Process]) -> dict[str, float]:
    return {name: p.cpu_seconds() for name, p in processes.items()}


def figures_of(
    phase: Phase,
    jobs: int,
    elapsed: float,
    cpu_used: dict[str, float],
    requests: dict[str, dict[str, Counter[str]]],
    dispatcher: dict[str, str],
) -> dict[str, Any]:
    """One dispatcher's figures. ``dispatcher``: the cluster -> the client name of its requests on it."""
    dispatch = [phase.copy_added[n] - phase.created[n] for n in phase.copy_added if n in phase.created]
    sync = [phase.user_done[n] - phase.copy_done[n] for n in phase.user_done if n in phase.copy_done]
    sent = {where: requests[where].get(who, Counter()) for where, who in dispatcher.items()}
    total = sum(sum(c.values()) for c in sent.values())
    return {
        "jobs_complete": len(phase.user_done),
        "seconds_to_all_complete": round(elapsed, 2) if phase.complete else None,
        "jobs_per_s": round(len(phase.user_done) / elapsed, 2) if elapsed > 0 else None,
        "dispatch_latency": summary_ms(dispatch),
        "status_sync_latency": summary_ms(sync),
        "dispatcher_cpu_ms_per_job": round(cpu_used["dispatcher"] / jobs * 1000, 2),
        "cpu_seconds_by_process": {k: round(v, 2) for k, v in cpu_used.items()},
        "requests_per_job": round(total / jobs, 2),
        "requests_per_job_by_cluster": {where: round(sum(c.values()) / jobs, 2) for where, c in sent.items()},
        "requests_per_job_by_verb": {
            where: audit.per_job(audit.by_verb(c), jobs) for where, c in sent.items()
        },
        "requests_per_job_by_resource": {where: audit.per_job(c, jobs) for where, c in sent.items()},
    }


async def main(
    jobs: int, workers: int, limit: float, stall: float, results: Path, keep: bool = False
) -> None:
    version = kueue.pinned_version()
    assets = kueue.assets_dir(version)
    missing = kueue.missing_assets(assets)
    if missing:
        raise SystemExit(missing)
    base = Path(tempfile.mkdtemp(prefix="mq-bench-multikueue-"))
    worker_names = [f"worker-{i}" for i in range(1, workers + 1)]
    names = ["management", *worker_names]
    policy = base / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(kueue.audit_policy()))
    clusters: dict[str, Cluster] = {}
    tasks: list[asyncio.Task[None]] = []
    manager: Process | None = None
    try:
        for name in names:
            cluster = cluster_of(name, "full", max(110, 2 * jobs))
            log = base / f"{name}-audit.log"
            extra: dict[str, list[str]] = {"kube-apiserver": kueue.audit_arguments(policy, log)}
            if name != "management":
                extra["kube-controller-manager"] = list(UPSTREAM_WORKER_KCM_ARGUMENTS)
            config = {"clusters": [cluster | {"extraArgs": extra}], "controlPlane": "upstream"}
            (base / f"{name}.yaml").write_text(yaml.safe_dump(config))
            process = await start(
                ["local", "up", "--config", str(base / f"{name}.yaml"), "--state-dir", str(base / name)],
                "local clusters are up",
                base / f"{name}.log",
                WITHIN,
            )
            clusters[name] = Cluster(name, base / name / "kubeconfig", log, process)
        for c in clusters.values():
            c.client = await KubeClient.connect(c.kubeconfig, c.name, c.name, BENCH)

        # Kueue: CRDs, its namespace, a manager per cluster, then its webhooks, then the queues.
        certs = serving_cert(base / "kueue-tls", "kueue", "127.0.0.1")
        cert_dir = base / "kueue-tls" / "serving"
        cert_dir.mkdir()
        (cert_dir / "tls.crt").write_bytes(certs.cert_file.read_bytes())
        (cert_dir / "tls.key").write_bytes(certs.key_file.read_bytes())
        manifests = [m for m in yaml.safe_load_all((assets / "webhooks.yaml").read_text()) if m]
        for c in clusters.values():
            await c.kubectl("apply", "--server-side", "-f", str(assets / "crds"))
            await c.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=120s")
            await c.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": kueue.NAMESPACE}}])
        webhook_ports: dict[str, int] = {}
        for c in clusters.values():
            ports = {k: free_port() for k in ("webhook", "metrics", "health")}
            webhook_ports[c.name] = ports["webhook"]
            settings = kueue.configuration(
                webhook_port=ports["webhook"],
                cert_dir=cert_dir,
                metrics_port=ports["metrics"],
                health_port=ports["health"],
                qps=QPS,
                burst=QPS,
            )
            config_file = base / f"kueue-{c.name}.yaml"
            config_file.write_text(yaml.safe_dump(settings))
            scratch = base / f"kueue-{c.name}-etc"
            scratch.mkdir()
            argv = kueue.command(
                assets / "kueue",
                config_file,
                cert_dir,
                scratch,
                MANAGEMENT_KUEUE if c.name == "management" else "kueue",
                os.geteuid() == 0,
            )
            log_file = (base / f"kueue-{c.name}.log").open("ab")
            env = {**os.environ, "KUBECONFIG": str(c.kubeconfig)}
            spawned = await asyncio.create_subprocess_exec(*argv, stdout=log_file, stderr=log_file, env=env)
            c.kueue = Process(spawned, "")
            await ready(f"http://127.0.0.1:{ports['health']}/readyz", spawned, base / f"kueue-{c.name}.log")
        ca = certs.ca_file.read_bytes()
        for c in clusters.values():
            await c.apply(kueue.webhook_configurations(manifests, webhook_ports[c.name], ca))
        for name in worker_names:
            await clusters[name].apply(kueue.queues(jobs, "default"))
        management = clusters["management"]
        kubeconfigs = {n: clusters[n].kubeconfig.read_bytes() for n in worker_names}
        await management.apply(kueue.multikueue(kubeconfigs))
        await management.apply(kueue.queues(jobs, "default", kueue.ADMISSION_CHECK))
        await management.kubectl(
            "wait", "--for=condition=Active", "multikueuecluster", "--all", "--timeout=120s"
        )
        await management.kubectl(
            "wait", "--for=condition=Active", "admissioncheck", "--all", "--timeout=120s"
        )
        await management.kubectl("wait", "--for=condition=Active", "clusterqueue", "--all", "--timeout=120s")

        async def run_phase(
            prefix: str,
            bodies: list[dict[str, Any]],
            processes: dict[str, Process],
            dispatcher: dict[str, str],
        ) -> tuple[dict[str, Any], Phase]:
            phase = Phase({b["metadata"]["name"] for b in bodies})
            assert management.client is not None
            versions = {n: (await clusters[n].client.list(JOBS, "default"))[1] for n in names}  # type: ignore[union-attr]
            followers = [asyncio.create_task(follow_users(management.client, versions["management"], phase))]
            followers += [
                asyncio.create_task(follow_copies(clusters[w].client, versions[w], phase))  # type: ignore[arg-type]
                for w in worker_names
            ]
            tasks.extend(followers)
            offsets = {n: audit.size(c.audit_log) for n, c in clusters.items()}
            cpu_before = cpu(processes)
            started = time.perf_counter()
            await create_all(management.client, bodies, "default", phase.created)
            complete = await wait(phase, "complete", limit, stall)
            elapsed = time.perf_counter() - started
            # Cleanup (copies deleted from the workers) is part of each Job's cost, when the dispatcher does it.
            await wait(phase, "settled", max(60.0, jobs / 10), stall=30.0)
            cpu_used = {k: v - cpu_before[k] for k, v in cpu(processes).items()}
            requests = {
                n: await asyncio.to_thread(audit.count_since, c.audit_log, offsets[n])
                for n, c in clusters.items()
            }
            for follower in followers:
                follower.cancel()
            figures = figures_of(phase, jobs, elapsed, cpu_used, requests, dispatcher)
            figures["all_complete"] = complete
            figures["copies_left_on_workers"] = len(phase.copy_added) - len(phase.copies_gone)
            figures["never_finished"] = await stuck(management, phase)
            figures["requests_per_job_by_client"] = {
                n: {who: round(sum(c.values()) / jobs, 2) for who, c in sorted(counts.items())}
                for n, counts in requests.items()
            }
            print(f"{prefix}: {len(phase.user_done)}/{jobs} complete in {elapsed:.1f}s", flush=True)
            return figures, phase

        # MultiKueue.
        kueues = {"dispatcher": management.kueue} | {f"{w} kueue": clusters[w].kueue for w in worker_names}
        mk_figures, _ = await run_phase(
            "multikueue",
            [kueue.job(f"mk-{i}") for i in range(jobs)],
            kueues,  # type: ignore[arg-type]
            {"management": "kueue"} | {w: MANAGEMENT_KUEUE for w in worker_names},
        )
        mk_figures["workers_kueue_cpu_ms_per_job"] = round(
            sum(v for k, v in mk_figures["cpu_seconds_by_process"].items() if k != "dispatcher")
            / jobs
            * 1000,
            2,
        )
        mk_figures["workers_kueue_requests_per_job"] = {
            w: mk_figures["requests_per_job_by_client"][w].get("kueue", 0.0) for w in worker_names
        }
        # Its Jobs deleted (their Workloads with them) before the other run.
        await management.kubectl(
            "delete",
            "jobs",
            "-n",
            "default",
            "-l",
            kueue.QUEUE_LABEL,
            "--wait=true",
            "--timeout=600s",
            within=700,
        )
        for w in worker_names:
            await clusters[w].kubectl(
                "delete", "jobs", "-n", "default", "-l", kueue.QUEUE_LABEL, "--wait=true", "--timeout=600s",
                within=700,
            )  # fmt: skip

        # multiqueue, on the same clusters, Kueue still running.
        manager_config = {
            "management": {"kubeconfig": str(management.kubeconfig), "context": "management"},
            "workers": [
                {"name": w, "kubeconfig": str(clusters[w].kubeconfig), "context": w} for w in worker_names
            ],
            "workerSecrets": {"enabled": False},
            "metricsAddress": "127.0.0.1:0",
            "mirrorTTLSecondsAfterFinished": 0,
        }
        (base / "manager.yaml").write_text(yaml.safe_dump(manager_config))
        manager = await start(
            ["manager", "--config", str(base / "manager.yaml")], "dispatching", base / "manager.log", WITHIN
        )
        mq_figures, _ = await run_phase(
            "multiqueue",
            [multiqueue_job(f"mq-{i}") for i in range(jobs)],
            {"dispatcher": manager} | kueues,  # type: ignore[arg-type]
            {n: MULTIQUEUE_MANAGER for n in names},
        )
    finally:
        for task in tasks:
            task.cancel()
        for c in clusters.values():
            if c.client is not None:
                await c.client.close()
        owned = [manager] if manager is not None else []
        owned += [c.kueue for c in clusters.values() if c.kueue is not None]
        owned += [c.process for c in clusters.values()]
        for process in owned:
            with contextlib.suppress(ProcessLookupError):
                process.process.send_signal(signal.SIGTERM)
            await process.process.wait()

    record(
        f"multikueue/{jobs} jobs/{workers} workers",
        {
            "jobs": jobs,
            "workers": workers,
            "control_plane": "upstream",
            "settings": {
                "kueue_version": version,
                "kueue_dispatcher": kueue.ALL_AT_ONCE,
                "kueue_client_qps_burst": QPS,
                "kueue_group_kind_concurrency": kueue.GROUP_KIND_CONCURRENCY,
                "kueue_on_every_worker": True,
                "worker_kube_controller_manager": list(UPSTREAM_WORKER_KCM_ARGUMENTS),
                "kube_apiserver_audit": "Metadata level, every request (the counts' source)",
                "multiqueue_mirror_ttl_seconds": 0,
                "timeout_s": limit,
                "stall_s": stall,
            },
            "multikueue": mk_figures,
            "multiqueue": mq_figures,
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
            "note": "requests counted server-side from each kube-apiserver's audit log by User-Agent: MultiKueue = "
            "the management cluster's Kueue on every cluster (its worker clients run as multikueue-manager); the "
            "workers' own Kueue apart; multiqueue = multiqueue-manager",
        },
        results,
    )
    # Three clusters' etcd data and audit logs: hundreds of MB at 1,000 Jobs.
    if keep:
        print(f"clusters' files, logs and audit logs kept in {base}")
    else:
        await asyncio.to_thread(shutil.rmtree, base, ignore_errors=True)


async def ready(url: str, process: asyncio.subprocess.Process, log: Path) -> None:
    """Until ``url`` answers 200 (Kueue's readiness: its webhook server serves); the process must not exit."""
    deadline = time.monotonic() + WITHIN
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while time.monotonic() < deadline:
            if process.returncode is not None:
                raise RuntimeError(f"Kueue exited {process.returncode}; see {log}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(url) as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.5)
    raise RuntimeError(f"Kueue not ready within {WITHIN:g}s; see {log}")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python3 -m tests.bench.multikueue")
    parser.add_argument("--jobs", type=int, default=1000, help="this many Jobs at once, for each dispatcher")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--timeout",
        type=float,
        help="stop waiting for a run's Jobs after this many seconds (default: 900 + N/2)",
    )
    parser.add_argument(
        "--stall", type=float, default=120.0, help="... or once nothing moved for this many seconds"
    )
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help="the results file (default: %(default)s)"
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the clusters' files and logs (removed after a run that completes)",
    )
    options = parser.parse_args()
    if options.timeout is None:
        options.timeout = 900.0 + options.jobs / 2
    return options


if __name__ == "__main__":
    options = arguments()
    asyncio.run(
        main(options.jobs, options.workers, options.timeout, options.stall, options.results, options.keep)
    )
