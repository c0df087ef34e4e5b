"""``multiqueue explain`` with a manager tracking many Jobs: how long one answer takes, three ways.

Clusters are ``multiqueue local up`` processes, as in the dispatch benchmark: the management cluster and two
workers whose kubelet runs nothing (a placed Job stays running there, holding its worker's capacity); each worker
takes at most 4 cpu. The manager runs in this process, so its read model can be asked directly. Of the N Jobs,
40% finished on a worker before the manager started (created with its label, their status then made Complete);
of those submitted to the running manager, 2% of N ask 10m cpu and are placed (they stay placed), 1% ask 100 cpu
and wait (no worker has that much), the rest are suspended. The manager tracks every one, and none costs the
workers more than those placed. Once it tracks all N and has placed what it can:

1. ``in_manager``: ``explain_in_manager`` from the running manager's read model (the answer inside the manager,
   no request made), over many calls: a waiting, a placed, a suspended and a finished Job in turn;
2. ``from_clusters``: ``inspect.explain``, what the command runs: it reads the Job, lists the management cluster's
   Jobs that carry a worker's label to count what each worker's Jobs use, and asks each worker whether it
   answers, over a few calls (the waiting Job); its answer is checked to be the read model's;
3. ``cli``: ``multiqueue explain JOB --config FILE`` as a subprocess, end to end (Python start-up, imports, the
   reads of 2, printing the table), and ``multiqueue explain --help``, which is start-up and imports alone, a few
   times each (the median is recorded; the machine's load average too, as the figures vary with it).

Run: ``python -m tests.bench.explain [--jobs N] [--profile FOLDER]``; figures go to tests/bench/results.json under
``explain/<N> jobs``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from multiqueue.api.meta import key_of
from multiqueue.api.types import JOBS, Obj
from multiqueue.dispatch import inspect
from multiqueue.dispatch.config import ManagerConfig
from multiqueue.dispatch.explain import explain_in_manager
from multiqueue.dispatch.generic import GenericJob
from multiqueue.dispatch.manager import Manager
from multiqueue.dispatch.mirror import CLUSTER_LABEL
from multiqueue.dispatch.readmodel import ReadModel
from multiqueue.kube.client import KubeClient
from tests.bench.common import RESULTS, percentile, record, summary_ms
from tests.bench.dispatch_scale import SENDERS, Process, connect, create_all, job, start

WORKERS = ("worker-1", "worker-2")
IN_MANAGER_CALLS = 300
FROM_CLUSTERS_CALLS = 5
# Runs of the command (and of its start-up alone), whose median is recorded: one run on a shared machine can take
# several times another.
CLI_RUNS = 5


def asking(name: str, cpu: str, suspended: bool = False) -> dict[str, Any]:
    """A multiqueue-managed Job whose one pod requests ``cpu``."""
    body = job(name)
    spec = body["spec"]
    spec["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    if suspended:
        spec["suspend"] = True
    return body


def workload(total: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, str]]:
    """The Jobs that finished on a worker before the manager started, every Job to submit to it, and the one of
    each kind that is explained."""
    placed = max(2, total // 50)
    waiting = max(1, total // 100)
    finished = total * 2 // 5
    done = [asking(f"finished-{i:05d}", "10m") for i in range(finished)]
    for body in done:
        body["metadata"]["labels"] = {CLUSTER_LABEL: WORKERS[0]}
    bodies = [asking(f"placed-{i:05d}", "10m") for i in range(placed)]
    bodies += [asking(f"waiting-{i:05d}", "100") for i in range(waiting)]
    bodies += [asking(f"suspended-{i:05d}", "10m", True) for i in range(total - finished - placed - waiting)]
    explained = {"waiting": "waiting-00000", "placed": "placed-00000", "suspended": "suspended-00000"}
    return done, bodies, {**explained, **({"finished": "finished-00000"} if finished else {})}


async def finish_all(client: KubeClient, bodies: list[dict[str, Any]]) -> None:
    """Each Job's status made Complete, as a worker's Job would have ended (SENDERS requests in flight)."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "startTime": stamp,
        "completionTime": stamp,
        "succeeded": 1,
        "conditions": [
            {"type": kind, "status": "True", "lastProbeTime": stamp, "lastTransitionTime": stamp}
            for kind in ("SuccessCriteriaMet", "Complete")
        ],
    }
    queue = iter(bodies)

    async def sender() -> None:
        for body in queue:
            await client.patch(
                JOBS, body["metadata"]["name"], {"status": status}, "default", subresource="status"
            )

    await asyncio.gather(*(sender() for _ in range(SENDERS)))


