"""The dashboard with many Jobs, in headless Chromium: how long the page takes to show them all, and how soon a
change to one Job shows on it.

Clusters are ``multiqueue local up`` processes (the management cluster, and one worker whose pods succeed at once),
the manager a ``multiqueue manager`` process with its dashboard on. N Jobs are submitted suspended, so the manager
tracks every one and none runs yet. Then:

1. page load: from opening the printed URL (token, cookie, redirect) to the table showing its first rows with all
   N Jobs counted;
2. liveness: a Job at a time is resumed; from the PATCH's answer to its row (filtered into view) showing a state
   other than Suspended, timed by the page's own clock (the same machine's).

Run: ``python -m tests.bench.dashboard [--jobs N] [--changes K]``; figures go to tests/bench/results.json under
``dashboard/<N> jobs``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from multiqueue.api.types import JOBS
from tests.bench.common import RESULTS, percentile, record
from tests.bench.dispatch_scale import Process, connect, create_all, job, start
from tests.support.browser import Page, launch


def suspended(name: str) -> dict[str, Any]:
    body = job(name)
    body["spec"]["suspend"] = True
    return body


async def clusters(base: Path, jobs_total: int) -> tuple[dict[str, Process], str]:
    """The clusters and the manager, running; the dashboard URL the manager printed."""
    processes = {}
    for name in ("management", "worker-1"):
        kubelet = "none" if name == "management" else "simulate"
        cluster = {"name": name, "kubelet": kubelet, "capacityPods": max(110, 2 * jobs_total)}
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
            {"name": "worker-1", "kubeconfig": str(base / "worker-1" / "kubeconfig"), "context": "worker-1"}
        ],
        "workerSecrets": {"enabled": False},
        "metricsAddress": "127.0.0.1:0",
        "dashboard": {"enabled": True, "address": "127.0.0.1:0"},
    }
    (base / "manager.yaml").write_text(yaml.safe_dump(config))
    processes["manager"] = await start(
        ["manager", "--config", str(base / "manager.yaml")], "dashboard on", base / "manager.log", 60.0
    )
    return processes, processes["manager"].ready.strip().rsplit(" ", 1)[-1]


async def filter_to(page: Page, name: str) -> None:
    await page.evaluate(
        "(() => { const box = document.getElementById('search');"
        f" box.value = {json.dumps(name)}; box.dispatchEvent(new Event('input')); }})()"
    )


async def main(jobs_total: int, changes: int, results: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="multiqueue-bench-") as folder:
        base = Path(folder)
        processes, url = await clusters(base, jobs_total)
        management = await connect(base / "management" / "kubeconfig", "management")
        try:
            names = [f"job-{i:05d}" for i in range(jobs_total)]
            await create_all(management, [suspended(n) for n in names], "default")
            async with launch(base / "browser") as browser:
                page = await browser.new_page(width=1280, height=900)
                # The manager may still be reading the last creates: load once they are all in its cache.
                await page.goto(url)
                await page.wait_for(f"window.dashboard.jobs.size >= {jobs_total}", timeout=120)
                began = time.perf_counter()
                await page.goto(url)
                await page.wait_for(
                    f"window.dashboard.jobs.size >= {jobs_total} && document.querySelectorAll('#jobs .row').length > 0",
                    timeout=60,
                )
                load_seconds = time.perf_counter() - began
                snapshot_bytes = await page.evaluate(
                    "fetch('/api/snapshot').then(r => r.text()).then(t => t.length)"
                )
                delays = []
                for name in names[:changes]:
                    await filter_to(page, name)
                    row = f"document.querySelector('#jobs .row[data-job=\"default/{name}\"]')"
                    await page.wait_for(f"{row}?.dataset.state === 'Suspended'")
                    await management.patch(JOBS, name, {"spec": {"suspend": False}}, "default")
                    patched = time.time()
                    shown = await page.wait_for(
                        f"(() => {{ const r = {row}; return r && r.dataset.state !== 'Suspended' ? Date.now() : 0; }})()",
                        timeout=30,
                    )
                    delays.append(max(0.0, shown / 1000 - patched))
        finally:
            await management.close()
            for process in processes.values():
                with contextlib.suppress(ProcessLookupError):
                    process.process.send_signal(signal.SIGTERM)
            for process in processes.values():
                await process.process.wait()
    record(
        f"dashboard/{jobs_total} jobs",
        {
            "jobs": jobs_total,
            "page_load_s": round(load_seconds, 3),
            "snapshot_bytes": snapshot_bytes,
            "change_shown_ms": {
                "p50": round(percentile(delays, 50) * 1000, 1),
                "p99": round(percentile(delays, 99) * 1000, 1),
                "max": round(max(delays) * 1000, 1),
            },
            "changes": len(delays),
            "note": "headless Chromium on the same 2 cores as the clusters and the manager; load: from opening "
            "the printed URL to all Jobs counted and the first rows drawn; change: from a resume's PATCH answer to "
            "the row showing it",
        },
        results,
    )


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--changes", type=int, default=20, help="Jobs resumed one at a time to time liveness")
    parser.add_argument("--results", type=Path, default=RESULTS)
    return parser.parse_args()


if __name__ == "__main__":
    options = arguments()
    asyncio.run(main(options.jobs, options.changes, options.results))
