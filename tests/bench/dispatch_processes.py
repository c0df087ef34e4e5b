"""The dispatcher at scale as it is deployed: each cluster and the manager in a process of its own.

Same workload as ``tests.bench.dispatch`` (1,000 Jobs at once, workers simulating 0 s pods), but the three local
clusters run as three ``multiqueue local up`` processes and the manager as ``multiqueue manager``, so the work
spreads over the machine's cores instead of sharing one event loop. Request counts come from each API server's
``apiserver_request_total``.
Run: ``python -m tests.bench.dispatch_processes``; figures go to tests/bench/results.json.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import signal
import ssl
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import yaml

from multiqueue.api.types import JOBS
from multiqueue.kube.client import KubeClient
from tests.bench.common import record, summary_ms
from tests.bench.dispatch import JOBS_TOTAL, _completions, _job, _watch_some

CLUSTERS = ("management", "worker-1", "worker-2")


async def _start(args: list[str], ready: str, log: Path) -> asyncio.subprocess.Process:
    """Start a multiqueue command; return once it prints the line that says it is serving."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "multiqueue", *args, stdout=asyncio.subprocess.PIPE, stderr=log.open("ab")
    )
    assert process.stdout is not None
    async with asyncio.timeout(60):
        while True:
            line = (await process.stdout.readline()).decode()
            if not line:
                raise RuntimeError(f"multiqueue {' '.join(args)} exited; see {log}")
            if ready in line:
                break
    # Keep reading so a full pipe never blocks the child.
    asyncio.get_running_loop().create_task(process.stdout.read())
    return process


async def _requests(kubeconfig: Path, context: str) -> int:
    """All requests an API server has answered so far, from its own /metrics."""
    config = yaml.safe_load(await asyncio.to_thread(kubeconfig.read_text))
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context)
    user = next(u["user"] for u in config["users"] if u["name"] == context)
    ca = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ca)) as session,
        session.get(
            f"{cluster['server']}/metrics", headers={"Authorization": f"Bearer {user['token']}"}
        ) as response,
    ):
        text = await response.text()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("apiserver_request_total{")
    )


async def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="mq-bench-procs-"))
    processes: list[asyncio.subprocess.Process] = []
    clients: dict[str, KubeClient] = {}
    try:
        for name in CLUSTERS:
            local = base / f"{name}.yaml"
            local.write_text(
                yaml.safe_dump({"clusters": [{"name": name, "kubelet": "simulate", "capacityPods": 2000}]})
            )
            processes.append(
                await _start(
                    ["local", "up", "--config", str(local), "--state-dir", str(base / name)],
                    "local clusters are up",
                    base / f"{name}.log",
                )
            )
        manager_config = {
            "management": {"kubeconfig": str(base / "management" / "kubeconfig"), "context": "management"},
            "workers": [
                {"name": w, "kubeconfig": str(base / w / "kubeconfig"), "context": w} for w in CLUSTERS[1:]
            ],
            "workerSecrets": {"enabled": False},
            "metricsAddress": "127.0.0.1:0",
        }
        (base / "manager.yaml").write_text(yaml.safe_dump(manager_config))
        processes.append(
            await _start(
                ["manager", "--config", str(base / "manager.yaml")], "dispatching", base / "manager.log"
            )
        )
        for name in CLUSTERS:
            clients[name] = await KubeClient.connect(base / name / "kubeconfig", name, name)
        before = {n: await _requests(base / n / "kubeconfig", n) for n in CLUSTERS}
        names = {f"bench-{i}" for i in range(JOBS_TOTAL)}
        user_done: dict[str, float] = {}
        per_worker: list[dict[str, float]] = [{}, {}]
        watchers = [asyncio.create_task(_completions(clients["management"], names, user_done))]
        watchers += [
            asyncio.create_task(_watch_some(clients[w], names, seen))
            for w, seen in zip(CLUSTERS[1:], per_worker, strict=True)
        ]
        started = time.perf_counter()
        await asyncio.gather(
            *(clients["management"].create(JOBS, _job(i), "default") for i in range(JOBS_TOTAL))
        )
        async with asyncio.timeout(900):
            await watchers[0]
        elapsed = time.perf_counter() - started
        for task in watchers[1:]:
            task.cancel()
        mirror_done = {**per_worker[0], **per_worker[1]}
        requests = {n: await _requests(base / n / "kubeconfig", n) - before[n] for n in CLUSTERS}
    finally:
        for client in clients.values():
            await client.close()
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        for process in processes:
            await process.wait()
    record(
        "dispatch_processes",
        {
            "jobs": JOBS_TOTAL,
            "seconds_to_all_complete": round(elapsed, 2),
            "jobs_per_s": round(JOBS_TOTAL / elapsed, 1),
            "status_sync_latency": summary_ms(
                [user_done[n] - mirror_done[n] for n in user_done if n in mirror_done]
            ),
            "api_requests_per_job_management": round(requests["management"] / JOBS_TOTAL, 2),
            "api_requests_per_job_workers": round(
                (requests["worker-1"] + requests["worker-2"]) / JOBS_TOTAL, 2
            ),
            "note": "three local-up processes and a manager process; server-side counts include the workers' "
            "Job controllers and kubelets, the bench's own creates and its watches",
        },
    )


if __name__ == "__main__":
    asyncio.run(main())