class Settled:
    """Tells when the manager tracks every Job and holds on a worker those that fit, from its read model's
    changes."""

    def __init__(self, model: ReadModel, total: int, placed: int) -> None:
        self.model, self.total, self.placed = model, total, placed
        self.held: dict[str, bool] = {}
        self.done = asyncio.Event()

    def job_changed(self, adapter: GenericJob, job: Obj) -> None:
        self.held[key_of(job)] = self.model.identity.holds(job)
        if len(self.held) == self.total and sum(self.held.values()) == self.placed:
            self.done.set()

    def job_deleted(self, job: Obj) -> None:
        self.held.pop(key_of(job), None)

    def workers_changed(self) -> None:
        pass


async def clusters(base: Path, total: int) -> tuple[dict[str, Process], dict[str, Any]]:
    """The clusters running, and the manager's config (its file written too, for the command)."""
    processes = {}
    for name in ("management", *WORKERS):
        kubelet = "none"
        cluster = {"name": name, "kubelet": kubelet, "capacityPods": max(110, total)}
        (base / f"{name}.yaml").write_text(yaml.safe_dump({"clusters": [cluster]}))
        processes[name] = await start(
            ["local", "up", "--config", str(base / f"{name}.yaml"), "--state-dir", str(base / name)],
            "local clusters are up",
            base / f"{name}.log",
            60.0,
        )
    config = {
        "management": {"kubeconfig": str(base / "management" / "kubeconfig"), "context": "management"},
        "workers": [
            {
                "name": w,
                "kubeconfig": str(base / w / "kubeconfig"),
                "context": w,
                "capacity": {"resources": {"cpu": "4"}},
            }
            for w in WORKERS
        ],
        "workerSecrets": {"enabled": False},
        "metricsAddress": "127.0.0.1:0",
    }
    (base / "manager.yaml").write_text(yaml.safe_dump(config))
    return processes, config


async def cli_once(*args: str) -> float:
    """Seconds for ``multiqueue explain ARGS`` to answer, from spawning Python to its exit."""
    began = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "multiqueue",
        "explain",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await process.communicate()
    elapsed = time.perf_counter() - began
    if process.returncode != 0:
        raise RuntimeError(f"multiqueue explain {args} exited {process.returncode}: {out.decode()[-2000:]}")
    return elapsed


async def from_clusters_profiled(reader: ManagerConfig, name: str, folder: Path) -> None:
    """One ``inspect.explain`` under cProfile, its stats written to ``folder``/from_clusters.pstats."""
    profiler = cProfile.Profile()
    profiler.enable()
    await inspect.explain(reader, name, "default")
    profiler.disable()
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    profiler.dump_stats(folder / "from_clusters.pstats")


def load_average() -> list[float]:
    """The machine's load over the last 1, 5 and 15 minutes: on a shared machine, the figures vary with it."""
    return [round(load, 2) for load in os.getloadavg()]


async def main(total: int, results: Path, profile: Path | None = None) -> None:
    load_at_start = load_average()
    done, bodies, explained = workload(total)
    placed = sum(1 for b in bodies if b["metadata"]["name"].startswith("placed-"))
    with tempfile.TemporaryDirectory(prefix="multiqueue-bench-") as folder:
        base = Path(folder)
        processes, config = await clusters(base, total)
        management = await connect(base / "management" / "kubeconfig", "management")
        manager = Manager(ManagerConfig.model_validate(config))
        try:
            # Finished before the manager starts, so it never places them: they count as Jobs that ran.
            await create_all(management, done, "default")
            await finish_all(management, done)
            await manager.start()
            model = manager.read_model
            assert model is not None
            settled = Settled(model, total, placed)
            subscription = model.subscribe(settled)
            began = time.perf_counter()
            await create_all(management, bodies, "default")
            async with asyncio.timeout(max(300.0, total / 10)):
                await settled.done.wait()
            subscription.cancel()
            settle_seconds = time.perf_counter() - began

            in_manager: list[float] = []
            for i in range(IN_MANAGER_CALLS):
                name = list(explained.values())[i % len(explained)]
                start_at = time.perf_counter()
                shown = explain_in_manager(model, "Job", f"default/{name}")
                in_manager.append(time.perf_counter() - start_at)
                assert shown is not None, name
            states = {
                what: explain_in_manager(model, "Job", f"default/{name}") for what, name in explained.items()
            }
            decisions = {what: shown.decision for what, shown in states.items() if shown is not None}

            reader = ManagerConfig.model_validate(config)
            from_clusters: list[float] = []
            for _ in range(FROM_CLUSTERS_CALLS):
                start_at = time.perf_counter()
                read = await inspect.explain(reader, explained["waiting"], "default")
                from_clusters.append(time.perf_counter() - start_at)
            # Both ways count what the placed Jobs use of each worker: the waiting Job's answer is the same.
            waiting = states["waiting"]
            agree = waiting is not None and read.as_dict() == waiting.as_dict()
            if profile is not None:
                await from_clusters_profiled(reader, explained["waiting"], profile)
            cli_seconds, startup_seconds = [], []
            for _ in range(CLI_RUNS):
                cli_seconds.append(
                    await cli_once(explained["waiting"], "--config", str(base / "manager.yaml"))
                )
                startup_seconds.append(await cli_once("--help"))
            load_at_end = load_average()
        finally:
            await manager.stop()
            await management.close()
            for process in processes.values():
                with contextlib.suppress(ProcessLookupError):
                    process.process.send_signal(signal.SIGTERM)
            for process in processes.values():
                await process.process.wait()
    record(
        f"explain/{total} jobs",
        {
            "jobs": total,
            "jobs_finished": len(done),
            "jobs_placed": placed,
            "jobs_waiting": sum(1 for b in bodies if b["metadata"]["name"].startswith("waiting-")),
            "workers": len(WORKERS),
            "seconds_to_track_all": round(settle_seconds, 1),
            "in_manager": {**summary_ms(in_manager), "calls": len(in_manager)},
            "from_clusters": {
                "p50_ms": round(percentile(from_clusters, 50) * 1000, 1),
                "max_ms": round(max(from_clusters) * 1000, 1),
                "calls": len(from_clusters),
            },
            "cli_end_to_end_ms": round(percentile(cli_seconds, 50) * 1000, 1),
            "cli_end_to_end_max_ms": round(max(cli_seconds) * 1000, 1),
            "cli_startup_ms": round(percentile(startup_seconds, 50) * 1000, 1),
            "cli_startup_max_ms": round(max(startup_seconds) * 1000, 1),
            "cli_runs": CLI_RUNS,
            "decisions": decisions,
            "from_clusters_same_as_in_manager": agree,
            "load_average": {"at_start": load_at_start, "after_cli": load_at_end},
            "note": "embedded clusters, each a local up process; the manager in the bench's process; from_clusters "
            "and cli explain a waiting Job; cli_end_to_end includes Python start-up and imports, which cli_startup "
            "(multiqueue explain --help) measures alone, each the median of cli_runs runs",
        },
        results,
    )


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument(
        "--profile", type=Path, help="write cProfile stats of one inspect.explain to this folder"
    )
    return parser.parse_args()


if __name__ == "__main__":
    options = arguments()
    asyncio.run(main(options.jobs, options.results, options.profile))
